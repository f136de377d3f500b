"""Reading a log directory into three DataFrames: deliveries, views, metrics snapshots.

Theory of operation: Spark's JSON reader lists every file whose name matches
``*.jsonl*`` (``delivery.jsonl``, ``delivery.jsonl.1``, ``metrics.jsonl.3``, the
``view.jsonl`` of a daemon with delivery logging off) recursively below LOGDIR, parses
it once with ``schema.LOG_SCHEMA`` and the records are told apart by ``type``. The
records are projected to the columns the job uses and persisted (memory, spilling to
disk) so that the figures and the audit do not parse the JSON again. With
``--master spark://...`` LOGDIR must be on a filesystem every executor sees.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from analytics.schema import DELIVERY_COLUMNS, LOG_SCHEMA, METRICS_COLUMNS, VIEW_COLUMNS
from protocols.errors import ConfigurationError


@dataclass
class Logs:
    base: DataFrame  # every record, persisted; ``type`` tells them apart
    deliveries: DataFrame
    views: DataFrame
    metrics: DataFrame


def check_logdir(logdir: str) -> str:
    """The absolute log directory; ``ConfigurationError`` if it holds no log files.

    URIs (``hdfs://``, ``s3a://`` ...) are left to Spark."""
    if "://" in logdir:
        return logdir
    path = Path(logdir)
    if not path.is_dir():
        raise ConfigurationError(f"log directory {logdir!r} does not exist")
    if not any(p.is_file() for p in path.rglob("*.jsonl*")):
        raise ConfigurationError(f"no *.jsonl* log files below {logdir!r}")
    return str(path.resolve())


def read_logs(spark: SparkSession, logdir: str) -> Logs:
    logdir = check_logdir(logdir)
    raw = (
        spark.read.schema(LOG_SCHEMA)
        .option("recursiveFileLookup", "true")
        .option("pathGlobFilter", "*.jsonl*")
        .option("mode", "PERMISSIVE")
        .json(logdir)
    )
    columns = ["type", *dict.fromkeys([*DELIVERY_COLUMNS, *VIEW_COLUMNS, *METRICS_COLUMNS])]
    base = (
        raw.where(F.col("type").isin("delivery", "view", "metrics"))
        .select(*columns)
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    return Logs(
        base=base,
        deliveries=base.where(F.col("type") == "delivery").select(*DELIVERY_COLUMNS),
        views=base.where(F.col("type") == "view").select(*VIEW_COLUMNS),
        metrics=base.where(F.col("type") == "metrics").select(*METRICS_COLUMNS),
    )
