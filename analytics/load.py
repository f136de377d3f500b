"""Reading a log directory into DataFrames: deliveries, views, gaps, starts, losses, metrics.

Theory of operation: Spark's JSON reader lists every file whose name matches
``*.jsonl*`` (``delivery.jsonl``, ``delivery.jsonl.1``, ``metrics.jsonl.3``, the
``view.jsonl`` of a daemon with delivery logging off) recursively below LOGDIR, parses
it once with ``schema.LOG_SCHEMA`` (fields it does not list are ignored, so records may
gain fields without breaking the job) and gives every line a ``status``:

- ``ok``: a record of log schema 1 of type ``delivery``, ``view``, ``gap``, ``start``,
  ``lost`` or ``metrics`` with the fields the job needs (``REQUIRED``; an ordered
  delivery also needs its ``position``, a gap's ``after`` is null or two numbers);
- ``unreadable``: not a JSON object, or one without a ``type``;
- ``other type``: a record type this job does not read (a later daemon may add some);
- ``other schema``: ``schema`` is not 1;
- ``incomplete``: a required field is missing, null or of the wrong type.

The lines are projected to the columns the job uses plus ``status`` and persisted
(memory, spilling to disk) so that the figures and the audit do not parse the JSON
again; ``survey`` counts them per type and status in that same pass (and lists the
delivering nodes and the largest member id). Only ``ok``
records reach the DataFrames; the others are counted and reported, never fatal. A
missing ``incarnation`` reads as 0 and a view record's missing ``primary`` as true (the
records of a daemon from before membership).
With ``--master spark://...`` LOGDIR must be on a filesystem every executor sees.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from .schema import (
    DELIVERY_COLUMNS,
    GAP_COLUMNS,
    LOG_SCHEMA,
    LOST_COLUMNS,
    METRICS_COLUMNS,
    START_COLUMNS,
    VIEW_COLUMNS,
)

TYPES = ("delivery", "view", "gap", "start", "lost", "metrics")  # metrics last (``_status``)
GLOBAL = "global"
"""A federated daemon's cross-cluster delivery record: not in ``TYPES`` (this schema does
not read it), counted apart by ``survey`` for the cross-cluster audit."""
REQUIRED = {
    "delivery": ["node", "view", "variant", "sender", "seq", "count", "service", "rule",
                 "send_ts", "ts"],
    "view": ["node", "view", "ts", "members"],
    "gap": ["node", "view", "ts"],
    "start": ["node", "ts"],
    "lost": ["node", "ts", "since", "views"],
    "metrics": ["node", "ts"],
}


@dataclass
class Logs:
    base: DataFrame  # every line with its ``status``, persisted
    deliveries: DataFrame
    views: DataFrame  # installed views (primary) and lost ones (primary false)
    gaps: DataFrame
    starts: DataFrame
    losses: DataFrame  # ``lost`` records: spans of a life's records its disk refused
    metrics: DataFrame


def _complete(kind: str) -> Column:
    ok = F.lit(True)
    for name in REQUIRED[kind]:
        ok = ok & F.col(name).isNotNull()
    if kind == "delivery":
        ok = ok & (F.col("count") >= 1) & (
            (F.col("service") == "causal") | F.col("position").isNotNull())
    if kind == "gap":
        after = F.col("after")
        ok = ok & (after.isNull() | ((F.size(after) == 2) & after[0].isNotNull()
                                     & after[1].isNotNull()))
    return ok


def _status() -> Column:
    kind = F.col("type")
    complete = F.when(kind == "delivery", _complete("delivery"))
    for other in TYPES[1:-1]:
        complete = complete.when(kind == other, _complete(other))
    complete = complete.otherwise(_complete("metrics"))
    return (
        F.when(kind.isNull(), "unreadable")
        .when(~kind.isin(*TYPES), "other type")
        .when(F.col("schema").isNull() | (F.col("schema") != 1), "other schema")
        .when(~complete, "incomplete")
        .otherwise("ok")
    )


def read_logs(spark: SparkSession, location: str) -> Logs:
    """The records below ``location`` (a local path or a URI Spark can read)."""
    raw = (
        spark.read.schema(LOG_SCHEMA)
        .option("recursiveFileLookup", "true")
        .option("pathGlobFilter", "*.jsonl*")
        .option("mode", "PERMISSIVE")
        .json(location)
    )
    names = dict.fromkeys([*DELIVERY_COLUMNS, *VIEW_COLUMNS, *GAP_COLUMNS, *START_COLUMNS,
                           *LOST_COLUMNS, *METRICS_COLUMNS])
    defaults = {"incarnation": F.lit(0).cast("long"), "primary": F.lit(True)}
    columns = [F.coalesce(F.col(c), defaults[c]).alias(c) if c in defaults else F.col(c)
               for c in names]
    base = raw.select("type", *columns, _status().alias("status")).persist(
        StorageLevel.MEMORY_AND_DISK)
    ok = base.where(F.col("status") == "ok")

    def of(kind: str, cols: list[str]) -> DataFrame:
        return ok.where(F.col("type") == kind).select(*cols)

    return Logs(
        base=base,
        deliveries=of("delivery", DELIVERY_COLUMNS),
        views=of("view", VIEW_COLUMNS),
        gaps=of("gap", GAP_COLUMNS),
        starts=of("start", START_COLUMNS),
        losses=of("lost", LOST_COLUMNS),
        metrics=of("metrics", METRICS_COLUMNS),
    )


@dataclass
class Survey:
    """What the first pass over the lines found (one Spark job, which fills the cache)."""

    lines: dict[str, int]  # ok records per type (``delivery``, ``view``, ...), ignored lines
    nodes: list[int]  # nodes with delivery records
    max_member: int | None  # the largest node id in a view's or start record's members


def survey(logs: Logs) -> Survey:
    """Lines per outcome (the ``ok`` records of each type, ``global`` records, and the
    ignored lines per status: ``unreadable``, ``other type``, ...), the delivering nodes,
    the largest member."""
    rows = logs.base.groupBy("type", "status").agg(
        F.count(F.lit(1)).alias("n"),
        F.collect_set("node").alias("nodes"),
        F.max(F.array_max("members")).alias("max_member"),
    ).collect()
    lines: dict[str, int] = {}
    nodes: list[int] = []
    max_member = None
    for r in rows:
        key = r["type"] if r["status"] == "ok" else r["status"]
        if r["type"] == GLOBAL and r["status"] == "other type":
            key = GLOBAL  # read by the cross-cluster audit (``federation``), not ignored
        lines[key] = lines.get(key, 0) + int(r["n"])
        if r["status"] == "ok" and r["type"] == "delivery":
            nodes = sorted(r["nodes"])
        if r["status"] == "ok" and r["type"] in ("view", "start") and r["max_member"] is not None:
            max_member = max(max_member or 0, int(r["max_member"]))
    return Survey(lines, nodes, max_member)
