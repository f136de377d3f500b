"""The virtual-synchrony stage of the job: small records to the driver, status back.

Theory of operation: the view, gap, start and metrics records are few (a handful per
view change and per metrics interval), so one pass over the cached lines brings them to
the driver (metrics as the last time each process wrote); ``audit.per_process_view``
brings one row per (process, view). ``history.build`` derives the view history and its
checks from them; the per-(process, view) ``status`` goes back to Spark as a small
DataFrame that the delivery audit broadcast-joins. ``write_table`` writes the driver's
pandas tables as Parquet, in the report's layout (a directory per table), with an
explicit Arrow schema so that an empty table has its columns too.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from . import audit, history
from .load import Logs

STATUS_SCHEMA = StructType([
    StructField("node", IntegerType()), StructField("incarnation", LongType()),
    StructField("view", LongType()), StructField("installed", BooleanType()),
    StructField("complete", BooleanType()), StructField("install_ts", DoubleType()),
    StructField("end_ts", DoubleType()), StructField("end_reason", StringType()),
    StructField("trusted_end", LongType()), StructField("log_lost", BooleanType()),
])

SMALL = ["type", "node", "incarnation", "view", "ts", "members", "primary", "previous",
         "reason", "after", "since", "views", "refused"]


def _pandas(df: DataFrame) -> pd.DataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return df.toPandas()


def collect(logs: Logs) -> history.History:
    """The view history of the logs (two Spark jobs; small results only)."""
    small = _pandas(logs.base.where((F.col("status") == "ok") & (F.col("type") != "delivery"))
                    .select(*SMALL))
    per_pv = _pandas(audit.per_process_view(logs.deliveries))

    def of(kind: str, cols: list[str]) -> pd.DataFrame:
        return small.loc[small["type"] == kind, cols].reset_index(drop=True)

    metrics = of("metrics", ["node", "incarnation", "ts"])
    ends = {(int(n), int(i)): float(t) for (n, i), t in
            metrics.groupby(["node", "incarnation"])["ts"].max().items()}
    return history.build(
        of("view", ["node", "incarnation", "view", "ts", "members", "primary", "previous",
                    "reason"]),
        of("gap", ["node", "incarnation", "view", "ts", "after"]),
        of("start", ["node", "incarnation", "ts", "members"]),
        per_pv, ends,
        of("lost", ["node", "incarnation", "ts", "since", "views", "refused"]))


def status_frame(spark: SparkSession, status: pd.DataFrame) -> DataFrame:
    """``history.status`` as a Spark DataFrame (NaN times become null)."""
    def clean(x: Any) -> Any:
        return None if isinstance(x, float) and math.isnan(x) else x

    rows = [tuple(clean(x) for x in r) for r in status[STATUS_SCHEMA.fieldNames()]
            .astype(object).itertuples(index=False)]
    return spark.createDataFrame(rows, STATUS_SCHEMA)


MEMBERS_SCHEMA = StructType([
    StructField("view", LongType()), StructField("members", ArrayType(IntegerType())),
    StructField("mask", LongType()),
])


def members_frame(spark: SparkSession, hist: history.History) -> DataFrame:
    """Per view, the nodes of its complete members whose records there are all in the
    logs (``History.audited``) and their bit mask (bit ``node`` set for each; the ids the
    mask is used for are below 63)."""
    rows = []
    for view, procs in sorted(hist.audited.items()):
        nodes = sorted({n for n, _ in procs})
        if nodes:
            rows.append((view, nodes, sum(1 << min(n, 62) for n in set(nodes))))
    return spark.createDataFrame(rows, MEMBERS_SCHEMA)


def write_table(df: pd.DataFrame, out: Path, name: str, types: dict[str, Any]) -> Path:
    """``df`` as ``out/name/part-00000.parquet`` with the Arrow ``types`` of its columns."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([(c, types[c]) for c in df.columns])
    table = pa.Table.from_pandas(df.astype(object).where(df.notna(), None), schema=schema,
                                 preserve_index=False)
    directory = out / name
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.glob("*"):
        old.unlink()
    pq.write_table(table, directory / "part-00000.parquet")
    return directory


def arrow_types() -> dict[str, Any]:
    """The Arrow type of every column of the driver's tables (by column name)."""
    import pyarrow as pa

    i64, f64, s = pa.int64(), pa.float64(), pa.string()
    lst = pa.list_(pa.int64())
    return {
        "node": i64, "incarnation": i64, "view": i64, "installed": pa.bool_(),
        "complete": pa.bool_(), "completed_by": lst, "install_ts": f64, "end_ts": f64,
        "end_reason": s,
        "trusted_end": i64, "messages": i64, "first_position": i64, "last_position": i64,
        "problem": s, "after_view": i64, "after_position": i64, "last_view": i64,
        "missed": i64, "nodes": lst, "detail": s, "previous": i64, "members": lst,
        "installed_by": lst, "lost_by": lst, "kind": s, "start": f64, "end": f64,
        "number": i64, "log_lost": pa.bool_(), "since": f64, "until": f64, "views": lst,
        "refused": i64,
    }
