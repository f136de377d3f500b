"""The explicit Spark schema of the log records of ``docs/log-schema.md`` (schema 1).

Theory of operation: one struct covers the ``delivery``, ``view``, ``gap``, ``start``,
``lost`` and ``metrics`` records (the union of their fields); the JSON reader is given it
instead of inferring one, which costs a full extra pass over the files. Fields a record
type does not have come out null, fields the schema does not list (``engine``,
``clients``, anything added later) are ignored, and a line that does not parse becomes
all-null and is dropped because its ``type`` is null. The metrics ``position`` field
shares the name and type of the delivery one and is not used. ``incarnation`` (the
daemon life) is read as 0 and a view record's ``primary`` as true where a record lacks
them (logs of an older daemon).
"""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

_FIELDS: list[tuple[str, object]] = [
    ("schema", IntegerType()),
    ("type", StringType()),
    ("node", IntegerType()),
    ("incarnation", LongType()),
    ("view", LongType()),
    ("variant", StringType()),
    ("phi", DoubleType()),
    ("sender", IntegerType()),
    ("seq", LongType()),
    ("position", LongType()),
    ("count", IntegerType()),
    ("bytes", LongType()),
    ("service", StringType()),
    ("activation", LongType()),
    ("rule", StringType()),
    ("ntail", IntegerType()),
    ("unseen", IntegerType()),
    ("nvt", IntegerType()),
    ("send_ts", DoubleType()),
    ("ts", DoubleType()),
    ("envelopes", IntegerType()),
    ("members", ArrayType(IntegerType())),
    ("primary", BooleanType()),
    ("previous", LongType()),
    ("reason", StringType()),
    ("after", ArrayType(LongType())),
    ("since", DoubleType()),
    ("views", ArrayType(LongType())),
    ("refused", LongType()),
    ("messages_sent", LongType()),
    ("messages_delivered", LongType()),
    ("datagrams_sent", LongType()),
    ("datagrams_received", LongType()),
    ("retransmissions", LongType()),
    ("nacks_sent", LongType()),
    ("drops", MapType(StringType(), LongType())),
    ("pending", LongType()),
    ("backpressure_events", LongType()),
]

LOG_SCHEMA = StructType([StructField(name, t, True) for name, t in _FIELDS])  # type: ignore[arg-type]

DELIVERY_COLUMNS = [
    "node", "incarnation", "view", "variant", "phi", "sender", "seq", "position", "count",
    "bytes", "service", "rule", "ntail", "send_ts", "ts",
]
VIEW_COLUMNS = ["node", "incarnation", "view", "ts", "members", "primary", "previous", "reason"]
GAP_COLUMNS = ["node", "incarnation", "view", "ts", "after"]
START_COLUMNS = ["node", "incarnation", "ts", "members"]
LOST_COLUMNS = ["node", "incarnation", "ts", "since", "views", "refused"]
METRICS_COLUMNS = [
    "node", "incarnation", "ts", "view", "variant", "messages_sent", "messages_delivered",
    "datagrams_sent", "retransmissions", "nacks_sent", "drops",
]
