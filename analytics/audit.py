"""The delivery audit in Spark: total order, duplicates, agreement, primary views.

Theory of operation. A delivery record is a vertex of one view: positions ``position ..
position+count-1`` counted from 0 in each view, message ``i`` is ``"{sender}:{seq}:{i}"``
of that view (a message is identified by ``(view, sender, seq, i)``). A process is one
daemon life, ``(node, incarnation)``. ``per_process_view`` aggregates the records per
(process, view) (one small table, collected); ``history`` derives from it and the view
records the ``status`` of every (process, view) (installed, complete, when, the last
position whose order is compared), handed back as a small table and broadcast-joined.
Nothing but small results reaches the driver.

- ``order_violations``: ordered records are exploded to one row per message at its
  position, keeping the positions up to the process's ``trusted_end`` (all of them for
  a complete member of the view; up to its last safe one for a member that did not
  complete it: its tail of agreed messages may differ). Grouping by (view, position), a
  position is *conflicting* when its messages are not all the same (min != max for one
  of ``sender``, ``seq``, ``i``: two distinct triples differ in some component, so this
  is exact). Only the messages at conflicting positions are joined with themselves
  across process pairs: per view and pair, the first divergent position, the message
  each delivered there and the number of divergent positions.
- ``outside_primary``: ordered deliveries in a view the process never installed,
  before it installed it, or after its time in it ended (it lost the view, or
  installed another: the order across views), per process, view and reason; not for a
  (process, view) whose records may be missing (``log_lost``: a ``lost`` record names
  the view, so its view record may be the one lost).
- ``duplicates``: records grouped by process and vertex; only vertices seen more than
  once are exploded, and each message delivered more than once by a process is reported
  with the count and its positions (empty for ``causal``).
- ``missing`` (virtual synchrony): the complete members of a view must deliver the same
  set in it. A vertex is *required* when a complete member delivered it, or any member
  delivered it ``safe``; required vertices that every complete member delivered with
  one ``count`` are fine, the others are exploded to messages and every (message,
  complete member that did not deliver it) is reported with the nodes that did; a
  complete member whose records in the view may be missing (``log_lost``) is not held
  to it.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

PROC = ["node", "incarnation"]
PV = ["node", "incarnation", "view"]


def message_id(sender: str = "sender", seq: str = "seq", i: str = "i") -> Column:
    return F.concat_ws(":", F.col(sender), F.col(seq), F.col(i))


def _end() -> Column:
    return F.col("position") + F.col("count") - 1


def explode_messages(records: DataFrame, *extra: str) -> DataFrame:
    """One row per message: the record columns ``extra`` plus ``i`` and ``mpos``."""
    return records.select(
        *PV, "sender", "seq", "position", *extra,
        F.explode(F.sequence(F.lit(0), F.col("count") - 1)).alias("i"),
    ).withColumn("mpos", F.col("position") + F.col("i"))


def per_process_view(deliveries: DataFrame) -> DataFrame:
    """Per (process, view): records, ordered messages, first and last position, last
    safe position, first and last delivery time (small: collected for ``history``)."""
    ordered = F.col("position").isNotNull()
    return deliveries.groupBy(*PV).agg(
        F.count(F.lit(1)).alias("records"),
        F.coalesce(F.sum(F.when(ordered, F.col("count"))), F.lit(0)).alias("messages"),
        F.min("position").alias("first_position"),
        F.max(_end()).alias("last_position"),
        F.max(F.when(F.col("service") == "safe", _end())).alias("last_safe"),
        F.min("ts").alias("first_ts"),
        F.max("ts").alias("last_ts"),
    )


def order_violations(deliveries: DataFrame, status: DataFrame) -> DataFrame:
    ordered = deliveries.where(F.col("position").isNotNull()).join(
        F.broadcast(status.select(*PV, "trusted_end")), PV, "left")
    msgs = explode_messages(ordered, "trusted_end").where(
        F.col("mpos") <= F.coalesce(F.col("trusted_end"), F.lit(-1)))
    conflicting = (
        msgs.groupBy("view", "mpos")
        .agg(*[F.min(c).alias(f"lo_{c}") for c in ("sender", "seq", "i")],
             *[F.max(c).alias(f"hi_{c}") for c in ("sender", "seq", "i")])
        .where((F.col("lo_sender") != F.col("hi_sender")) | (F.col("lo_seq") != F.col("hi_seq"))
               | (F.col("lo_i") != F.col("hi_i")))
        .select("view", "mpos")
    )
    at = msgs.join(conflicting, ["view", "mpos"]).select(
        "view", "mpos", *PROC, message_id().alias("msg"))

    def side(s: str) -> DataFrame:
        return at.select("view", "mpos", F.col("node").alias(f"node_{s}"),
                         F.col("incarnation").alias(f"incarnation_{s}"),
                         F.col("msg").alias(f"message_{s}"))

    a, b = side("a"), side("b")
    before = (F.col("node_a") < F.col("node_b")) | (
        (F.col("node_a") == F.col("node_b")) & (F.col("incarnation_a") < F.col("incarnation_b")))
    pairs = a.join(b, ["view", "mpos"]).where(before & (F.col("message_a") != F.col("message_b")))
    keys = ["view", "node_a", "incarnation_a", "node_b", "incarnation_b"]
    first = F.min(F.struct("mpos", "message_a", "message_b"))
    return (
        pairs.groupBy(*keys)
        .agg(first.alias("f"), F.countDistinct("mpos").alias("divergent_positions"))
        .select(*keys, F.col("f.mpos").alias("first_position"),
                F.col("f.message_a").alias("message_a"), F.col("f.message_b").alias("message_b"),
                "divergent_positions")
    )


def outside_primary(deliveries: DataFrame, status: DataFrame) -> DataFrame:
    """Ordered deliveries outside the process's time in a primary view (module doc)."""
    s = status.select(*PV, "installed", "install_ts", "end_ts", "end_reason", "log_lost")
    ts = F.col("ts")
    reason = (
        F.when(~F.coalesce(F.col("installed"), F.lit(False)), F.lit("it never installed the view"))
        .when(ts < F.col("install_ts"), F.lit("before it installed the view"))
        .when(ts > F.col("end_ts"), F.concat(F.lit("after it "), F.col("end_reason")))
    )
    return (
        deliveries.where(F.col("position").isNotNull())
        .join(F.broadcast(s), PV, "left")
        .where(~F.coalesce(F.col("log_lost"), F.lit(False)))
        .select(*PV, "position", "count", "ts", reason.alias("reason"))
        .where(F.col("reason").isNotNull())
        .groupBy(*PV, "reason")
        .agg(F.count(F.lit(1)).alias("vertices"), F.sum("count").alias("messages"),
             F.min("position").alias("first_position"), F.max(_end()).alias("last_position"),
             F.min("ts").alias("first_ts"))
    )


