"""``amcast bench analytics``: delivery records/s the Spark analysis job processes, local mode.

A synthetic log set of ``--records`` delivery records (``amcast.analytics.synthetic``: ``--nodes``
nodes delivering the same vertices, 10% causal, rotated files, metrics snapshots every
10 s) is generated once, column-wise with pyarrow, and cached under ``--cache`` (a
``.complete`` marker tells a finished set). The whole job (read and parse the JSON,
figures, audit, Parquet tables, charts, index.html) is then run on embedded Spark and
timed from the first read to the written report; Spark's start-up is not timed.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from amcast.protocols.errors import ConfigurationError

from amcast.argtypes import whole

NAME = "analytics"
HELP = "delivery records/s the Spark analysis job processes (local mode, synthetic logs)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--records", type=whole(1), default=10_000_000,
                        help="delivery records in the log set (default: %(default)s)")
    parser.add_argument("--nodes", type=whole(1), default=4)
    parser.add_argument("--seed", type=whole(0), default=1)
    parser.add_argument("--cache", type=Path, default=Path("var/bench-analytics"),
                        help="where generated log sets are kept (default: %(default)s)")
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument("--shuffle-partitions", type=whole(1), default=8)


def log_set(args: argparse.Namespace, say: Any) -> tuple[Path, float]:
    """The cached log set's directory, generating it first if needed (and how long)."""
    from amcast.analytics import synthetic

    directory = args.cache / f"records-{args.records}-nodes-{args.nodes}-seed-{args.seed}"
    logs = directory / "logs"
    if (directory / ".complete").exists():
        say(f"using the cached log set {logs}")
        return logs, 0.0
    if logs.exists():
        shutil.rmtree(logs)
    start = time.monotonic()
    vertices = args.records // args.nodes
    say(f"generating {vertices * args.nodes:,} delivery records ({args.nodes} nodes) ...")
    logset = synthetic.generate(synthetic.Spec(
        nodes=args.nodes, vertices=vertices, rate=2000.0, seed=args.seed))
    synthetic.write(logset, logs, rotate_records=1_000_000, progress=say)
    (directory / ".complete").write_text(f"{logset.records()}\n")
    return logs, time.monotonic() - start


def run(args: argparse.Namespace) -> dict[str, Any]:
    """The benchmark; an ordinary failure (no Java, a Spark error, ...) becomes a
    ``ConfigurationError``: one line and exit status 2."""
    from amcast.analytics.errors import one_line

    try:
        return _run(args)
    except Exception as exc:
        line = one_line(exc)
        if line is None:
            raise
        raise ConfigurationError(line) from exc


def _run(args: argparse.Namespace) -> dict[str, Any]:
    from amcast.analytics.javacheck import require_java

    quiet = getattr(args, "json", False)

    def say(msg: str) -> None:
        if not quiet:
            print(f"... {msg}", file=sys.stderr, flush=True)

    require_java()
    from amcast.analytics.job import Progress
    from amcast.analytics.job import run as run_job
    from amcast.analytics.session import get_session

    logs, gen_s = log_set(args, say)
    size = sum(p.stat().st_size for p in logs.rglob("*.jsonl*"))
    say(f"starting Spark ({args.master}) ...")
    spark = get_session(args.master, driver_memory=args.driver_memory,
                        shuffle_partitions=args.shuffle_partitions)
    out = logs.parent / "report"
    start = time.monotonic()
    report = run_job(spark, str(logs), out, progress=Progress(quiet=quiet))
    seconds = time.monotonic() - start
    records = int(report["figures"]["delivery records"])
    cores = spark.sparkContext.defaultParallelism
    return {
        "title": f"amcast bench analytics: the Spark job on {records:,} delivery records "
                 f"({args.master}, {cores} cores)",
        "figures": {
            "delivery records": records,
            "log size (MB)": round(size / 1e6),
            "job seconds": round(seconds, 1),
            "records/s": round(records / seconds),
            "MB/s of JSON": round(size / 1e6 / seconds, 1),
            "audit": report["figures"]["order audit"],
            "generation seconds (0: cached)": round(gen_s, 1),
            "report": str(out / "index.html"),
        },
        "notes": ["timed: read + parse JSON, figures, audit, Parquet, charts, index.html; "
                  "not timed: generating the logs, starting Spark"],
    }
