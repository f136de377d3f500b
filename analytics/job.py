"""The analysis job: logs in, Parquet tables + charts + index.html + a summary out.

Theory of operation: ``run`` takes a SparkSession and goes through the stages, printing
each one with its elapsed time on stderr: read and persist the records and count them
(``load``; a log set without a single delivery record is an ``AnalyticsError``, not a
pass), the view history (``vsync``, ``history``: the view, gap and start records and one
row per daemon life and view reach the driver), the per-window figures (``figures``),
the delivery audit (``audit``) and, when the logs hold ``global`` records (federated
daemons), the cross-cluster order (``federation``: a cycle fails the audit), then the
charts and ``index.html`` (``charts``, ``htmlpage``). Every table is written as Parquet
under the report directory
(``workload/``, ``throughput/``, ``latency/``, ``latency_histogram/``, ``ntail/``,
``ntail_histogram/``, ``rules/``, ``overhead/``, ``views/``, ``summary/``; the audit's
``violations/``, ``outside_primary/``, ``duplicates/``, ``missing/``, ``positions/``,
``gaps/``, ``view_conflicts/``; and ``gap_notices/``, ``view_history/``,
``view_status/``, ``timeline/``, ``log_losses/``: the spans of records a disk refused,
left out of the checks a missing record would fail, one note each); only small results
(per-window tables, the view history, audit counts and first rows) reach the driver.
``run`` returns the report dict (``text``): title, tables, the run's figures, notes (the
verdict: ``verdict``), ``audit`` with the counts and first rows, and ``analysis`` with
the job's own run time.

Run it with ``amcast analyze LOGDIR --out DIR`` (embedded ``local[*]`` Spark) or, for a
cluster, ``spark-submit analytics/job.py LOGDIR --out DIR`` (master and resources from
spark-submit; exit statuses as ``errors``: 0 passed, 1 audit failed, 2 not analysed).
The driver needs the amcast package and its analytics extra, the executors only Spark
(the job uses Spark built-in functions only). spark-submit starts the driver with
``python3`` from PATH unless ``PYSPARK_DRIVER_PYTHON`` says otherwise; when that
interpreter cannot import the job's dependencies, ``_reexec_with_sparks_python``
re-executes this file with the interpreter whose site-packages hold the running Spark
(found from ``SPARK_HOME``), keeping the environment (the JVM gateway's port and secret).
Spark merges the driver's stderr into its stdout; ``_stderr_to_spark_submits`` points
stderr back at spark-submit's own, so that ``--json`` prints the JSON object alone on
stdout and the progress goes to stderr.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def interpreter_for(spark_home: str | Path) -> Path | None:
    """The Python whose ``lib/pythonX.Y/site-packages`` holds ``spark_home`` (pip's pyspark)."""
    home = Path(spark_home)
    for candidate in dict.fromkeys([home, home.resolve()]):
        for d in [candidate, *candidate.parents]:
            if d.name in ("site-packages", "dist-packages") and d.parent.name.startswith(
                    "python") and d.parent.parent.name == "lib":
                bindir = d.parent.parent.parent / "bin"
                for name in (d.parent.name, "python3", "python"):
                    exe = bindir / name
                    if exe.is_file() and os.access(exe, os.X_OK):
                        return exe
    return None


def _reexec_with_sparks_python() -> None:
    """Run as a script: make sure this interpreter can import the job, else re-exec."""
    here = Path(__file__).resolve().parent  # analytics/: its modules are not top-level
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    try:
        import amcast.analytics.charts  # noqa: F401
        import matplotlib  # noqa: F401
        import pyspark  # noqa: F401
        return
    except ImportError as exc:
        missing = exc.name or str(exc)
    spark_home = os.environ.get("SPARK_HOME")
    python = interpreter_for(spark_home) if spark_home else None
    if python is not None and os.environ.get("AMCAST_JOB_REEXEC") != str(python):
        os.environ["AMCAST_JOB_REEXEC"] = str(python)
        print(f"[analyze] {sys.executable} cannot import {missing}: running the job with "
              f"{python}, the Python of this Spark", file=sys.stderr, flush=True)
        os.execv(str(python), [str(python), str(Path(__file__).resolve()), *sys.argv[1:]])
    print(f"{sys.argv[0]}: error: the driver's Python ({sys.executable}) cannot import "
          f"{missing}: set PYSPARK_DRIVER_PYTHON to the Python of amcast's environment "
          "(pip install 'amcast[analytics]')", file=sys.stderr)
    sys.exit(2)


def _stderr_to_spark_submits() -> None:
    """Under spark-submit, send this driver's stderr to spark-submit's stderr.

    Spark's PythonRunner merges the driver's stderr into its stdout, which would mix the
    progress lines into ``--json`` output; the JVM that started us (our parent) still has
    its own stderr, reopened here (Linux ``/proc``; elsewhere stderr stays merged)."""
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return
    try:
        fd = os.open(f"/proc/{os.getppid()}/fd/2", os.O_WRONLY | os.O_APPEND)
    except OSError:
        return
    sys.stderr.flush()
    os.dup2(fd, 2)
    os.close(fd)


if __name__ == "__main__" and __package__ in (None, ""):
    _stderr_to_spark_submits()
    _reexec_with_sparks_python()

import argparse  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from typing import Any  # noqa: E402

from amcast.analytics import (  # noqa: E402
    audit,
    charts,
    federation,
    figures,
    htmlpage,
    paths,
    text,
    verdict,
    vsync,
)
from amcast.analytics.errors import (  # noqa: E402
    EXIT_AUDIT_FAILED,
    EXIT_PASSED,
    AnalyticsError,
    guarded,
)
from amcast.analytics.load import GLOBAL, TYPES, read_logs, survey  # noqa: E402
from amcast.analytics.options import add_arguments  # noqa: E402
from pyspark import StorageLevel  # noqa: E402
from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

SHOWN = 50  # audit rows shown in index.html and the terminal
KEYS = figures.KEYS
MESSAGE_ORDER = ["view", "node", "sender", "seq", "i"]
PV_ORDER = ["view", "node", "incarnation"]
NTAIL = ("Ntail(G) is the number of the n group members that already had a message in the "
         "causality graph G of the ordering activation when a vertex was delivered: below n, "
         "the order was decided without waiting to hear from every member.")


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


def _write(df: DataFrame, out: Path, name: str, order: list[str]) -> DataFrame:
    """Write ``df`` as one Parquet file sorted by ``order`` and read it back.

    The rows are few: gathered into one partition and sorted there (no global sort, whose
    range partitioning costs a sampling job per table); read back with the schema given
    (no job to read the footers)."""
    path = str(out / name)
    df.coalesce(1).sortWithinPartitions(*order).write.mode("overwrite").parquet(path)
    return df.sparkSession.read.schema(df.schema).parquet(path)


def _counts(tables: dict[str, DataFrame], names: tuple[str, ...]) -> dict[str, int]:
    """The row counts of the tables ``names``, in one Spark job."""
    parts = [tables[k].select(F.lit(k).alias("table")) for k in names]
    union = parts[0]
    for part in parts[1:]:
        union = union.unionByName(part)
    counts = {r["table"]: int(r["count"]) for r in union.groupBy("table").count().collect()}
    return {k: counts.get(k, 0) for k in names}


def _first_rows(df: DataFrame, count: int) -> Any:
    """The first ``SHOWN`` rows as pandas (no Spark job when there are none)."""
    if count == 0:
        import pandas as pd

        return pd.DataFrame(columns=df.columns)
    return _pandas(df.limit(SHOWN))


def run(
    spark: SparkSession, logdir: str, out: str | Path, *, window_s: float = 10.0,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    say = progress or (lambda _m: None)
    started = time.monotonic()
    if not window_s > 0:
        raise AnalyticsError(f"the window must be positive, not {window_s}")
    location = paths.logs_location(logdir)
    out = paths.report_dir(out)
    out.mkdir(parents=True, exist_ok=True)

    say(f"reading logs below {logdir} ...")
    logs = read_logs(spark, location)
    found = survey(logs)
    lines = found.lines
    records = lines.get("delivery", 0)
    ignored = {k: v for k, v in lines.items() if k not in TYPES and k != GLOBAL}
    say(f"read {records:,} delivery, {lines.get('view', 0):,} view and "
        f"{lines.get('metrics', 0):,} metrics records; {sum(ignored.values()):,} lines ignored")
    if records == 0:
        logs.base.unpersist()
        raise AnalyticsError(
            f"no delivery records below {logdir} ({_lines_note(lines)}); "
            "nothing to analyse (the format is docs/log-schema.md, log schema 1)")

    nodes = found.nodes
    small_ids = max([*nodes, found.max_member or 0, 0]) < 63
    say("view history ...")
    hist = vsync.collect(logs)
    status = vsync.status_frame(spark, hist.status)
    d = figures.with_window(logs.deliveries, window_s)
    per_proc = audit.vertices_per_process(logs.deliveries).persist(StorageLevel.MEMORY_AND_DISK)
    tables: dict[str, DataFrame] = {}
    stages: list[tuple[str, str, list[str], Callable[[], DataFrame]]] = [
        ("workload", "workload", ["variant", "phi"], lambda: figures.workload(logs.deliveries)),
        ("throughput", "throughput per window", KEYS, lambda: figures.throughput(d, window_s)),
        ("latency", "latency percentiles per window", KEYS, lambda: figures.latency(d)),
        ("latency_histogram", "latency histogram", ["variant", "log10_ms"],
         lambda: figures.latency_histogram(d)),
        ("ntail", "avg Ntail(G) per window", KEYS, lambda: figures.ntail(d)),
        ("ntail_histogram", "Ntail(G) histogram", ["variant", "ntail"],
         lambda: figures.ntail_histogram(d)),
        ("rules", "rule mix", [*KEYS, "rule"], lambda: figures.rules(d)),
        ("overhead", "retransmissions and drops", KEYS,
         lambda: figures.overhead(logs.metrics, window_s)),
        ("views", "view records", ["node", "ts"], lambda: figures.views(logs.views, window_s)),
        ("summary", "summary per node and variant", ["node", "variant"],
         lambda: figures.summary(logs.deliveries, logs.metrics, logs.views)),
        ("violations", "audit: total order per view across node pairs",
         ["view", "node_a", "node_b"], lambda: audit.order_violations(logs.deliveries, status)),
        ("outside_primary", "audit: ordered deliveries outside a primary view", PV_ORDER,
         lambda: audit.outside_primary(logs.deliveries, status)),
        ("duplicates", "audit: duplicate deliveries", MESSAGE_ORDER,
         lambda: audit.duplicates(logs.deliveries, per_proc)),
        ("missing", "audit: messages missing at complete members", MESSAGE_ORDER,
         lambda: audit.missing(logs.deliveries, status, vsync.members_frame(spark, hist),
                               per_proc, small_ids=small_ids)),
    ]
    for name, what, order, make in stages:
        say(f"{what} -> {name}/")
        tables[name] = _write(make(), out, name, order)
    types = vsync.arrow_types()
    driver_tables = {"positions": hist.positions, "gaps": hist.gaps,
                     "view_conflicts": hist.conflicts, "gap_notices": hist.notices,
                     "view_history": hist.views, "view_status": hist.status,
                     "timeline": hist.timeline, "log_losses": hist.losses}
    for name, df in driver_tables.items():
        vsync.write_table(df, out, name, types)

    spark_counts = _counts(tables, ("violations", "outside_primary", "duplicates", "missing"))
    audit_counts = {k: spark_counts[k] if k in spark_counts else len(driver_tables[k])
                    for k in verdict.KINDS}
    audit_rows = {k: _first_rows(tables[k], n) if k in tables else driver_tables[k].head(SHOWN)
                  for k, n in audit_counts.items()}
    ok = not any(audit_counts.values())
    n_views = len(hist.views)
    said = verdict.sentences(audit_counts, audit_rows, len(nodes), n_views)
    cross: federation.Verdict | None = None
    if lines.get(GLOBAL, 0):
        say("audit: cross-cluster order of the global records ...")
        cross = federation.audit(spark, location)
        ok = ok and cross.ok
        said.append(federation.sentence(cross))
        if not cross.ok and said[0].startswith("Order audit PASSED"):
            said.insert(0, "Order audit FAILED (across clusters).")
    workload = tables["workload"].collect()
    described = [_describe(w) for w in workload]

    say("charts and index.html ...")
    pngs = {
        "Views per node over time": charts.timeline(
            hist.timeline, list(hist.views["view"]), out / "timeline.png").name,
        "Throughput over time": charts.throughput(
            _pandas(tables["throughput"]), out / "throughput.png").name,
        "Latency distribution": charts.latency(
            _pandas(tables["latency_histogram"]), out / "latency.png").name,
        "Ntail(G) at delivery per variant": charts.ntail(
            _pandas(tables["ntail_histogram"]), out / "ntail.png").name,
    }
    summary = _summary_table(tables["summary"])
    figs: dict[str, Any] = {
        "order audit": "PASS" if ok else "FAIL",
        **{label: audit_counts[k] for k, label in verdict.KINDS.items()},
        "nodes": len(nodes),
        "daemon lives": int(hist.status[["node", "incarnation"]].drop_duplicates().shape[0]),
        "views": n_views,
        "gap notices (of them with messages missed)":
            f"{len(hist.notices)} ({int((hist.notices['missed'] > 0).sum())})",
        **({} if cross is None else {
            "cross-cluster order": "PASS" if cross.ok else "FAIL",
            "global records (daemon lives)": f"{cross.records} ({cross.daemons})"}),
        "delivery records": records,
        "view records": lines.get("view", 0),
        "log spans lost to a refusing disk (views not audited for completeness)":
            len(hist.losses),
        "metrics records": lines.get("metrics", 0),
        "ignored lines": sum(ignored.values()),
    }
    lost_spans = verdict.losses(hist.losses)
    notes = [*described, *said, *lost_spans]
    if ignored:
        notes.append(f"Ignored lines: {_lines_note(ignored)} (see docs/log-schema.md).")
    elapsed = time.monotonic() - started
    analysis = {
        "seconds": round(elapsed, 2),
        "records/s": round(records / elapsed) if elapsed else 0,
        "spark": f"{spark.version}, master {spark.sparkContext.master}",
        "report": str(out / "index.html"),
    }
    title = f"amcast analyze: {logdir}"
    views_table = {
        "title": "views (#: the number in the timeline; messages: ordered messages in the "
                 "view; completed by: the members that installed it and its successor)",
        "columns": ["#", "view", "previous", "members", "installed by", "completed by",
                    "lost by", "messages"],
        "rows": [[r.number, r.view, r.previous, list(r.members), list(r.installed_by),
                  list(r.completed_by), list(r.lost_by), r.messages]
                 for r in hist.views.itertuples()],
    }
    (out / "index.html").write_text(htmlpage.page(
        title=title, verdict_ok=ok, verdict=[*said, *lost_spans], workload=described,
        ntail=NTAIL, summary=summary, figures=figs, analysis=analysis,
        charts=pngs, views=views_table, audit_tables=audit_rows, audit_counts=audit_counts,
        tables=[name for name, _, _, _ in stages] + list(driver_tables),
    ), encoding="utf-8")
    logs.base.unpersist()
    per_proc.unpersist()
    say(f"done: {out / 'index.html'}")
    return {
        "title": title,
        "tables": [_workload_table(workload), summary],
        "figures": figs,
        "notes": notes,
        "audit": {**{k: {"count": audit_counts[k], "first": _records(audit_rows[k])}
                     for k in audit_counts},
                  **({} if cross is None else {"cross_cluster": {
                      "count": 0 if cross.ok else 1, "records": cross.records,
                      "daemon_lives": cross.daemons, "edges": cross.edges,
                      "cycle": cross.cycle}})},
        "analysis": analysis,
    }


def _lines_note(lines: dict[str, int]) -> str:
    return ", ".join(f"{v:,} {k}" for k, v in sorted(lines.items())) or "no lines"


def _records(df: Any) -> list[dict[str, Any]]:
    """Rows as plain Python values (numpy scalars and arrays become ints and lists)."""
    return [{k: v.tolist() if hasattr(v, "tolist") else v for k, v in row.items()}
            for row in df.to_dict("records")]


def _describe(w: Any) -> str:
    """The workload of one variant in a sentence."""
    nodes, views = list(w["nodes"]), list(w["views"])
    services = ", ".join(f"{w[s]:,} {s}" for s in ("agreed", "safe", "causal") if w[s])
    return (
        f"Workload: {len(nodes)} nodes ({', '.join(map(str, nodes))}) ran {w['variant']} "
        f"with phi = {'n/a' if w['phi'] is None else format(w['phi'], 'g')} for "
        f"{w['duration_s']:.3f} s (first send to last delivery) "
        f"in {len(views)} view{'s' if len(views) != 1 else ''}; {len(w['senders'])} senders "
        f"sent {w['vertices']:,} vertices carrying {w['messages']:,} messages "
        f"({services or 'none counted at their senders'}; {w['bytes']:,} payload bytes)."
    )


def _workload_table(rows: list[Any]) -> dict[str, Any]:
    return {
        "title": "workload (messages counted at their senders)",
        "columns": ["variant", "phi", "nodes", "senders", "views", "duration (s)", "vertices",
                    "messages", "agreed", "safe", "causal", "bytes"],
        "rows": [[w["variant"], float(w["phi"]) if w["phi"] is not None else None,
                  len(w["nodes"]), len(w["senders"]), len(w["views"]),
                  float(w["duration_s"]), int(w["vertices"]), int(w["messages"]),
                  int(w["agreed"]), int(w["safe"]), int(w["causal"]), int(w["bytes"])]
                 for w in rows],
    }


def _num(value: Any) -> float | None:
    return None if value is None else float(value)


def _summary_table(summary: DataFrame) -> dict[str, Any]:
    rows = []
    for r in sorted(summary.collect(), key=lambda r: (r["node"], r["variant"])):
        rows.append([
            r["node"], r["variant"], int(r["messages"] or 0), _num(r["msgs_per_s"]),
            _num(r["p50_ms"]), _num(r["p99_ms"]), _num(r["max_ms"]), _num(r["avg_ntail"]),
            None if r["early_share"] is None else 100.0 * float(r["early_share"]),
            _num(r["retrans_per_msg"]), _num(r["drops_per_msg"]),
            int(r["view_changes"] or 0),
        ])
    return {
        "title": "per node and variant (whole run; latency per delivered message; "
                 "n/a: undefined, e.g. no message delivered between two metrics snapshots)",
        "columns": ["node", "variant", "messages", "msgs/s", "p50 ms", "p99 ms", "max ms",
                    "avg Ntail", "early %", "retrans/msg", "drops/msg", "view changes"],
        "rows": rows,
    }


def exit_status(report: dict[str, Any]) -> int:
    return EXIT_PASSED if report["figures"]["order audit"] == "PASS" else EXIT_AUDIT_FAILED


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point for ``spark-submit analytics/job.py LOGDIR --out DIR``."""
    parser = argparse.ArgumentParser(prog="analytics/job.py", description=__doc__.splitlines()[0])
    add_arguments(parser)
    parser.add_argument("--master", default=None,
                        help="Spark master (default: the one spark-submit was given)")
    args = parser.parse_args(argv)

    def body() -> int:
        from amcast.analytics.session import get_session

        paths.logs_location(args.logdir)  # fail before starting Spark
        paths.report_dir(args.out)
        spark = get_session(args.master, shuffle_partitions=args.shuffle_partitions)
        report = run(spark, args.logdir, args.out, window_s=args.window,
                     progress=Progress(quiet=False))
        sys.stdout.write(text.json_line(report) if args.json else text.render(report))
        sys.stdout.flush()
        return exit_status(report)

    return guarded(parser.prog, body)


if __name__ == "__main__":
    sys.exit(main())
