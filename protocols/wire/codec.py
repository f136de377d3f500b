"""Datagram codec: msgpack arrays in, typed frozen records out (section 1 of the ToTo paper).

A datagram is ``[kind, sender, view, hb_seq, nacks, vertices]`` (after the version/flags
prefix and the authentication tag, see ``auth``):

- ``sender`` transmitted the datagram; ``view`` is the membership view id (carried now,
  used by membership later); ``hb_seq`` is the sender's latest own sequence number, so
  every datagram doubles as a heartbeat and a lost last message is noticed.
- ``nacks`` is a flat list of ``node, first, last`` triples: vertices the sender misses.
- ``vertices`` are causality-DAG vertices, each ``[origin, seq, acks, service, send_ts,
  items]``. ``acks`` is a flat ``node, seq`` list holding only the acknowledgements that
  changed since the origin's previous vertex: a sender's vertices are causally chained,
  so a receiver rebuilds the full ack vector and the header does not grow with the
  cluster when few nodes send. ``items`` are whole application messages (bin) or one
  fragment ``[total_len, offset, chunk]``; a vertex without items is ack-only.

A DATA or ACK_ONLY datagram carries the sender's own new vertex; REPAIR carries
retransmitted vertices (any member may retransmit any vertex it holds); NACK carries
no vertex; HEARTBEAT carries, in place of vertices, a flat ``node, seq`` list: what its
sender has released of each member (an acknowledgement that is not a DAG edge: it only
feeds stability, so a safe message is not held up by an idle cluster). These are the
*data plane* of one view: ``view`` says which (sequence numbers and the DAG are per
view). A MEMBERSHIP datagram is
``[5, sender, view, incarnation, type, body]`` (``amcast.protocols.wire.membership``):
``view`` is the sender's current view (0 if none) and ``incarnation`` tells a restarted
daemon from its previous life. A SWAP datagram (the swap orderings, ``protocols/swap``)
is ``[6, sender, view, dst, [seq, ack], msg]``: one message of a reliable FIFO link
from ``sender`` to ``dst`` in view ``view`` (``seq`` 0: an acknowledgement only; ``ack``:
the last seq received in order from ``dst``), ``msg`` a short list of non-negative
integers the swap layer reads. ``decode`` never raises anything but ``DecodeError``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import IntEnum
from itertools import chain
from typing import Any

import msgpack

from ..errors import DecodeError
from ..vocabulary import SERVICE_BY_CODE, SERVICE_CODES, ServiceLevel
from .auth import Authenticator, Sealed
from .fields import read_int, read_list
from .limits import (
    MAX_INCARNATION,
    MAX_NODE_ID,
    MAX_SEQ,
    MAX_VIEW_ID,
    WireLimits,
)
from .membership import Message, decode_message, encode_message


class Kind(IntEnum):
    DATA = 0
    ACK_ONLY = 1
    NACK = 2
    REPAIR = 3
    HEARTBEAT = 4
    MEMBERSHIP = 5
    SWAP = 6


KIND_NAMES: dict[int, str] = {kind.value: kind.name.lower() for kind in Kind}
KINDS: dict[int, Kind] = {kind.value: kind for kind in Kind}
"""Kind by wire code: a dict lookup, cheaper than ``Kind(code)`` on every datagram."""


@dataclass(frozen=True, slots=True)
class Fragment:
    """Bytes ``offset .. offset+len(chunk)`` of a message of ``total_len`` bytes."""

    total_len: int
    offset: int
    chunk: bytes


Item = bytes | Fragment


@dataclass(frozen=True, slots=True)
class Vertex:
    """One causality-DAG vertex as carried on the wire (``items == ()``: ack-only)."""

    origin: int
    seq: int
    acks: tuple[tuple[int, int], ...]
    service: ServiceLevel
    send_ts: float
    items: tuple[Item, ...]

    @property
    def ack_only(self) -> bool:
        return not self.items

    @property
    def id(self) -> tuple[int, int]:
        return (self.origin, self.seq)


@dataclass(frozen=True, slots=True)
class Datagram:
    """A data-plane datagram of view ``view``."""

    kind: Kind
    sender: int
    view: int
    hb_seq: int
    nacks: tuple[tuple[int, int, int], ...] = ()
    vertices: tuple[Vertex, ...] = ()
    acks: tuple[tuple[int, int], ...] = ()
    """HEARTBEAT only: what the sender has released of each member."""


@dataclass(frozen=True, slots=True)
class MembershipDatagram:
    """A membership message from ``sender`` (incarnation ``incarnation``), sent while
    the sender was in view ``view`` (0: none)."""

    sender: int
    view: int
    incarnation: int
    message: Message

    kind = Kind.MEMBERSHIP


SWAP_MSG_MAX = 8
"""At most this many integers in a SWAP datagram's ``msg``."""


