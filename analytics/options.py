"""The command-line options of the job, shared by ``amcast analyze`` and ``spark-submit``.

Theory of operation: kept apart from ``job`` so that building the ``amcast`` parser does
not import pyspark (the ``analytics`` extra is optional).
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("logdir", help="directory holding the daemons' *.jsonl* logs "
                        "(searched recursively)")
    parser.add_argument("--out", "-o", default="var/report",
                        help="report directory (default: %(default)s)")
    parser.add_argument("--window", type=float, default=10.0,
                        help="time window of the figures, seconds (default: %(default)s)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--shuffle-partitions", type=int, default=None,
                        help="spark.sql.shuffle.partitions (default: 8 in local mode)")