def vertices_per_process(deliveries: DataFrame) -> DataFrame:
    """(view, sender, seq, node, incarnation): records of the vertex at the process, its
    counts, whether it was delivered ``safe``.

    One shuffle of the records, shared by ``duplicates`` and ``missing``; persist it."""
    return deliveries.groupBy("view", "sender", "seq", *PROC).agg(
        F.count(F.lit(1)).alias("times"),
        F.min("count").alias("lo"),
        F.max("count").alias("hi"),
        F.max((F.col("service") == "safe").cast("int")).alias("safe"),
    )


def duplicates(deliveries: DataFrame, per_proc: DataFrame) -> DataFrame:
    keys = [*PV, "sender", "seq"]
    twice = per_proc.where(F.col("times") > 1).select(*keys)
    msgs = explode_messages(deliveries.join(twice, keys), "service")
    return (
        msgs.groupBy(*keys, "i")
        .agg(F.count(F.lit(1)).alias("times"),
             F.sort_array(F.collect_list("mpos")).alias("positions"),
             F.min("service").alias("service"))
        .where(F.col("times") > 1)
        .select(*PV, message_id().alias("message"), "sender", "seq", "i", "service",
                "times", "positions")
    )


def _mask(col: Column) -> Column:
    """Bit ``node`` set for every (non-null) node (meaningful for node ids below 63)."""
    bit = F.pow(F.lit(2.0), F.least(col, F.lit(62))).cast("long")  # exact: a power of 2
    return F.coalesce(F.bit_or(bit), F.lit(0).cast("long"))


def missing(
    deliveries: DataFrame, status: DataFrame, members: DataFrame, per_proc: DataFrame, *,
    small_ids: bool = True,
) -> DataFrame:
    """Every (message, complete member of its view that did not deliver it); see the
    module doc. ``members``: per view, its complete members' nodes (``members``) and
    their bit mask (``mask``: bit ``node`` set for each, when ``small_ids``, every node id
    below 63: node sets are then bit masks, a cheap aggregate; otherwise sets)."""
    done = status.where(F.col("complete") & ~F.col("log_lost")).select(
        "view", "node", "incarnation")
    flags = F.broadcast(status.select(*PV, "installed", "complete"))
    rows = per_proc.join(flags, PV, "left").fillna(False, subset=["installed", "complete"])
    by = F.when(F.col("complete"), F.col("node"))
    vkeys = ["view", "sender", "seq"]
    vertices = rows.groupBy(*vkeys).agg(
        (_mask(by) if small_ids else F.collect_set(by)).alias("nodes"),
        F.max(F.col("complete") | ((F.col("safe") == 1) & F.col("installed"))).alias("required"),
        F.min(F.when(F.col("complete"), F.col("lo"))).alias("lo"),
        F.max(F.when(F.col("complete"), F.col("hi"))).alias("hi"),
    )
    covered = (
        F.col("nodes").bitwiseAND(F.col("mask")) == F.col("mask") if small_ids
        else F.size(F.array_except("members", "nodes")) == 0
    )
    suspect = (
        vertices.where(F.col("required")).join(F.broadcast(members), "view")
        .where(~covered | (F.col("lo") != F.col("hi")))
        .select(*vkeys, "members")
    )
    msgs = explode_messages(
        deliveries.join(suspect.select(*vkeys), vkeys), "service"
    ).join(flags, PV, "left")
    per_msg = msgs.groupBy(*vkeys, "i").agg(
        F.array_sort(F.collect_set("node")).alias("delivered_by"),
        F.collect_set(F.when(F.col("complete"), F.col("node"))).alias("complete_by"),
        F.min("service").alias("service"),
    )
    return (
        per_msg.join(suspect, vkeys)
        .select("*", F.explode(F.array_except("members", "complete_by")).alias("node"))
        .join(F.broadcast(done), ["view", "node"])
        .select("view", "node", "incarnation", message_id().alias("message"), "sender", "seq",
                "i", "service", "delivered_by")
    )