@dataclass(frozen=True, slots=True)
class SwapDatagram:
    """One message of the swap layer's reliable link from ``sender`` to ``dst`` in view
    ``view`` (``seq`` 0: an acknowledgement only)."""

    sender: int
    view: int
    dst: int
    seq: int
    ack: int
    msg: tuple[int, ...]

    kind = Kind.SWAP


AnyDatagram = Datagram | MembershipDatagram | SwapDatagram


# Positional constructors for the decoder's fast path. ``Vertex`` and ``Datagram`` are
# frozen and slotted and have no ``__post_init__``: their generated ``__init__`` only
# stores each argument with ``object.__setattr__``. Storing through the slot descriptors
# builds the same object (equal, same hash, still frozen) in about half the time.
_new = object.__new__
_set_origin, _set_seq, _set_acks, _set_service, _set_send_ts, _set_items = (
    getattr(Vertex, name).__set__
    for name in ("origin", "seq", "acks", "service", "send_ts", "items"))
_set_kind, _set_sender, _set_view, _set_hb_seq, _set_nacks, _set_vertices, _set_dg_acks = (
    getattr(Datagram, name).__set__
    for name in ("kind", "sender", "view", "hb_seq", "nacks", "vertices", "acks"))
assert tuple(Vertex.__dataclass_fields__) == (  # type: ignore[attr-defined]
    "origin", "seq", "acks", "service", "send_ts", "items")
assert tuple(Datagram.__dataclass_fields__) == (  # type: ignore[attr-defined]
    "kind", "sender", "view", "hb_seq", "nacks", "vertices", "acks")


def _slot_stores_work() -> bool:
    """False in the compiled build (``make native``): mypyc's classes refuse
    ``object.__new__`` (the plain constructor is used there)."""
    try:
        _new(Vertex)
    except TypeError:
        return False
    return True


_SLOT_STORES = _slot_stores_work()


def _new_vertex(origin: int, seq: int, acks: tuple[tuple[int, int], ...],
                service: ServiceLevel, send_ts: float, items: tuple[Item, ...]) -> Vertex:
    if not _SLOT_STORES:
        return Vertex(origin, seq, acks, service, send_ts, items)
    v: Vertex = _new(Vertex)
    _set_origin(v, origin)
    _set_seq(v, seq)
    _set_acks(v, acks)
    _set_service(v, service)
    _set_send_ts(v, send_ts)
    _set_items(v, items)
    return v


def _new_datagram(kind: Kind, sender: int, view: int, hb_seq: int,
                  nacks: tuple[tuple[int, int, int], ...],
                  vertices: tuple[Vertex, ...]) -> Datagram:
    if not _SLOT_STORES:
        return Datagram(kind, sender, view, hb_seq, nacks, vertices, ())
    dg: Datagram = _new(Datagram)
    _set_kind(dg, kind)
    _set_sender(dg, sender)
    _set_view(dg, view)
    _set_hb_seq(dg, hb_seq)
    _set_nacks(dg, nacks)
    _set_vertices(dg, vertices)
    _set_dg_acks(dg, ())
    return dg


# ----------------------------------------------------------------------------- encode

_pack = msgpack.Packer(use_bin_type=True).pack
"""``msgpack.packb(obj, use_bin_type=True)`` without building a Packer per datagram. The
packer resets its buffer after every ``pack``, also when packing fails, and packing lists,
tuples, ints, floats and bytes runs no Python code, so the shared packer cannot mix two
datagrams (all protocol code runs on one thread anyway)."""
_flatten = chain.from_iterable


def _vertex_obj(v: Vertex) -> list[Any]:
    # msgpack packs a tuple as an array, like a list: items that are all plain bytes go
    # as the tuple itself (same bytes on the wire); fragments become triples
    items: Any = v.items
    for it in items:
        if type(it) is not bytes:
            items = [it if isinstance(it, bytes) else [it.total_len, it.offset, it.chunk]
                     for it in items]
            break
    return [v.origin, v.seq, list(_flatten(v.acks)), SERVICE_CODES[v.service],
            float(v.send_ts), items]


