"""Federation framings: what the daemon wraps around the federation's bytes.

Theory of operation (``amcast.daemon.federation`` uses them; the ``fedlink`` fuzz target
reads them as a peer's bytes). Three msgpack framings, each refused whole when
malformed:

- ``encode_record``: ``["fed", [record, ...]]``, federation records as one engine payload
  of the own cluster's order (a string first, like the group-membership controls of
  ``amcast.socket_protocol``, so never a client's envelope);
- ``encode_message``: ``[1, cluster, node, client, send_ts, payload]``, one application
  message as handed to ``FederationMember.multicast``, so the delivering daemons can say
  who sent it;
- ``encode_link``: ``["amcast-fed", 1, src cluster, src node, dst cluster, datagram]``,
  the body of one cross-cluster datagram before its seal (``amcast.daemon.fedlink``).

Node ids repeat across clusters and the protocol's member ids must not: a daemon is
``member_id(cluster, node)`` = ``"cluster.node"`` to it.
"""

from __future__ import annotations

import msgpack

from ..protocols.errors import DecodeError
from ..protocols.federation import FederationConfig, FedId
from .config import FederationSection

RECORD_TAG = "fed"
LINK_TAG = "amcast-fed"
LINK_VERSION = 1
MESSAGE_VERSION = 1
MAX_GLOBAL_PAYLOAD = 56 * 1024
"""Largest application payload of a cross-cluster message (bytes): its Submit crosses
clusters in one UDP datagram (at most 65,507 bytes) with the framing, the ids and the
seal."""
FRAMING_BYTES = 512
"""What ``encode_message`` adds to a payload, at most (names of at most 64 bytes)."""


def encode_record(records: list[bytes]) -> bytes:
    """Federation records (consecutive in the order) as one engine payload."""
    return msgpack.packb((RECORD_TAG, records), use_bin_type=True)


def decode_record(data: bytes) -> list[bytes] | None:
    """The records of an engine payload made by ``encode_record``; ``None`` otherwise."""
    if not data or data[0] != 0x92:  # a msgpack array of two: cheap refusal first
        return None
    try:
        value = msgpack.unpackb(data, raw=False, use_list=True, strict_map_key=True)
    except Exception:  # msgpack raises several unrelated types on garbage
        return None
    if type(value) is list and len(value) == 2 and value[0] == RECORD_TAG:
        records = value[1]
        if type(records) is list and records and set(map(type, records)) == {bytes}:
            return records
    return None


def encode_message(cluster: str, node: int, client: int, send_ts: float,
                   payload: bytes) -> bytes:
    """What the daemon hands ``FederationMember.multicast`` for one application message."""
    return msgpack.packb((MESSAGE_VERSION, cluster, node, client, send_ts, payload),
                         use_bin_type=True)


def decode_message(data: bytes) -> tuple[str, int, int, float, bytes] | None:
    """``(cluster, node, client, send_ts, payload)``; ``None`` if malformed."""
    try:
        value = msgpack.unpackb(data, raw=False, use_list=True, strict_map_key=True)
    except Exception:
        return None
    if type(value) is not list or len(value) != 6 or value[0] != MESSAGE_VERSION:
        return None
    _, cluster, node, client, send_ts, payload = value
    if (type(cluster) is not str or type(node) is not int or type(client) is not int
            or type(send_ts) not in (int, float) or type(payload) is not bytes
            or node < 0 or client < 0):
        return None
    return cluster, node, client, float(send_ts), payload


def encode_link(src_cluster: str, src_node: int, dst_cluster: str, datagram: bytes) -> bytes:
    """The body of one cross-cluster datagram (sealed by ``FederationLink``)."""
    return msgpack.packb((LINK_TAG, LINK_VERSION, src_cluster, src_node, dst_cluster,
                          datagram), use_bin_type=True)


def decode_link(body: bytes) -> tuple[str, int, str, bytes]:
    """``(src cluster, src node, dst cluster, datagram)``; ``DecodeError`` if malformed."""
    try:
        value = msgpack.unpackb(body, raw=False, use_list=True, strict_map_key=True)
    except Exception:
        raise DecodeError("malformed", "not msgpack") from None
    if type(value) is not list or len(value) != 6 or value[0] != LINK_TAG:
        raise DecodeError("malformed", "not a federation datagram")
    if value[1] != LINK_VERSION:
        raise DecodeError("bad_version", f"federation datagram version {value[1]!r}")
    _, _, src_cluster, src_node, dst_cluster, datagram = value
    if (type(src_cluster) is not str or type(src_node) is not int or src_node < 0
            or type(dst_cluster) is not str or type(datagram) is not bytes):
        raise DecodeError("malformed", "bad field")
    return src_cluster, src_node, dst_cluster, datagram


def member_id(cluster: str, node: int) -> str:
    """The protocol's id of a daemon: node ids repeat across clusters, these do not."""
    return f"{cluster}.{node}"


def node_of(member: str) -> int:
    """The daemon's node id in a ``member_id``; ``ValueError`` if it is not one."""
    return int(member.rpartition(".")[2])


def message_id(m: FedId) -> str:
    """A cross-cluster message's id as clients see it: ``cluster:node:seq``."""
    return f"{m[0]}:{m[1].rpartition('.')[2]}:{m[2]}"


def member_config(section: FederationSection) -> FederationConfig:
    """The protocol's configuration: cluster names -> member ids (``member_id``)."""
    return FederationConfig(
        cluster=section.cluster,
        clusters={name: tuple(member_id(name, n) for n in sorted(c.addresses()))
                  for name, c in sorted(section.clusters.items())},
        retransmit_s=section.retransmit_s, stall_after_s=section.stall_after_s,
        deadline_s=section.deadline_s, max_payload=MAX_GLOBAL_PAYLOAD + FRAMING_BYTES,
    )
