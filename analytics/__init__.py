"""amcast analytics: the PySpark batch job over the daemons' delivery and metrics logs.

Theory of operation: ``load`` reads every ``*.jsonl*`` file below a log directory with
one explicit schema (``schema``) and splits the records by ``type``; ``figures``
computes throughput, latency, Ntail, rule mix, overhead and view changes per node,
variant and time window; ``audit`` checks the total order across node pairs and finds
duplicates and messages missing at some members; ``charts`` draws the PNGs and
``htmlpage`` writes ``index.html``; ``job`` runs the stages and writes the Parquet tables
(``amcast analyze`` or ``spark-submit analytics/job.py``). ``synthetic`` writes
realistic log sets for tests and the benchmark. Importing this package does not import pyspark.
"""
