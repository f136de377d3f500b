"""The cross-cluster audit: do the daemons of a federation deliver global messages in
one order?

Theory of operation. Every daemon with a ``[federation]`` writes a ``global`` record per
cross-cluster message it delivers (``docs/log-schema.md``): the message's id ``msg``,
this daemon's ``cluster`` and ``node``, its life (``incarnation``) and ``index``, the
number of global deliveries before it in that life. Each daemon life's records, in
``index`` order, are one sequence; atomic multicast requires that the relation "m was
delivered before m' somewhere" has no cycle (seed 003, section 2: the global order is
acyclic). Two messages delivered in opposite orders by two daemons are the shortest
cycle; longer ones run through several clusters (a before b in cluster x, b before c in
y, c before a in z) and no pair of daemons sees them.

The job reads the ``global`` records only (a schema of their fields), builds the edges
between consecutive deliveries of each daemon life in Spark (``lag`` over the life's
``index``), keeps the distinct edges, and looks for a cycle on the driver
(``find_cycle``: Kahn's algorithm peels every message with no predecessor left; what
cannot be peeled lies on or behind a cycle, and a walk along remaining edges finds one).
The union of consecutive edges has a cycle exactly when the union of the sequences'
transitive orders has one. Node ids repeat across clusters, so a daemon is
``(cluster, node)``. ``amcast analyze`` runs it whenever the logs hold ``global`` records
(figure ``cross-cluster order``; a cycle fails the order audit, exit status 1); alone,
on the directory above every cluster's logs::

    python -m amcast.analytics.federation LOGDIR
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from .paths import logs_location
from .session import get_session

GLOBAL_SCHEMA = StructType([
    StructField("schema", IntegerType()), StructField("type", StringType()),
    StructField("node", IntegerType()), StructField("incarnation", LongType()),
    StructField("cluster", StringType()), StructField("msg", StringType()),
    StructField("gts", LongType()), StructField("index", LongType()),
    StructField("clusters", ArrayType(StringType())),
])


@dataclass(frozen=True)
class Verdict:
    records: int
    """``global`` records read (complete ones)."""
    daemons: int
    """Daemon lives that delivered global messages."""
    edges: int
    """Distinct "delivered right before" pairs."""
    cycle: list[str] | None
    """Message ids around a cycle (the first repeated at the end), or None."""

    @property
    def ok(self) -> bool:
        return self.cycle is None


def read_global(spark: SparkSession, location: str) -> DataFrame:
    """The complete ``global`` records below ``location``."""
    raw = (spark.read.schema(GLOBAL_SCHEMA).option("recursiveFileLookup", "true")
           .option("pathGlobFilter", "*.jsonl*").option("mode", "PERMISSIVE").json(location))
    return raw.where(
        (F.col("type") == "global") & (F.col("schema") == 1) & F.col("node").isNotNull()
        & F.col("cluster").isNotNull() & F.col("msg").isNotNull()
        & F.col("index").isNotNull()
    ).select("cluster", "node", F.coalesce("incarnation", F.lit(0)).alias("incarnation"),
             "index", "msg", "gts")


def order_edges(records: DataFrame) -> DataFrame:
    """Distinct ``(before, after)`` pairs of messages one daemon life delivered one right
    after the other."""
    life = Window.partitionBy("cluster", "node", "incarnation").orderBy("index")
    return (records.withColumn("before", F.lag("msg").over(life))
            .where(F.col("before").isNotNull() & (F.col("before") != F.col("msg")))
            .select("before", F.col("msg").alias("after")).distinct())


def find_cycle(edges: Iterable[tuple[str, str]]) -> list[str] | None:
    """A cycle of the directed graph ``edges`` (its nodes in order, the first repeated
    at the end), or None when it has none."""
    succ: dict[str, set[str]] = defaultdict(set)
    indegree: dict[str, int] = defaultdict(int)
    for a, b in edges:
        if b not in succ[a]:
            succ[a].add(b)
            indegree[b] += 1
            indegree.setdefault(a, 0)
    ready = deque(n for n, d in indegree.items() if d == 0)
    while ready:
        n = ready.popleft()
        for m in succ.get(n, ()):
            indegree[m] -= 1
            if indegree[m] == 0:
                ready.append(m)
    left = {n for n, d in indegree.items() if d > 0}
    if not left:
        return None
    # every node left has a predecessor left: walk backwards until one repeats
    pred: dict[str, str] = {}
    for a, bs in succ.items():
        if a in left:
            for b in bs:
                if b in left:
                    pred.setdefault(b, a)
    node = min(left)
    seen: dict[str, int] = {}
    path: list[str] = []
    while node not in seen:
        seen[node] = len(path)
        path.append(node)
        node = pred[node]
    cycle = path[seen[node]:][::-1]
    return [*cycle, cycle[0]]


def audit(spark: SparkSession, location: str) -> Verdict:
    records = read_global(spark, location)
    n = records.count()
    daemons = records.select("cluster", "node", "incarnation").distinct().count()
    edges = [(r.before, r.after) for r in order_edges(records).collect()]
    return Verdict(n, daemons, len(edges), find_cycle(edges))


def sentence(v: Verdict) -> str:
    """The verdict in plain words (a note of ``amcast analyze``)."""
    if v.cycle is None:
        return (f"Cross-cluster order PASSED: the {v.records} global delivery records of "
                f"{v.daemons} daemon li{'ves' if v.daemons != 1 else 'fe'} ({v.edges} "
                "distinct pairs delivered one right after the other) merge into an "
                "acyclic delivered-before relation: one order of the cross-cluster "
                "messages.")
    ring = " -> ".join(v.cycle)
    return (f"Cross-cluster order FAILED: the daemons' global deliveries form a cycle of "
            f"{len(v.cycle) - 1} messages: {ring} (each delivered before the next by some "
            "daemon).")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("logdir", help="the directory above every cluster's log directories")
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args(argv)
    spark = get_session(args.master, shuffle_partitions=2, app_name="amcast-federation")
    try:
        v = audit(spark, logs_location(args.logdir))
    finally:
        spark.stop()
    print(json.dumps({"ok": v.ok, "global_records": v.records, "daemon_lives": v.daemons,
                      "edges": v.edges, "cycle": v.cycle}))
    return 0 if v.ok else 1


if __name__ == "__main__":
    sys.exit(main())
