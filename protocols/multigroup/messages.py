"""The datagrams of SCALATOM and their byte encoding (Scalable Atomic Multicast, 4.2).

One datagram per kind of step: ``Data`` (the R-multicast of m, step 1, relayed once by
every addressee), ``Timestamp`` (step 2), the consensus messages ``Estimate``,
``Propose``, ``Ack``, ``Abort`` and ``Decide`` (step 3, a Chandra-Toueg style consensus
among the processes of Dst(m)) and ``Gossip`` (step 4, histories inside one group).

Message-size minimality (section 1.2) is checked on the bytes of ``encode``: every
field is fixed-width except the destination groups of ``Data`` (one 2-byte id per
group, so bounded by d) and the history entries of ``Gossip`` (the R-deliveries since
the previous gossip to the group, footnote 4: a function of the load, not of n). No
field names a process outside Dst(m) and no field grows with the number of processes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

MsgId = tuple[int, int]
"""``(sender process id, sender's sequence number)``: unique per TO-multicast."""


@dataclass(frozen=True, slots=True)
class Data:
    """R-multicast body of m (step 1): sent by the sender, relayed by each addressee."""

    mid: MsgId
    dst: tuple[int, ...]
    """Dst(m): the destination group ids, sorted."""
    payload: bytes


@dataclass(frozen=True, slots=True)
class Timestamp:
    """rec-ts_j(m): the clock of p_j when it R-delivered m (step 2)."""

    mid: MsgId
    ts: int


@dataclass(frozen=True, slots=True)
class Estimate:
    """Consensus phase 1 of a round > 1: a participant's estimate to the coordinator."""

    mid: MsgId
    round: int
    value: int
    ts_est: int
    """The round in which ``value`` was adopted (0: the participant's own proposal)."""


@dataclass(frozen=True, slots=True)
class Propose:
    """Consensus phase 2: the coordinator's proposal for the round."""

    mid: MsgId
    round: int
    value: int


@dataclass(frozen=True, slots=True)
class Ack:
    """Consensus phase 3: adopted the proposal (``ok``) or suspected the coordinator."""

    mid: MsgId
    round: int
    ok: bool


@dataclass(frozen=True, slots=True)
class Abort:
    """The coordinator saw a nack among a majority of replies: go to the next round."""

    mid: MsgId
    round: int


@dataclass(frozen=True, slots=True)
class Decide:
    """The decision sn(m), reliably broadcast among Dst(m) (relayed once)."""

    mid: MsgId
    value: int


@dataclass(frozen=True, slots=True)
class Gossip:
    """History of the sender inside its group (step 4), sent incrementally.

    ``entries`` are the sender's R-deliveries ``(mid, rec-ts)`` since its previous
    gossip (``seq`` orders gossips, so a receiver applies them in order);
    ``horizon`` is the sender's clock: every later R-delivery gets a timestamp >=
    ``horizon``, so the receiver knows ``history(p, n)`` completely for ``n < horizon``.
    """

    seq: int
    horizon: int
    entries: tuple[tuple[MsgId, int], ...]


Message = Data | Timestamp | Estimate | Propose | Ack | Abort | Decide | Gossip
ConsensusMessage = Estimate | Propose | Ack | Abort | Decide

MESSAGE_TYPES = (Data, Timestamp, Estimate, Propose, Ack, Abort, Decide, Gossip)

_MID = struct.Struct(">II")
_KIND = {Data: 1, Timestamp: 2, Estimate: 3, Propose: 4, Ack: 5, Abort: 6, Decide: 7, Gossip: 8}


def about(msg: Message) -> tuple[MsgId, ...]:
    """The TO-multicast messages a datagram carries information about."""
    if isinstance(msg, Gossip):
        return tuple(mid for mid, _ in msg.entries)
    return (msg.mid,)


def encode(msg: Message) -> bytes:
    """A compact, deterministic byte encoding (to measure sizes; no decoder needed)."""
    out = bytearray([_KIND[type(msg)]])
    if isinstance(msg, Gossip):
        out += struct.pack(">IqH", msg.seq, msg.horizon, len(msg.entries))
        for mid, ts in msg.entries:
            out += _MID.pack(*mid) + struct.pack(">q", ts)
        return bytes(out)
    out += _MID.pack(*msg.mid)
    if isinstance(msg, Data):
        out += struct.pack(">B", len(msg.dst)) + b"".join(struct.pack(">H", g) for g in msg.dst)
        out += struct.pack(">I", len(msg.payload)) + msg.payload
    elif isinstance(msg, Timestamp):
        out += struct.pack(">q", msg.ts)
    elif isinstance(msg, Estimate):
        out += struct.pack(">Iqi", msg.round, msg.value, msg.ts_est)
    elif isinstance(msg, Propose):
        out += struct.pack(">Iq", msg.round, msg.value)
    elif isinstance(msg, Ack):
        out += struct.pack(">I?", msg.round, msg.ok)
    elif isinstance(msg, Abort):
        out += struct.pack(">I", msg.round)
    else:
        out += struct.pack(">q", msg.value)
    return bytes(out)


def header_bytes(msg: Message) -> int:
    """Encoded size less the application payload: the protocol's metadata."""
    size = len(encode(msg))
    return size - len(msg.payload) if isinstance(msg, Data) else size
