"""The analysis job: logs in, Parquet tables + charts + index.html + a summary out.

Theory of operation: ``run`` takes a SparkSession and goes through the stages, printing
each one with its elapsed time on stderr: read and persist the records (``load``), the
per-window figures (``figures``), the order audit (``audit``), then the charts and
``index.html`` (``charts``, ``htmlpage``). Every table is written as Parquet under REPORTDIR
(``throughput/``, ``latency/``, ``latency_histogram/``, ``ntail/``, ``ntail_histogram/``,
``rules/``, ``overhead/``, ``views/``, ``summary/``, ``violations/``, ``duplicates/``,
``missing/``); only small results (per-window tables, audit counts and first rows) reach
the driver. ``run`` returns an ``amcast.report`` dict (title, tables, figures, notes,
plus ``audit`` with the counts), printed by ``amcast analyze`` or by ``main`` here.

Run it with ``amcast analyze LOGDIR --out DIR`` (embedded ``local[*]`` Spark) or, for a
cluster, ``spark-submit analytics/job.py LOGDIR --out DIR`` (master and resources from
spark-submit; the driver needs the amcast package importable, the executors do not: the
job uses Spark built-in functions only).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script by spark-submit: import the package instead
    _here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]
    sys.path.insert(0, str(_here.parent))

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from analytics import audit, charts, figures, htmlpage
from analytics.load import read_logs
from analytics.options import add_arguments

SHOWN = 50  # audit rows shown in index.html and the terminal


class Progress:
    """Stage lines with elapsed seconds on stderr (silent when ``quiet``)."""

    def __init__(self, quiet: bool = False) -> None:
        self.start = time.monotonic()
        self.quiet = quiet

    def __call__(self, message: str) -> None:
        if not self.quiet:
            print(f"[analyze {time.monotonic() - self.start:6.1f}s] {message}",
                  file=sys.stderr, flush=True)


def _pandas(df: DataFrame) -> Any:
    """A small table as pandas (pyspark's own pandas deprecation warnings silenced)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return df.toPandas()


def _write(df: DataFrame, out: Path, name: str) -> DataFrame:
    path = str(out / name)
    df.coalesce(1).write.mode("overwrite").parquet(path)
    return df.sparkSession.read.parquet(path)


def run(
    spark: SparkSession, logdir: str, out: str | Path, *, window_s: float = 10.0,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    say = progress or (lambda _m: None)
    started = time.monotonic()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)

    say(f"reading logs below {logdir} ...")
    logs = read_logs(spark, logdir)
    counts = {r["type"]: r["count"] for r in logs.base.groupBy("type").count().collect()}
    records = counts.get("delivery", 0)
    say(f"read {records:,} delivery, {counts.get('view', 0):,} view and "
        f"{counts.get('metrics', 0):,} metrics records")

    nodes = sorted(r["node"] for r in logs.deliveries.select("node").distinct().collect())
    members = logs.views.select(F.max(F.array_max("members"))).first()[0]
    small_ids = max([*nodes, members or 0, 0]) < 63
    d = figures.with_window(logs.deliveries, window_s)
    per_node = audit.vertices_per_node(logs.deliveries).persist(StorageLevel.MEMORY_AND_DISK)
    tables: dict[str, DataFrame] = {}
    stages: list[tuple[str, str, Callable[[], DataFrame]]] = [
        ("throughput", "throughput per window", lambda: figures.throughput(d, window_s)),
        ("latency", "latency percentiles per window", lambda: figures.latency(d)),
        ("latency_histogram", "latency histogram", lambda: figures.latency_histogram(d)),
        ("ntail", "avg Ntail(G) per window", lambda: figures.ntail(d)),
        ("ntail_histogram", "Ntail(G) histogram", lambda: figures.ntail_histogram(d)),
        ("rules", "rule mix", lambda: figures.rules(d)),
        ("overhead", "retransmissions and drops", lambda: figures.overhead(logs.metrics,
                                                                            window_s)),
        ("views", "view changes", lambda: figures.views(logs.views, window_s)),
        ("summary", "summary per node and variant",
         lambda: figures.summary(logs.deliveries, logs.metrics, logs.views)),
        ("violations", "audit: total order across node pairs",
         lambda: audit.order_violations(logs.deliveries)),
        ("duplicates", "audit: duplicate deliveries",
         lambda: audit.duplicates(logs.deliveries, per_node)),
        ("missing", "audit: messages missing at members",
         lambda: audit.missing(logs.deliveries, logs.views, per_node, small_ids=small_ids)),
    ]
    for name, what, make in stages:
        say(f"{what} -> {name}/")
        tables[name] = _write(make(), out, name)

    audit_counts = {k: tables[k].count() for k in ("violations", "duplicates", "missing")}
    audit_rows = {k: _pandas(tables[k].limit(SHOWN)) for k in audit_counts}
    ok = not any(audit_counts.values())
    verdict = _verdict(audit_counts, audit_rows, len(nodes))

    say("charts and index.html ...")
    pngs = {
        "Throughput over time": charts.throughput(
            _pandas(tables["throughput"]), out / "throughput.png").name,
        "Latency distribution": charts.latency(
            _pandas(tables["latency_histogram"]), out / "latency.png").name,
        "Ntail(G) at delivery per variant": charts.ntail(
            _pandas(tables["ntail_histogram"]), out / "ntail.png").name,
    }
    summary = _summary_table(tables["summary"])
    elapsed = time.monotonic() - started
    figs: dict[str, Any] = {
        "order audit": "PASS" if ok else "FAIL",
        "order violations (node pairs)": audit_counts["violations"],
        "duplicate deliveries (messages)": audit_counts["duplicates"],
        "missing deliveries (messages x nodes)": audit_counts["missing"],
        "nodes": len(nodes),
        "delivery records": records,
        "seconds": round(elapsed, 2),
        "records/s": round(records / elapsed) if elapsed else 0,
        "report": str(out / "index.html"),
    }
    title = f"amcast analyze: {logdir}"
    (out / "index.html").write_text(htmlpage.page(
        title=title, verdict_ok=ok, verdict=verdict, summary=summary, figures=figs,
        charts=pngs, audit_tables=audit_rows, audit_counts=audit_counts,
        tables=[name for name, _, _ in stages],
    ), encoding="utf-8")
    logs.base.unpersist()
    per_node.unpersist()
    say(f"done: {out / 'index.html'}")
    return {
        "title": title,
        "tables": [summary],
        "figures": figs,
        "notes": verdict,
        "audit": {k: {"count": audit_counts[k], "first": _records(audit_rows[k])}
                  for k in audit_counts},
    }


def _records(df: Any) -> list[dict[str, Any]]:
    """Rows as plain Python values (numpy scalars and arrays become ints and lists)."""
    return [{k: v.tolist() if hasattr(v, "tolist") else v for k, v in row.items()}
            for row in df.to_dict("records")]


def _verdict(counts: dict[str, int], rows: dict[str, Any], n_nodes: int) -> list[str]:
    if not any(counts.values()):
        return [f"Order audit PASSED: the {n_nodes} nodes agree on the total order at every "
                "position two of them delivered, no node delivered a message twice, and "
                "every message was delivered by every member of its view."]
    out = ["Order audit FAILED."]
    for r in rows["violations"].head(5).itertuples():
        out.append(f"Nodes {r.node_a} and {r.node_b} disagree on the total order from "
                   f"position {r.first_position} (node {r.node_a} delivered {r.message_a}, "
                   f"node {r.node_b} delivered {r.message_b}; {r.divergent_positions} "
                   "divergent positions).")
    for r in rows["duplicates"].head(5).itertuples():
        out.append(f"Node {r.node} delivered message {r.message} {r.times} times.")
    for r in rows["missing"].head(5).itertuples():
        out.append(f"Node {r.node} never delivered message {r.message} of view {r.view} "
                   f"(delivered by nodes {list(r.delivered_by)}).")
    for k, label in (("violations", "order violations"), ("duplicates", "duplicates"),
                     ("missing", "missing deliveries")):
        if counts[k] > 5:
            out.append(f"... {counts[k]:,} {label} in all (see {k}/).")
    return out


def _summary_table(summary: DataFrame) -> dict[str, Any]:
    rows = []
    for r in summary.orderBy("node", "variant").collect():
        rows.append([
            r["node"], r["variant"], int(r["messages"] or 0), float(r["msgs_per_s"] or 0.0),
            float(r["p50_ms"] or 0.0), float(r["p99_ms"] or 0.0), float(r["max_ms"] or 0.0),
            float(r["avg_ntail"] or 0.0), 100.0 * float(r["early_share"] or 0.0),
            float(r["retrans_per_msg"] or 0.0), float(r["drops_per_msg"] or 0.0),
            int(r["view_changes"] or 0),
        ])
    return {
        "title": "per node and variant (whole run; latency per delivered message)",
        "columns": ["node", "variant", "messages", "msgs/s", "p50 ms", "p99 ms", "max ms",
                    "avg Ntail", "early %", "retrans/msg", "drops/msg", "view changes"],
        "rows": rows,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point for ``spark-submit analytics/job.py LOGDIR --out DIR``."""
    from amcast.report import print_report
    from analytics.session import get_session

    parser = argparse.ArgumentParser(prog="analytics/job.py", description=__doc__.splitlines()[0])
    add_arguments(parser)
    parser.add_argument("--master", default=None,
                        help="Spark master (default: the one spark-submit was given)")
    args = parser.parse_args(argv)
    spark = get_session(args.master, shuffle_partitions=args.shuffle_partitions)
    report = run(spark, args.logdir, args.out, window_s=args.window,
                 progress=Progress(quiet=False))
    print_report(report, as_json=args.json)
    return 0 if report["figures"]["order audit"] == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