def encode_body(dg: Datagram) -> bytes:
    nacks = list(_flatten(dg.nacks))
    if dg.kind == Kind.HEARTBEAT:
        last: list[Any] = list(_flatten(dg.acks))
    else:
        vertices = dg.vertices
        last = ([_vertex_obj(vertices[0])] if len(vertices) == 1
                else [_vertex_obj(v) for v in vertices])
    return _pack([int(dg.kind), dg.sender, dg.view, dg.hb_seq, nacks, last])


def encode_membership_body(dg: MembershipDatagram) -> bytes:
    code, body = encode_message(dg.message)
    obj = [int(Kind.MEMBERSHIP), dg.sender, dg.view, dg.incarnation, code, body]
    return _pack(obj)


def encode_swap_body(dg: SwapDatagram) -> bytes:
    return _pack([int(Kind.SWAP), dg.sender, dg.view, dg.dst, [dg.seq, dg.ack], list(dg.msg)])


def encode(dg: Datagram | MembershipDatagram | SwapDatagram, auth: Authenticator,
           wall_ms: int) -> bytes:
    """Seal one datagram; ``wall_ms``: the sender's wall clock (replay protection)."""
    if type(dg) is Datagram:
        return auth.seal(encode_body(dg), wall_ms)
    if isinstance(dg, MembershipDatagram):
        return auth.seal(encode_membership_body(dg), wall_ms)
    if isinstance(dg, SwapDatagram):
        return auth.seal(encode_swap_body(dg), wall_ms)
    return auth.seal(encode_body(dg), wall_ms)


# ----------------------------------------------------------------------------- decode


def _vertex(obj: Any, limits: WireLimits) -> Vertex:
    fields = read_list(obj, "vertex")
    if len(fields) != 6:
        raise DecodeError("bad_field", "vertex arity")
    origin = read_int(fields[0], 0, MAX_NODE_ID, "origin")
    seq = read_int(fields[1], 1, MAX_SEQ, "seq")
    flat = read_list(fields[2], "acks")
    if len(flat) % 2 or len(flat) > 2 * limits.max_members:
        raise DecodeError("bad_field", "acks length")
    acks = tuple(
        (read_int(flat[i], 0, MAX_NODE_ID, "ack node"),
         read_int(flat[i + 1], 1, MAX_SEQ, "ack seq"))
        for i in range(0, len(flat), 2)
    )
    service = SERVICE_BY_CODE.get(fields[3]) if type(fields[3]) is int else None
    if service is None:
        raise DecodeError("bad_field", "service")
    ts = fields[4]
    if type(ts) not in (float, int) or not math.isfinite(ts):
        raise DecodeError("bad_field", "send_ts")
    raw_items = read_list(fields[5], "items")
    if len(raw_items) > limits.max_items:
        raise DecodeError("bad_field", "too many items")
    items: list[Item] = []
    for raw in raw_items:
        if type(raw) is bytes:
            items.append(raw)
            continue
        frag = read_list(raw, "item")
        if len(frag) != 3 or len(raw_items) != 1 or type(frag[2]) is not bytes:
            raise DecodeError("bad_field", "fragment")
        total = read_int(frag[0], 1, limits.max_message_size, "fragment total_len")
        offset = read_int(frag[1], 0, total - 1, "fragment offset")
        chunk = frag[2]
        if not chunk or offset + len(chunk) > total:
            raise DecodeError("bad_field", "fragment bounds")
        items.append(Fragment(total, offset, chunk))
    return Vertex(origin, seq, acks, service, float(ts), tuple(items))


def decode(data: bytes, auth: Authenticator, limits: WireLimits,
           wall_ms: int) -> Datagram | MembershipDatagram | SwapDatagram:
    """Authenticate, check for replay, then decode one datagram; any defect raises
    ``DecodeError``. ``wall_ms``: the receiver's wall clock."""
    return decode_body(open_body(data, auth, limits, wall_ms), limits)


def open_body(data: bytes, auth: Authenticator, limits: WireLimits,
              wall_ms: int) -> memoryview | bytes:
    """``decode``'s first half: the authentic, fresh body of one datagram (the Node
    compares it with the sender's last heartbeat before decoding it)."""
    if len(data) > limits.max_datagram_bytes:
        raise DecodeError("too_large", f"{len(data)} bytes")
    return auth.open(data, wall_ms)


def decode_unchecked(data: bytes, auth: Authenticator,
                     limits: WireLimits) -> tuple[Sealed | None, AnyDatagram]:
    """Authenticate and decode without the replay check: the sealed header for a later
    ``Authenticator.admit`` (the simulator decodes a multicast once for every receiver,
    each of which admits it against its own replay guard) and the datagram."""
    if len(data) > limits.max_datagram_bytes:
        raise DecodeError("too_large", f"{len(data)} bytes")
    sealed, body = auth.unseal(data)
    return sealed, decode_body(body, limits)


