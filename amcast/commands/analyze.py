"""``amcast analyze LOGDIR --out DIR``: the Spark job over the daemons' logs.

Checks the log directory and the report directory, then for Java 17+ and the
``analytics`` extra, starts embedded Spark (``local[*]``, or ``--master``), runs
``amcast.analytics.job.run`` with stage progress on stderr (none with ``--quiet``) and
prints the summary (or one JSON object, alone on stdout, with ``--json``). Exit status
(``amcast.analytics.errors``):
0 the order audit passed, 1 it failed, 2 the logs could not be analysed (one line on
stderr says why: no Java, no log records, a location Spark cannot read, ...).
"""

from __future__ import annotations

import argparse
import sys

from ..protocols.errors import ConfigurationError


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "analyze", help="Spark job: figures and order audit of the daemons' delivery logs",
        description="figures and order audit of the daemons' delivery logs (Spark job): "
                    "Parquet tables, charts and index.html under --out. Exit status: 0 the "
                    "order audit passed, 1 it failed, 2 the logs could not be analysed.",
    )
    try:
        from ..analytics.options import add_arguments
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
    from ..analytics import paths
    from ..analytics.errors import AnalyticsError, guarded
    from ..analytics.javacheck import require_java

    def body() -> int:
        paths.logs_location(args.logdir)  # fail before starting Spark
        paths.report_dir(args.out)
        require_java()
        try:
            from ..analytics import text
            from ..analytics.job import Progress, exit_status
            from ..analytics.job import run as run_job
            from ..analytics.session import get_session
        except ImportError as exc:
            raise AnalyticsError(
                f"the analysis job needs the analytics extra ({exc.name} is missing): "
                "pip install 'amcast[analytics]'"
            ) from exc
        local = args.master.startswith("local")
        progress = Progress(quiet=args.quiet)
        progress(f"starting Spark ({args.master}) ...")
        spark = get_session(
            args.master, driver_memory=args.driver_memory if local else None,
            shuffle_partitions=args.shuffle_partitions or (8 if local else None),
        )
        report = run_job(spark, args.logdir, args.out, window_s=args.window,
                         progress=progress)
        sys.stdout.write(text.json_line(report) if args.json else text.render(report))
        return exit_status(report)

    return guarded("amcast", body)
