"""The command-line options of the job, shared by ``amcast analyze`` and ``spark-submit``.

Theory of operation: kept apart from ``job`` so that building the ``amcast`` parser does
not import pyspark (the ``analytics`` extra is optional).
"""

from __future__ import annotations

import argparse


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"not a positive number of seconds: {text!r}")
    return value


def positive_count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"want a whole number at least 1, not {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("logdir", help="directory holding the daemons' *.jsonl* logs "
                        "(searched recursively): a path, a file: URI, or a URI Spark reads "
                        "(hdfs://, s3a://, ...)")
    parser.add_argument("--out", "-o", default="var/report",
                        help="report directory, local: a path or a file: URI "
                        "(default: %(default)s)")
    parser.add_argument("--window", type=positive_seconds, default=10.0,
                        help="time window of the figures, seconds (default: %(default)s)")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object (alone on stdout; progress on stderr)")
    parser.add_argument("--shuffle-partitions", type=positive_count, default=None,
                        help="spark.sql.shuffle.partitions (default: 8 in local mode)")
