"""``amcast analyze LOGDIR --out DIR``: the Spark job over the daemons' logs.

Checks for Java 17+ (a ``ConfigurationError`` saying what to install otherwise) and for
the ``analytics`` extra, starts embedded Spark (``local[*]``, or ``--master``), runs
``analytics.job.run`` with stage progress on stderr and prints the summary (or one JSON
object with ``--json``). Exit status 1 when the order audit fails.
"""

from __future__ import annotations

import argparse

from protocols.errors import ConfigurationError


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "analyze", help="Spark job: figures and order audit of the daemons' delivery logs",
        description="figures and order audit of the daemons' delivery logs (Spark job): "
                    "Parquet tables, charts and index.html under --out",
    )
    try:
        from analytics.options import add_arguments
    except ImportError:  # an editable install made before analytics/ existed
        p.add_argument("args", nargs=argparse.REMAINDER)
        p.set_defaults(func=_not_installed)
        return
    add_arguments(p)
    p.add_argument("--master", default="local[*]",
                   help="Spark master: local[*] (embedded, default) or spark://host:7077")
    p.add_argument("--driver-memory", default="2g",
                   help="spark.driver.memory (local mode: all of Spark) (default: %(default)s)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    p.set_defaults(func=run)


def _not_installed(args: argparse.Namespace) -> int:
    raise ConfigurationError(
        "the analytics package is not installed in this environment: make install "
        "(or pip install -e '.[analytics]')"
    )


def run(args: argparse.Namespace) -> int:
    from analytics.javacheck import require_java

    require_java()
    try:
        from amcast.report import print_report
        from analytics.job import Progress
        from analytics.job import run as run_job
        from analytics.load import check_logdir
        from analytics.session import get_session
    except ImportError as exc:
        raise ConfigurationError(
            f"the analysis job needs the analytics extra ({exc.name} is missing): "
            "pip install 'amcast[analytics]'"
        ) from exc
    check_logdir(args.logdir)
    local = args.master.startswith("local")
    progress = Progress(quiet=args.quiet or args.json)
    progress(f"starting Spark ({args.master}) ...")
    spark = get_session(
        args.master, driver_memory=args.driver_memory if local else None,
        shuffle_partitions=args.shuffle_partitions or (8 if local else None),
    )
    report = run_job(spark, args.logdir, args.out, window_s=args.window, progress=progress)
    print_report(report, as_json=args.json)
    return 0 if report["figures"]["order audit"] == "PASS" else 1
