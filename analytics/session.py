"""The SparkSession of the job: embedded local Spark by default, or a given master.

Theory of operation: ``get_session(master=None)`` under ``spark-submit`` (or any running
context) keeps the master and settings it was given. From ``amcast analyze`` the default
master is ``local[*]``: Spark runs inside the Python process's JVM, nothing to set up but
Java 17+. Shuffle partitions are few (the tables are small after the first aggregation;
adaptive execution, on by Spark's default, coalesces further), the UI is off, and
Spark's own console progress bar only shows on a terminal; Spark's logging is cut to
errors from the start (``spark.log.level``, which also holds under spark-submit).
"""

from __future__ import annotations

import sys

from pyspark.sql import SparkSession


def get_session(
    master: str | None = None, *, shuffle_partitions: int | None = None,
    driver_memory: str | None = None, app_name: str = "amcast-analyze",
    conf: dict[str, str] | None = None,
) -> SparkSession:
    """The session (``conf``: further Spark settings, applied last)."""
    b = SparkSession.builder.appName(app_name)
    if master:
        b = b.master(master)
    if shuffle_partitions:
        b = b.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
    if driver_memory:
        b = b.config("spark.driver.memory", driver_memory)
    b = (
        b.config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", str(sys.stderr.isatty()).lower())
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.log.level", "ERROR")
    )
    for key, value in (conf or {}).items():
        b = b.config(key, value)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
