"""amcast analytics: the PySpark batch job over the daemons' delivery and metrics logs.

Theory of operation: ``paths`` tells local log and report locations from URIs;
``load`` reads every ``*.jsonl*`` file below a log directory with one explicit schema
(``schema``), keeps the records the job can use and counts the lines it skips;
``figures`` computes the workload, throughput, latency, Ntail, rule mix, overhead and
view changes per node, variant and time window; ``history`` derives the view history
from the view, gap and start records (complete members, gap notices, view conflicts,
the timeline) on the driver, ``vsync`` moves those small tables between Spark and the
driver, and ``audit`` checks in Spark the total order per view, duplicates, messages
missing at complete members and deliveries outside primary views; ``verdict`` says the
findings in sentences; ``charts`` draws
the PNGs, ``htmlpage`` writes ``index.html`` and ``text`` the terminal and JSON output;
``job`` runs the stages and writes the Parquet tables (``amcast analyze`` or
``spark-submit analytics/job.py``); ``errors`` holds the exit statuses and turns
ordinary failures into one line. ``synthetic`` writes realistic log sets for tests and
the benchmark; ``javacheck`` and ``venvspark`` run at install time.

Dependencies point one way: this package reads the log schema (``docs/log-schema.md``)
and imports nothing of ``amcast`` outside ``amcast.analytics``; the CLI imports it.
Importing this package does not import pyspark.
"""
