"""The figures of a run per node, protocol variant and time window (Spark built-ins only).

Theory of operation: a record's window is ``floor(ts / W) * W`` (Unix seconds, the
delivering node's clock; W = ``--window``, default 10 s).

- ``throughput``: vertices, messages (sum of ``count``), bytes and messages/s
  (messages / W) per node, variant, window.
- ``latency``: send-to-delivery latency ``ts - send_ts`` **per delivered message** (a
  vertex's latency counts ``count`` times; ``array_repeat`` + ``explode``), percentiles
  p50/p90/p99 by ``percentile_approx`` with accuracy 10,000, which on groups of fewer
  than 10,000 messages is the exact nearest-rank percentile (the smallest latency with at
  least p of the messages at or below it), and the exact max. ``latency_histogram`` gives
  message counts per 0.05-decade bucket of milliseconds per variant, for the chart.
- ``ntail``: the paper's avg Ntail(G) at delivery, over ordered vertices (one value per
  delivered vertex, as the engine computes it); ``ntail_histogram`` per variant.
- ``rules``: vertices and messages released by each rule (``early``, ``gl_prefix``,
  ``default``, ``causal``) and each rule's share of the vertices of its group.
- ``overhead``: from metrics snapshots, per node ordered by ``ts``, the difference of
  each counter with the previous snapshot; when the ``incarnation`` changed or any
  counter decreased the daemon restarted and the new values count from zero (the delta
  is the value itself); a node's first snapshot is the baseline. Retransmissions and
  drops (sum of the ``drops`` map) per delivered message per window.
- ``views``: view records (installed views, and losses of the primary view) with their
  window; ``summary`` one row per node and variant over the whole run for the terminal
  table (its ``view_changes``: the views a node installed after its first one).
- ``workload``: what the run did, per variant and phi: the nodes that delivered, the
  senders, views, first send and last delivery, and the vertices, messages and bytes
  sent per service, counted at their senders (the records with ``node == sender``: every
  node delivers its own messages), so that nothing is counted once per receiver.

Every division is ``try_divide`` (null, not an error, for 0/0: a window or a run in which
no message was delivered); Spark 4 raises on division by zero otherwise (ANSI mode).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

ACCURACY = 10_000
KEYS = ["node", "variant", "window"]


def window_col(ts: str, window_s: float) -> Column:
    return (F.floor(F.col(ts) / F.lit(window_s)) * F.lit(window_s)).cast("double")


def _latency_ms() -> Column:
    return (F.col("ts") - F.col("send_ts")) * 1000.0


def _per_message_latency(deliveries: DataFrame, keys: list[str]) -> DataFrame:
    return deliveries.select(
        *keys, F.explode(F.array_repeat(_latency_ms(), F.col("count"))).alias("latency_ms")
    )


def _percentiles(keys: list[str], lat: DataFrame) -> DataFrame:
    return lat.groupBy(*keys).agg(
        F.count(F.lit(1)).alias("messages"),
        F.percentile_approx("latency_ms", [0.5, 0.9, 0.99], ACCURACY).alias("p"),
        F.max("latency_ms").alias("max_ms"),
    ).select(
        *keys, "messages", F.col("p")[0].alias("p50_ms"), F.col("p")[1].alias("p90_ms"),
        F.col("p")[2].alias("p99_ms"), "max_ms",
    )


def with_window(deliveries: DataFrame, window_s: float) -> DataFrame:
    return deliveries.withColumn("window", window_col("ts", window_s))


def throughput(d: DataFrame, window_s: float) -> DataFrame:
    return d.groupBy(*KEYS).agg(
        F.count(F.lit(1)).alias("vertices"),
        F.sum("count").alias("messages"),
        F.sum("bytes").alias("bytes"),
    ).withColumn("msgs_per_s", F.try_divide(F.col("messages"), F.lit(window_s)))


def latency(d: DataFrame) -> DataFrame:
    return _percentiles(KEYS, _per_message_latency(d, KEYS))


def latency_histogram(d: DataFrame) -> DataFrame:
    bucket = F.round(F.log10(F.greatest(F.col("latency_ms"), F.lit(1e-3))) * 20) / 20
    return (
        _per_message_latency(d, ["variant"])
        .groupBy("variant", bucket.alias("log10_ms"))
        .agg(F.count(F.lit(1)).alias("messages"))
    )


def ntail(d: DataFrame) -> DataFrame:
    return (
        d.where(F.col("ntail").isNotNull())
        .groupBy(*KEYS)
        .agg(F.count(F.lit(1)).alias("vertices"), F.avg("ntail").alias("avg_ntail"))
    )


def ntail_histogram(d: DataFrame) -> DataFrame:
    return (
        d.where(F.col("ntail").isNotNull())
        .groupBy("variant", "ntail")
        .agg(F.count(F.lit(1)).alias("vertices"))
    )


def rules(d: DataFrame) -> DataFrame:
    per_rule = d.groupBy(*KEYS, "rule").agg(
        F.count(F.lit(1)).alias("vertices"), F.sum("count").alias("messages")
    )
    group = Window.partitionBy(*KEYS)
    return per_rule.withColumn(
        "share", F.try_divide(F.col("vertices"), F.sum("vertices").over(group))
    )


_COUNTERS = ["messages_sent", "messages_delivered", "retransmissions", "nacks_sent", "drops"]


def overhead(metrics: DataFrame, window_s: float) -> DataFrame:
    snaps = metrics.select(
        "node", "incarnation", "variant", "ts", "messages_sent", "messages_delivered",
        "retransmissions", "nacks_sent",
        F.aggregate(F.map_values("drops"), F.lit(0).cast("long"), lambda a, b: a + b)
        .alias("drops"),
    ).fillna(0, subset=_COUNTERS)
    w = Window.partitionBy("node").orderBy("ts")
    for c in [*_COUNTERS, "incarnation"]:
        snaps = snaps.withColumn(f"prev_{c}", F.lag(c).over(w))
    restarted = F.col("incarnation") != F.col("prev_incarnation")
    for c in _COUNTERS:
        restarted = restarted | (F.col(c) < F.col(f"prev_{c}"))
    deltas = snaps.where(F.col("prev_messages_sent").isNotNull()).select(
        "node", "variant", window_col("ts", window_s).alias("window"),
        restarted.cast("int").alias("restart"),
        *[F.when(restarted, F.col(c)).otherwise(F.col(c) - F.col(f"prev_{c}")).alias(c)
          for c in _COUNTERS],
    )
    agg = deltas.groupBy(*KEYS).agg(
        F.count(F.lit(1)).alias("snapshots"),
        F.sum("restart").alias("restarts"),
        *[F.sum(c).alias(c) for c in _COUNTERS],
    )

    def per_msg(c: str) -> Column:
        return F.try_divide(F.col(c), F.col("messages_delivered"))

    return agg.select(
        "*",
        per_msg("retransmissions").alias("retransmissions_per_msg"),
        per_msg("drops").alias("drops_per_msg"),
    )


def views(views_df: DataFrame, window_s: float) -> DataFrame:
    return views_df.select(
        "node", "incarnation", "view", "ts", window_col("ts", window_s).alias("window"),
        "primary", "previous", "reason", "members", F.size("members").alias("n_members"),
    )


def summary(d: DataFrame, metrics: DataFrame, views_df: DataFrame) -> DataFrame:
    """One row per node and variant over the whole run (small: collected for the table)."""
    keys = ["node", "variant"]
    base = d.groupBy(*keys).agg(
        F.sum("count").alias("messages"),
        (F.max("ts") - F.min("ts")).alias("span_s"),
        F.avg("ntail").alias("avg_ntail"),
        F.try_divide(F.sum(F.when(F.col("rule") == "early", 1).otherwise(0)),
                     F.count(F.lit(1))).alias("early_share"),
    )
    lat = _percentiles(keys, _per_message_latency(d, keys)).drop("messages")
    over = overhead(metrics, 1e12).groupBy(*keys).agg(
        F.try_divide(F.sum("retransmissions"), F.sum("messages_delivered"))
        .alias("retrans_per_msg"),
        F.try_divide(F.sum("drops"), F.sum("messages_delivered")).alias("drops_per_msg"),
    )
    vc = views_df.where(F.col("primary")).groupBy("node").agg(
        F.greatest(F.count(F.lit(1)) - 1, F.lit(0)).alias("view_changes")
    )
    return (
        base.join(lat, keys, "left").join(over, keys, "left").join(vc, "node", "left")
        .fillna(0, subset=["view_changes"])
        .withColumn("msgs_per_s", F.when(F.col("span_s") > 0,
                                         F.try_divide(F.col("messages"), F.col("span_s"))))
    )


def workload(d: DataFrame) -> DataFrame:
    """One row per variant and phi: what was sent, by whom, when (see the module doc)."""
    own = F.col("node") == F.col("sender")

    def sent(value: Column, name: str, service: str | None = None) -> Column:
        cond = own if service is None else own & (F.col("service") == service)
        return F.sum(F.when(cond, value).otherwise(0)).alias(name)

    return d.groupBy("variant", "phi").agg(
        F.array_sort(F.collect_set("node")).alias("nodes"),
        F.array_sort(F.collect_set("sender")).alias("senders"),
        F.array_sort(F.collect_set("view")).alias("views"),
        F.min("send_ts").alias("first_send_ts"),
        F.max("ts").alias("last_delivery_ts"),
        sent(F.lit(1), "vertices"),
        sent(F.col("count"), "messages"),
        sent(F.col("bytes"), "bytes"),
        *[sent(F.col("count"), s, s) for s in ("causal", "agreed", "safe")],
    ).withColumn(
        "duration_s", F.col("last_delivery_ts") - F.col("first_send_ts")
    )