_unpackb = msgpack.unpackb
_unpack_options: dict[int, tuple[WireLimits, dict[str, Any]]] = {}
"""``msgpack.unpackb``'s options by ``id(limits)`` (a node keeps one ``WireLimits``):
``max_array_len`` is computed, and building the options once saves that per datagram.
The entry holds its ``WireLimits``, which stays alive, so its id cannot be reused."""


def _options(limits: WireLimits) -> dict[str, Any]:
    entry = _unpack_options.get(id(limits))
    if entry is not None and entry[0] is limits:
        return entry[1]
    options: dict[str, Any] = {
        "use_list": True,
        "raw": True,
        "strict_map_key": True,
        "max_str_len": 0,
        "max_map_len": 0,
        "max_ext_len": 0,
        "max_bin_len": limits.max_datagram_bytes,
        "max_array_len": limits.max_array_len,
    }
    if len(_unpack_options) >= 64:
        _unpack_options.clear()
    _unpack_options[id(limits)] = (limits, options)
    return options


def decode_body(body: bytes | memoryview, limits: WireLimits) -> AnyDatagram:
    """Decode an authentic body; any defect raises ``DecodeError``.

    The common datagram (DATA or ACK_ONLY, well formed) takes ``_decode_fast``; anything
    it does not accept, malformed or merely unusual, goes through ``_decode_obj``, the
    reference decoder, which raises the precise error (or decodes it)."""
    options = _options(limits)
    try:
        obj = _unpackb(body, **options)
    except Exception as exc:  # msgpack raises several unrelated types; all are "malformed"
        raise DecodeError("malformed", type(exc).__name__) from None
    dg = _decode_fast(obj, limits)
    return dg if dg is not None else _decode_obj(obj, limits)


_FAST_KINDS: dict[int, Kind] = {Kind.DATA.value: Kind.DATA, Kind.ACK_ONLY.value: Kind.ACK_ONLY}
_isfinite = math.isfinite


def _decode_fast(obj: Any, limits: WireLimits) -> Datagram | None:
    """The well-formed DATA or ACK_ONLY datagram ``_decode_obj`` would return, or ``None``.

    It makes every check of ``_decode_obj`` and ``_vertex`` for these kinds (exact types,
    ranges, limits, the vertex matching the header), inline and without building error
    details, and returns ``None`` at the first one that fails (also for fragments, which
    it leaves to the reference): never an error of its own, so a refused datagram gets
    the reference decoder's reason and detail, checked in the reference's order."""
    if type(obj) is not list or len(obj) != 6:
        return None
    code, sender, view, hb_seq, flat, raw_vertices = obj
    kind = _FAST_KINDS.get(code) if type(code) is int else None
    if (kind is None
            or type(sender) is not int or not 0 <= sender <= MAX_NODE_ID
            or type(view) is not int or not 0 <= view <= MAX_VIEW_ID
            or type(hb_seq) is not int or not 0 <= hb_seq <= MAX_SEQ
            or type(flat) is not list or len(flat) % 3 or len(flat) > 3 * limits.max_nack_ranges
            or type(raw_vertices) is not list or len(raw_vertices) != 1
            or limits.max_vertices < 1):
        return None
    nacks: tuple[tuple[int, int, int], ...] = ()
    if flat:
        triples = []
        it = iter(flat)
        for node, first, last in zip(it, it, it, strict=False):
            if (type(node) is not int or not 0 <= node <= MAX_NODE_ID
                    or type(first) is not int or not 1 <= first <= MAX_SEQ
                    or type(last) is not int or not first <= last <= MAX_SEQ):
                return None
            triples.append((node, first, last))
        nacks = tuple(triples)
    raw = raw_vertices[0]
    if type(raw) is not list or len(raw) != 6:
        return None
    origin, seq, flat, service_code, ts, raw_items = raw
    if (origin != sender or seq != hb_seq  # the sender's latest vertex: sender, hb_seq checked
            or type(origin) is not int or type(seq) is not int or seq < 1
            or type(flat) is not list or len(flat) % 2 or len(flat) > 2 * limits.max_members):
        return None
    pairs = []
    it = iter(flat)
    for node, ack in zip(it, it, strict=False):
        if (type(node) is not int or not 0 <= node <= MAX_NODE_ID
                or type(ack) is not int or not 1 <= ack <= MAX_SEQ):
            return None
        pairs.append((node, ack))
    service = SERVICE_BY_CODE.get(service_code) if type(service_code) is int else None
    ts_type = type(ts)
    if (service is None or (ts_type is not float and ts_type is not int) or not _isfinite(ts)
            or type(raw_items) is not list or len(raw_items) > limits.max_items):
        return None
    for item in raw_items:
        if type(item) is not bytes:
            return None
    if (not raw_items) != (kind is Kind.ACK_ONLY):
        return None
    vertex = _new_vertex(origin, seq, tuple(pairs), service, float(ts), tuple(raw_items))
    return _new_datagram(kind, sender, view, hb_seq, nacks, (vertex,))


