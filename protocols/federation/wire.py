"""The bytes of the federation layer: records for the own cluster's order, datagrams
between clusters.

Both are a 2-byte magic, a version byte and one msgpack array. The magic starts with
``0xc1``, a byte msgpack never uses, so a record in the total order is never taken for
a client's envelope (``is_record``) and a federation datagram never for a Node's.

Records (ordered by the own cluster with safe service, ``MAGIC_RECORD``):

- ``[0, id, dst, group, payload]`` ``RecSubmit``: m entered this cluster's order;
- ``[1, id, cluster, lts]`` ``RecTimestamp``: cluster's local timestamp of m;
- ``[2, node, nonce]`` ``RecStateRequest``: a joiner asks for the federation state as
  of this point of the order;
- ``[3, node, nonce, state]`` ``RecState``: the answer (``state.ClusterState.encode``).

Datagrams (``MAGIC_DATAGRAM``):

- ``[0, id, dst, group, payload]`` ``DgSubmit``: from m's sender (or a destination
  cluster that holds m and learnt that another lacks it);
- ``[1, id, dst, cluster, lts]`` ``DgTimestamp``: a member of ``cluster`` tells another
  destination cluster ``lts_cluster(m)``;
- ``[2, id, submit, clusters, done]`` ``DgAck``: what the sending cluster's order holds
  of m: its Submit (bool), the clusters whose timestamps it holds, and whether it has
  delivered m (then it holds everything).

A *batch* (``DgBatch``, version byte ``VERSION_BATCH``) is ``[body, body, ...]``: 2 to
``MAX_BATCH`` of the bodies above for the same member, in one datagram (``batch`` builds
it from encoded datagrams without decoding them). A batch never holds a batch. A member
that only knows version 1 drops a batch as a ``version`` error: every daemon of a
federation runs the same version.

``id`` is ``[cluster, node, seq]``; names are ASCII bin, the group UTF-8 bin. Every
field is bounded (``MAX_NAME_BYTES``, ``MAX_CLUSTERS``, ``max_payload``) and the only
variable-length fields besides the payload are lists of cluster names of Dst(m): the
header grows with |Dst(m)|, never with the number of nodes. ``decode_record`` and
``decode_datagram`` raise ``DecodeError`` and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgpack

from ..errors import DecodeError
from ..wire.fields import read_bool, read_int, read_list
from .config import MAX_CLUSTERS, MAX_NAME_BYTES
from .outputs import FedId

VERSION = 1
VERSION_BATCH = 2
MAX_BATCH = 64
"""Datagrams in one batch, at most."""
MAGIC_RECORD = b"\xc1F"
MAGIC_DATAGRAM = b"\xc1f"
MAX_SEQ = 2**63 - 1
MAX_GROUP_BYTES = 255
DEFAULT_MAX_PAYLOAD = 1 << 20
MAX_STATE_BYTES = 1 << 30
"""A state record's encoded state, bytes (the daemon's order must carry records this
large; see docs/multigroup.md, joiner state)."""


@dataclass(frozen=True, slots=True)
class RecSubmit:
    msg_id: FedId
    dst: tuple[str, ...]
    group: str
    payload: bytes


@dataclass(frozen=True, slots=True)
class RecTimestamp:
    msg_id: FedId
    cluster: str
    lts: int


@dataclass(frozen=True, slots=True)
class RecStateRequest:
    node: str
    nonce: int


@dataclass(frozen=True, slots=True)
class RecState:
    node: str
    nonce: int
    state: bytes


@dataclass(frozen=True, slots=True)
class DgSubmit:
    msg_id: FedId
    dst: tuple[str, ...]
    group: str
    payload: bytes


@dataclass(frozen=True, slots=True)
class DgTimestamp:
    msg_id: FedId
    dst: tuple[str, ...]
    cluster: str
    lts: int


@dataclass(frozen=True, slots=True)
class DgAck:
    msg_id: FedId
    submit: bool
    clusters: tuple[str, ...]
    done: bool


@dataclass(frozen=True, slots=True)
class DgBatch:
    items: tuple[DgSubmit | DgTimestamp | DgAck, ...]


Record = RecSubmit | RecTimestamp | RecStateRequest | RecState
Datagram = DgSubmit | DgTimestamp | DgAck | DgBatch

_pack = msgpack.Packer(use_bin_type=True).pack


def _name(s: str) -> bytes:
    return s.encode("ascii")


def _id(m: FedId) -> list[Any]:
    return [_name(m[0]), _name(m[1]), m[2]]


def _names(xs: tuple[str, ...]) -> list[bytes]:
    return [_name(x) for x in xs]


def encode_record(r: Record) -> bytes:
    body: list[Any]
    if isinstance(r, RecSubmit):
        body = [0, _id(r.msg_id), _names(r.dst), r.group.encode(), r.payload]
    elif isinstance(r, RecTimestamp):
        body = [1, _id(r.msg_id), _name(r.cluster), r.lts]
    elif isinstance(r, RecStateRequest):
        body = [2, _name(r.node), r.nonce]
    else:
        body = [3, _name(r.node), r.nonce, r.state]
    return MAGIC_RECORD + bytes((VERSION,)) + _pack(body)


def _datagram_body(d: DgSubmit | DgTimestamp | DgAck) -> list[Any]:
    if isinstance(d, DgSubmit):
        return [0, _id(d.msg_id), _names(d.dst), d.group.encode(), d.payload]
    if isinstance(d, DgTimestamp):
        return [1, _id(d.msg_id), _names(d.dst), _name(d.cluster), d.lts]
    return [2, _id(d.msg_id), d.submit, _names(d.clusters), d.done]


def encode_datagram(d: Datagram) -> bytes:
    if isinstance(d, DgBatch):
        return MAGIC_DATAGRAM + bytes((VERSION_BATCH,)) + _pack(
            [_datagram_body(x) for x in d.items])
    return MAGIC_DATAGRAM + bytes((VERSION,)) + _pack(_datagram_body(d))


def batch(datagrams: list[bytes]) -> bytes:
    """One batch of 2 to ``MAX_BATCH`` version-1 datagrams (``encode_datagram``'s bytes),
    the same as ``encode_datagram(DgBatch(their items))``; one datagram is returned as
    it is."""
    if len(datagrams) == 1:
        return datagrams[0]
    if not 2 <= len(datagrams) <= MAX_BATCH:
        raise ValueError(f"a batch holds 2 to {MAX_BATCH} datagrams")
    n = len(datagrams)
    head = bytes((0x90 | n,)) if n < 16 else b"\xdc" + n.to_bytes(2, "big")
    return MAGIC_DATAGRAM + bytes((VERSION_BATCH,)) + head + b"".join(
        d[3:] for d in datagrams)


def is_record(data: bytes) -> bool:
    """Whether an ordered payload is a federation record (rather than a client's)."""
    return data[:2] == MAGIC_RECORD


# ----------------------------------------------------------------------------- decoding


def read_name(v: Any, what: str) -> str:
    if type(v) is not bytes or not 0 < len(v) <= MAX_NAME_BYTES:
        raise DecodeError("bad_field", f"{what} is not a short name")
    try:
        return v.decode("ascii")
    except UnicodeDecodeError:
        raise DecodeError("bad_field", f"{what} is not ascii") from None


def read_id(v: Any) -> FedId:
    items = read_list(v, "id", max_len=3)
    if len(items) != 3:
        raise DecodeError("bad_field", "id is not [cluster, node, seq]")
    return (read_name(items[0], "id cluster"), read_name(items[1], "id node"),
            read_int(items[2], 0, MAX_SEQ, "seq"))


def read_clusters(v: Any, what: str, *, non_empty: bool) -> tuple[str, ...]:
    """A sorted list of distinct cluster names (canonical: one encoding per set)."""
    names = tuple(read_name(x, what) for x in read_list(v, what, max_len=MAX_CLUSTERS))
    if (non_empty and not names) or list(names) != sorted(set(names)):
        raise DecodeError("bad_field", f"{what} is not a sorted set of clusters")
    return names


def read_group(v: Any) -> str:
    if type(v) is not bytes or len(v) > MAX_GROUP_BYTES:
        raise DecodeError("bad_field", "group is not short bytes")
    try:
        return v.decode()
    except UnicodeDecodeError:
        raise DecodeError("bad_field", "group is not utf-8") from None


def _payload(v: Any, max_payload: int) -> bytes:
    if type(v) is not bytes or len(v) > max_payload:
        raise DecodeError("bad_field", "payload is not bytes or too large")
    return v


def _unpack(data: bytes, magic: bytes, max_bin: int, versions: tuple[int, ...]) -> Any:
    if data[:2] != magic or len(data) < 4:
        raise DecodeError("malformed", "no federation magic")
    if data[2] not in versions:
        raise DecodeError("version", f"version {data[2]}")
    try:
        return msgpack.unpackb(data[3:], use_list=True, raw=True, strict_map_key=True,
                               max_str_len=0, max_map_len=0, max_ext_len=0,
                               max_bin_len=max_bin, max_array_len=MAX_CLUSTERS)
    except Exception as exc:  # msgpack raises several unrelated types; all are "malformed"
        raise DecodeError("malformed", type(exc).__name__) from None


def _body(data: bytes, magic: bytes, max_bin: int) -> tuple[int, list[Any]]:
    return _kind(_unpack(data, magic, max_bin, (VERSION,)))


def _kind(obj: Any) -> tuple[int, list[Any]]:
    items = read_list(obj, "body", max_len=5)
    if not items:
        raise DecodeError("bad_field", "empty body")
    return read_int(items[0], 0, 3, "type"), items


def _arity(items: list[Any], n: int) -> None:
    if len(items) != n:
        raise DecodeError("bad_field", f"type {items[0]} has {len(items)} fields, not {n}")


def decode_record(data: bytes, max_payload: int = DEFAULT_MAX_PAYLOAD) -> Record:
    kind, items = _body(data, MAGIC_RECORD, max(max_payload, MAX_STATE_BYTES))
    if kind == 0:
        _arity(items, 5)
        return RecSubmit(read_id(items[1]), read_clusters(items[2], "dst", non_empty=True),
                         read_group(items[3]), _payload(items[4], max_payload))
    if kind == 1:
        _arity(items, 4)
        return RecTimestamp(read_id(items[1]), read_name(items[2], "cluster"),
                            read_int(items[3], 1, MAX_SEQ, "lts"))
    if kind == 2:
        _arity(items, 3)
        return RecStateRequest(read_name(items[1], "node"), read_int(items[2], 0, MAX_SEQ,
                                                                     "nonce"))
    _arity(items, 4)
    return RecState(read_name(items[1], "node"), read_int(items[2], 0, MAX_SEQ, "nonce"),
                    _payload(items[3], MAX_STATE_BYTES))


def decode_datagram(data: bytes, max_payload: int = DEFAULT_MAX_PAYLOAD) -> Datagram:
    obj = _unpack(data, MAGIC_DATAGRAM, max_payload, (VERSION, VERSION_BATCH))
    if data[2] == VERSION:
        return _datagram(obj, max_payload)
    bodies = read_list(obj, "batch", max_len=MAX_BATCH)
    if len(bodies) < 2:
        raise DecodeError("bad_field", "a batch of fewer than 2 datagrams")
    return DgBatch(tuple(_datagram(b, max_payload) for b in bodies))


def _datagram(obj: Any, max_payload: int) -> DgSubmit | DgTimestamp | DgAck:
    kind, items = _kind(obj)
    if kind == 0:
        _arity(items, 5)
        return DgSubmit(read_id(items[1]), read_clusters(items[2], "dst", non_empty=True),
                        read_group(items[3]), _payload(items[4], max_payload))
    if kind == 1:
        _arity(items, 5)
        return DgTimestamp(read_id(items[1]), read_clusters(items[2], "dst", non_empty=True),
                           read_name(items[3], "cluster"), read_int(items[4], 1, MAX_SEQ,
                                                                    "lts"))
    if kind == 2:
        _arity(items, 5)
        return DgAck(read_id(items[1]), read_bool(items[2], "submit"),
                     read_clusters(items[3], "clusters", non_empty=False),
                     read_bool(items[4], "done"))
    raise DecodeError("bad_field", f"datagram type {kind}")
