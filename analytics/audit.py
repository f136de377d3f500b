"""The order audit: do all nodes agree on the total order, lose nothing, repeat nothing?

Theory of operation (all in Spark; nothing but the final, small results reaches the
driver). A delivery record is a vertex: positions ``position .. position+count-1``,
message ``i`` is ``"{sender}:{seq}:{i}"``.

- ``order_violations``: ordered records are exploded to one row per message at its
  position. Grouping by position, a position is *conflicting* when its messages are not
  all the same, i.e. when min != max for one of ``sender``, ``seq``, ``i`` (two distinct
  triples differ in some component, so this is exact). Only the messages at conflicting
  positions are then joined with themselves on position across node pairs
  (``node_a < node_b``, different message): per pair of nodes, the first divergent
  position, the messages each node delivered there (with its view) and the number of
  divergent positions. Positions only one node delivered are not compared (that is
  ``missing``, not order).
- ``duplicates``: records grouped by ``(node, sender, seq)``; only vertices seen more than
  once at a node are exploded to messages, and each message id delivered more than once
  at a node is reported with the count and its positions (empty for ``causal``).
- ``missing``: a vertex's *expected* nodes are the members of the view it was delivered
  in (from the view records; a view without a view record expects the nodes that
  delivered anything in it). Vertices delivered by every expected node with one
  ``count`` are complete; the others are exploded to messages and every (message,
  expected node that did not deliver it) is reported with the view and the nodes that
  did. Causal records take part in ``duplicates`` and ``missing``, not in the order check.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F


def message_id(sender: str = "sender", seq: str = "seq", i: str = "i") -> Column:
    return F.concat_ws(":", F.col(sender), F.col(seq), F.col(i))


def explode_messages(records: DataFrame, *extra: str) -> DataFrame:
    """One row per message: the record columns ``extra`` plus ``i`` and ``mpos``."""
    return records.select(
        "node", "view", "sender", "seq", "position", *extra,
        F.explode(F.sequence(F.lit(0), F.col("count") - 1)).alias("i"),
    ).withColumn("mpos", F.col("position") + F.col("i"))


def order_violations(deliveries: DataFrame) -> DataFrame:
    msgs = explode_messages(deliveries.where(F.col("position").isNotNull()))
    conflicting = (
        msgs.groupBy("mpos")
        .agg(*[F.min(c).alias(f"lo_{c}") for c in ("sender", "seq", "i")],
             *[F.max(c).alias(f"hi_{c}") for c in ("sender", "seq", "i")])
        .where((F.col("lo_sender") != F.col("hi_sender")) | (F.col("lo_seq") != F.col("hi_seq"))
               | (F.col("lo_i") != F.col("hi_i")))
        .select("mpos")
    )
    at = msgs.join(conflicting, "mpos").select("mpos", "node", "view", message_id().alias("msg"))
    a = at.select("mpos", F.col("node").alias("node_a"), F.col("view").alias("view_a"),
                  F.col("msg").alias("message_a"))
    b = at.select("mpos", F.col("node").alias("node_b"), F.col("view").alias("view_b"),
                  F.col("msg").alias("message_b"))
    pairs = a.join(b, "mpos").where(
        (F.col("node_a") < F.col("node_b")) & (F.col("message_a") != F.col("message_b"))
    )
    first = F.min(F.struct("mpos", "message_a", "message_b", "view_a", "view_b"))
    return (
        pairs.groupBy("node_a", "node_b")
        .agg(first.alias("f"), F.countDistinct("mpos").alias("divergent_positions"))
        .select(
            "node_a", "node_b", F.col("f.mpos").alias("first_position"),
            F.col("f.message_a").alias("message_a"), F.col("f.message_b").alias("message_b"),
            F.col("f.view_a").alias("view_a"), F.col("f.view_b").alias("view_b"),
            "divergent_positions",
        )
        .orderBy("node_a", "node_b")
    )


def vertices_per_node(deliveries: DataFrame) -> DataFrame:
    """(sender, seq, node): records of the vertex at the node, its counts and view.

    One shuffle of the records, shared by ``duplicates`` and ``missing``; persist it."""
    return deliveries.groupBy("sender", "seq", "node").agg(
        F.count(F.lit(1)).alias("times"),
        F.min("count").alias("lo"),
        F.max("count").alias("hi"),
        F.min("view").alias("view"),
    )


def duplicates(deliveries: DataFrame, per_node: DataFrame) -> DataFrame:
    keys = ["node", "sender", "seq"]
    twice = per_node.where(F.col("times") > 1).select(*keys)
    msgs = explode_messages(deliveries.join(twice, keys), "service")
    return (
        msgs.groupBy("node", "sender", "seq", "i")
        .agg(F.count(F.lit(1)).alias("times"),
             F.sort_array(F.collect_list("mpos")).alias("positions"),
             F.min("service").alias("service"))
        .where(F.col("times") > 1)
        .select("node", message_id().alias("message"), "sender", "seq", "i", "service",
                "times", "positions")
        .orderBy("node", "sender", "seq", "i")
    )


def expected_members(deliveries: DataFrame, views: DataFrame) -> DataFrame:
    """(view, members, mask): the nodes that must deliver what is delivered in each view.

    ``mask`` has bit ``node`` set for every member (meaningful for node ids below 63)."""
    listed = views.select("view", F.explode("members").alias("member")).distinct()
    fallback = (
        deliveries.select("view", F.col("node").alias("member")).distinct()
        .join(listed.select("view").distinct(), "view", "left_anti")
    )
    return (
        listed.unionByName(fallback)
        .groupBy("view")
        .agg(F.array_sort(F.collect_set("member")).alias("members"),
             _mask("member").alias("mask"))
    )


def _mask(col: str) -> Column:
    return F.expr(f"bit_or(shiftleft(1L, least({col}, 63)))")


def missing(
    deliveries: DataFrame, views: DataFrame, per_node: DataFrame, *, small_ids: bool = True
) -> DataFrame:
    """Every (message, member of its view that did not deliver it); see the module doc.

    A vertex is complete when the nodes that delivered it cover the view's members and
    every node delivered it with the same ``count``. With ``small_ids`` (every node id
    below 63) the nodes are a bit mask (a cheap aggregate), otherwise a set."""
    members = expected_members(deliveries, views)
    vkeys = ["sender", "seq"]
    nodes = _mask("node") if small_ids else F.collect_set("node")
    vertices = per_node.groupBy(*vkeys).agg(
        F.min("view").alias("view"), nodes.alias("nodes"),
        F.min("lo").alias("lo"), F.max("hi").alias("hi"),
    )
    covered = (
        F.col("nodes").bitwiseAND(F.col("mask")) == F.col("mask") if small_ids
        else F.size(F.array_except("members", "nodes")) == 0
    )
    suspect = (
        vertices.join(members, "view")
        .where(~covered | (F.col("lo") != F.col("hi")))
        .select(*vkeys, "view", "members")
    )
    msgs = explode_messages(
        deliveries.join(suspect.select(*vkeys), vkeys), "service"
    )
    per_msg = msgs.groupBy("sender", "seq", "i").agg(
        F.array_sort(F.collect_set("node")).alias("delivered_by"),
        F.min("service").alias("service"),
    )
    return (
        per_msg.join(suspect, vkeys)
        .select("*", F.explode(F.array_except("members", "delivered_by")).alias("node"))
        .select("node", message_id().alias("message"), "sender", "seq", "i", "view", "service",
                "delivered_by")
        .orderBy("node", "sender", "seq", "i")
    )