def _decode_obj(obj: Any, limits: WireLimits) -> Datagram | MembershipDatagram | SwapDatagram:
    """The reference decoder of an unpacked body: every check, in order, with its detail."""
    fields = read_list(obj, "datagram")
    if len(fields) != 6:
        raise DecodeError("bad_field", "datagram arity")
    kind_code = fields[0]
    kind = KINDS.get(kind_code) if type(kind_code) is int else None
    if kind is None:
        raise DecodeError("bad_field", "kind")
    sender = read_int(fields[1], 0, MAX_NODE_ID, "sender")
    view = read_int(fields[2], 0, MAX_VIEW_ID, "view")
    if kind is Kind.MEMBERSHIP:
        incarnation = read_int(fields[3], 0, MAX_INCARNATION, "incarnation")
        return MembershipDatagram(sender, view, incarnation,
                                  decode_message(fields[4], fields[5], limits))
    if kind is Kind.SWAP:
        dst = read_int(fields[3], 0, MAX_NODE_ID, "swap dst")
        link = read_list(fields[4], "swap link")
        if len(link) != 2:
            raise DecodeError("bad_field", "swap link arity")
        seq = read_int(link[0], 0, MAX_SEQ, "swap seq")
        ack = read_int(link[1], 0, MAX_SEQ, "swap ack")
        raw_msg = read_list(fields[5], "swap msg", max_len=SWAP_MSG_MAX)
        if (seq == 0) != (not raw_msg):
            raise DecodeError("bad_field", "swap msg")
        msg = tuple(read_int(x, 0, MAX_SEQ, "swap msg field") for x in raw_msg)
        return SwapDatagram(sender, view, dst, seq, ack, msg)
    hb_seq = read_int(fields[3], 0, MAX_SEQ, "hb_seq")
    flat = read_list(fields[4], "nacks")
    if len(flat) % 3 or len(flat) > 3 * limits.max_nack_ranges:
        raise DecodeError("bad_field", "nacks length")
    nacks = []
    for i in range(0, len(flat), 3):
        node = read_int(flat[i], 0, MAX_NODE_ID, "nack node")
        first = read_int(flat[i + 1], 1, MAX_SEQ, "nack first")
        last = read_int(flat[i + 2], first, MAX_SEQ, "nack last")
        nacks.append((node, first, last))
    if kind is Kind.HEARTBEAT:
        flat_acks = read_list(fields[5], "heartbeat acks", max_len=2 * limits.max_members)
        if len(flat_acks) % 2:
            raise DecodeError("bad_field", "heartbeat acks length")
        acks = tuple(
            (read_int(flat_acks[i], 0, MAX_NODE_ID, "ack node"),
             read_int(flat_acks[i + 1], 0, MAX_SEQ, "ack seq"))
            for i in range(0, len(flat_acks), 2)
        )
        return Datagram(kind, sender, view, hb_seq, tuple(nacks), (), acks)
    raw_vertices = read_list(fields[5], "vertices")
    if len(raw_vertices) > limits.max_vertices:
        raise DecodeError("bad_field", "too many vertices")
    vertices = tuple(_vertex(v, limits) for v in raw_vertices)
    if kind in (Kind.DATA, Kind.ACK_ONLY):
        if len(vertices) != 1 or vertices[0].origin != sender or vertices[0].seq != hb_seq:
            raise DecodeError("bad_field", "data datagram must carry the sender's latest vertex")
        if vertices[0].ack_only != (kind == Kind.ACK_ONLY):
            raise DecodeError("bad_field", "kind does not match the vertex")
    elif kind == Kind.REPAIR:
        if not vertices:
            raise DecodeError("bad_field", "empty repair")
    elif vertices:
        raise DecodeError("bad_field", f"{kind.name.lower()} carries vertices")
    if kind == Kind.NACK and not nacks:
        raise DecodeError("bad_field", "empty nack")
    return Datagram(kind, sender, view, hb_seq, tuple(nacks), vertices)
