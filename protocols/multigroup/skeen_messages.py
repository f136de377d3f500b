"""The datagrams of the production protocol (``skeen.py``) and their byte encoding.

Failure-free, three kinds travel: ``Submit`` (the sender to each destination
cluster's leader), ``Accept`` (a leader's local timestamp for m, to every process of
Dst(m)) and ``Accepted`` (a member's acknowledgement, to every process of Dst(m)).
The view change of one cluster adds ``ViewChange``, ``DoViewChange`` and
``StartView`` (Viewstamped Replication's three messages), sent inside that cluster
only.

Message-size minimality: ``Submit`` and ``Accept`` carry one 2-byte id per
destination cluster, ``Accepted`` one timestamp per destination cluster (the vector
it acknowledges); every other field is fixed-width. The view-change messages carry a
cluster's log (a function of the load, like SCALATOM's gossip, never of n).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .messages import MsgId

Entry = tuple[MsgId, int, tuple[int, ...], bytes]
"""A log entry shipped in a view change: ``(mid, local timestamp, Dst(m), payload)``."""


@dataclass(frozen=True, slots=True)
class Submit:
    """TO-multicast(m): the sender (or a member forwarding it) to a cluster's leader."""

    mid: MsgId
    dst: tuple[int, ...]
    payload: bytes


@dataclass(frozen=True, slots=True)
class Accept:
    """The leader of ``group`` in ``ballot`` put m at ``slot`` of its log with local
    timestamp ``lts`` (Skeen's proposal); sent to every process of Dst(m)."""

    mid: MsgId
    dst: tuple[int, ...]
    payload: bytes
    group: int
    ballot: int
    slot: int
    lts: int


@dataclass(frozen=True, slots=True)
class Accepted:
    """A member of ``group`` holds m in its log in ``ballot`` and knows the local
    timestamps ``vector`` (one per destination cluster, in Dst(m) order); ``length``
    is its log's length when it acknowledged (read from the leader's)."""

    mid: MsgId
    group: int
    ballot: int
    vector: tuple[int, ...]
    length: int


@dataclass(frozen=True, slots=True)
class ViewChange:
    """Move to ``ballot`` (its leader is ``members[ballot % size]``)."""

    ballot: int


@dataclass(frozen=True, slots=True)
class DoViewChange:
    """A member's state, to the leader of ``ballot``: its log of the last ballot in
    which it was normal, its clock and the messages it knows but has not logged."""

    ballot: int
    last_normal: int
    clock: int
    log: tuple[Entry, ...]
    known: tuple[Entry, ...]


@dataclass(frozen=True, slots=True)
class StartView:
    """The new leader's log and clock: members adopt them and enter ``ballot``."""

    ballot: int
    clock: int
    log: tuple[Entry, ...]


Message = Submit | Accept | Accepted | ViewChange | DoViewChange | StartView

_MID = struct.Struct(">II")
_KIND = {Submit: 11, Accept: 12, Accepted: 13, ViewChange: 14, DoViewChange: 15,
         StartView: 16}


def about(msg: Message) -> tuple[MsgId, ...]:
    """The TO-multicast messages a datagram carries information about."""
    if isinstance(msg, ViewChange):
        return ()
    if isinstance(msg, DoViewChange):
        return tuple(e[0] for e in msg.log + msg.known)
    if isinstance(msg, StartView):
        return tuple(e[0] for e in msg.log)
    return (msg.mid,)


def _groups(dst: tuple[int, ...]) -> bytes:
    return struct.pack(">B", len(dst)) + b"".join(struct.pack(">H", g) for g in dst)


def _entries(entries: tuple[Entry, ...]) -> bytes:
    out = bytearray(struct.pack(">I", len(entries)))
    for mid, lts, dst, payload in entries:
        out += _MID.pack(*mid) + struct.pack(">q", lts) + _groups(dst)
        out += struct.pack(">I", len(payload)) + payload
    return bytes(out)


def encode(msg: Message) -> bytes:
    """A compact, deterministic byte encoding (to measure sizes; no decoder needed)."""
    out = bytearray([_KIND[type(msg)]])
    if isinstance(msg, ViewChange):
        out += struct.pack(">I", msg.ballot)
    elif isinstance(msg, DoViewChange):
        out += struct.pack(">IIq", msg.ballot, msg.last_normal, msg.clock)
        out += _entries(msg.log) + _entries(msg.known)
    elif isinstance(msg, StartView):
        out += struct.pack(">Iq", msg.ballot, msg.clock) + _entries(msg.log)
    elif isinstance(msg, Submit):
        out += _MID.pack(*msg.mid) + _groups(msg.dst)
        out += struct.pack(">I", len(msg.payload)) + msg.payload
    elif isinstance(msg, Accept):
        out += _MID.pack(*msg.mid) + _groups(msg.dst)
        out += struct.pack(">HIIq", msg.group, msg.ballot, msg.slot, msg.lts)
        out += struct.pack(">I", len(msg.payload)) + msg.payload
    else:
        out += _MID.pack(*msg.mid) + struct.pack(">HII", msg.group, msg.ballot, msg.length)
        out += struct.pack(">B", len(msg.vector))
        out += b"".join(struct.pack(">q", ts) for ts in msg.vector)
    return bytes(out)


def header_bytes(msg: Message) -> int:
    """Encoded size less the application payloads: the protocol's metadata."""
    size = len(encode(msg))
    if isinstance(msg, (Submit, Accept)):
        return size - len(msg.payload)
    if isinstance(msg, (DoViewChange, StartView)):
        entries = msg.log + msg.known if isinstance(msg, DoViewChange) else msg.log
        return size - sum(len(e[3]) for e in entries)
    return size
