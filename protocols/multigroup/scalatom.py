"""SCALATOM, the process state machine (Scalable Atomic Multicast, Rodrigues, Guerraoui
and Schiper, section 4).

Processes are partitioned into groups; a message m is TO-multicast to a set of groups
Dst(m) by any process, member of them or not (the open model of section 1.1). Process
p_j runs the five steps of Figure 5:

1. TO-multicast(m): R-multicast m to the processes of Dst(m) (``Data``; every addressee
   relays it once to the others before it R-delivers it, the reliable multicast of
   Chandra and Toueg).
2. R-deliver(m): ``rec-ts(m) <- ts; ts <- ts + 1``; send ``rec-ts(m)`` to Dst(m); keep
   m pending; log the R-delivery in the history.
3. With timestamps from a *qualified majority* of Dst(m) (a majority of every
   destination group, section 3.5): start consensus (``consensus.py``) with the largest
   timestamp received.
4. Decide sn(m): ``ts <- max(ts, sn(m)) + 1``; move m to the compute-PPS buffer; send
   the new part of the history to the local group (footnote 4: only new entries).
5. With ``history(p_k, sn(m))`` from a majority of the local group: PPS(m) is the set of
   messages they R-delivered with a timestamp <= sn(m); m enters the delivery queue.

Delivery (4.2, step 5): the head m of the queue is TO-delivered once every message of
PPS(m) has a sequence number and each either follows m or has been TO-delivered.

Where this module departs from the text, to implement its intent:

- **Tie-break.** Two messages may get the same sequence number; the paper gives no
  order for them. Messages are ordered by ``(sn, id)``, id = ``(sender, sender's
  sequence number)``, in the delivery queue and in the delivery condition.
- **Which history.** Figure 5 logs ``(R-deliver(m), ts)`` *after* the increment and 4.2
  defines ``history(p, n)`` as the R-deliveries with a timestamp *lower than* n. With
  equal sequence numbers allowed, a message m1 with ``sn(m1) = sn(m2)`` ordered first
  by the tie-break must be in PPS(m2), so the history keeps ``rec-ts(m)`` (the
  timestamp sent in step 2) and PPS(m) takes the R-deliveries with ``rec-ts <= sn(m)``
  (Lemma 5's argument then gives ``(sn(m1), m1) > (sn(m2), m2)`` for any m1 left out).
- **When a history is complete.** Histories travel incrementally with the sender's
  clock (``Gossip.horizon``): p_k R-delivers nothing later with a timestamp below its
  clock, so ``history(p_k, sn(m))`` is known once a gossip with ``horizon > sn(m)`` has
  arrived (the paper's "after p_k decided sn(m)" is the case it relies on). Gossips are
  numbered and applied in order, since channels may reorder.
- **Decide events.** The history also logs decide events in the paper; compute-PPS
  never reads them, so only R-deliveries are gossiped.
- **PPS.** The union of the histories of *every* group member known complete up to
  sn(m) (a majority at least): a superset of the paper's set, as safe. Messages already
  TO-delivered and m itself are left out (the optimisation of 4.2).
- **Uniform R-multicast.** Lemma 3 takes every m' in PPS(m) to be R-delivered by a
  majority of the group; it is only known to be R-delivered by one member. Liveness
  needs the R-multicast to be uniform: here an addressee relays m before it R-delivers
  it and a sent datagram reaches every correct receiver (the reliable channels of
  Chandra and Toueg). The simulator models exactly that.

Sans-IO: every input (``multicast``, ``receive``, ``suspect``) takes ``now`` and returns
the outputs: ``Send`` datagrams and ``Deliver`` events. There are no timers: the
failure detector's suspicions are an input.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .consensus import ConsensusInstance, ConsensusStep
from .messages import (
    ConsensusMessage,
    Data,
    Gossip,
    Message,
    MsgId,
    Timestamp,
)


@dataclass(frozen=True, slots=True)
class Federation:
    """The groups (section 3.3): non-intersecting, fixed, known to every process."""

    groups: Mapping[int, tuple[int, ...]]

    def __post_init__(self) -> None:
        seen: set[int] = set()
        for gid, members in self.groups.items():
            if not members:
                raise ValueError(f"group {gid} is empty")
            if seen & set(members):
                raise ValueError(f"group {gid} intersects another group")
            seen |= set(members)

    def group_of(self, pid: int) -> int | None:
        for gid, members in self.groups.items():
            if pid in members:
                return gid
        return None

    def processes(self, dst: Iterable[int]) -> tuple[int, ...]:
        """The processes of a set of groups, sorted."""
        return tuple(sorted(p for g in set(dst) for p in self.groups[g]))

    def is_qualified_majority(self, dst: Iterable[int], pids: Iterable[int]) -> bool:
        """A majority of every group of ``dst`` (section 3.5)."""
        have = set(pids)
        return all(len(have & set(self.groups[g])) * 2 > len(self.groups[g]) for g in dst)

    @property
    def n(self) -> int:
        return sum(len(m) for m in self.groups.values())


@dataclass(frozen=True, slots=True)
class ScalatomConfig:
    literal_history_bound: bool = False
    """PPS(m) from the R-deliveries with ``rec-ts < sn(m)``, the text's "lower than",
    instead of ``<=``. Wrong under the ``(sn, id)`` tie-break (a message with the same sn
    and a smaller id can be left out); kept so that a test shows the oracle catching it."""
    history_quorum: int | None = None
    """How many members' histories (this process's included) PPS(m) waits for; None: a
    majority of the group (step 5). Fewer is unsafe; kept for the oracle's tests."""


@dataclass(frozen=True, slots=True)
class Send:
    dst: int
    msg: Message


@dataclass(frozen=True, slots=True)
class Deliver:
    """TO-deliver(m)."""

    mid: MsgId
    payload: bytes
    sn: int


Output = Send | Deliver


@dataclass(slots=True)
class _PeerHistory:
    """What p knows of a group peer's history (step 4)."""

    rdelivered: dict[MsgId, int] = field(default_factory=dict)
    horizon: int = 0
    next_seq: int = 0
    early: dict[int, Gossip] = field(default_factory=dict)


class ScalatomProcess:
    """One process p_j: a member of one group, or a client of none (it only multicasts)."""

    def __init__(self, pid: int, federation: Federation,
                 config: ScalatomConfig = ScalatomConfig()) -> None:
        self.pid = pid
        self.config = config
        self.fed = federation
        self.group = federation.group_of(pid)
        self.peers: tuple[int, ...] = (
            () if self.group is None
            else tuple(p for p in federation.groups[self.group] if p != pid))
        self.clock = 0
        self._next_seq = 0
        self.data: dict[MsgId, Data] = {}
        self.timestamps: dict[MsgId, dict[int, int]] = defaultdict(dict)
        self.consensus: dict[MsgId, ConsensusInstance] = {}
        self._early: dict[MsgId, list[tuple[int, ConsensusMessage]]] = defaultdict(list)
        self._suspected: frozenset[int] = frozenset()
        self.sn: dict[MsgId, int] = {}
        self.pending: set[MsgId] = set()
        self.compute_pps: set[MsgId] = set()
        self.queue: list[tuple[int, MsgId]] = []
        self.pps: dict[MsgId, frozenset[MsgId]] = {}
        self.delivered: set[MsgId] = set()
        self.history: list[tuple[MsgId, int]] = []
        self._gossiped = 0
        self._gossip_seq = 0
        self._peer: dict[int, _PeerHistory] = {p: _PeerHistory() for p in self.peers}

    # inputs

    def multicast(self, now: float, payload: bytes, dst: Iterable[int]) -> list[Output]:
        """TO-multicast(payload, dst) (step 1); returns the sends and any deliveries."""
        groups = tuple(sorted(set(dst)))
        if not groups or any(g not in self.fed.groups for g in groups):
            raise ValueError(f"unknown destination groups {groups}")
        mid = (self.pid, self._next_seq)
        self._next_seq += 1
        data = Data(mid, groups, payload)
        out: list[Output] = [Send(p, data) for p in self.fed.processes(groups) if p != self.pid]
        if self.group in groups:
            self.data[mid] = data
            self._r_deliver(data, out)
        return out

    def receive(self, now: float, src: int, msg: Message) -> list[Output]:
        out: list[Output] = []
        if isinstance(msg, Data):
            if msg.mid not in self.data and self.group in msg.dst:
                self.data[msg.mid] = msg
                out += [Send(p, msg) for p in self.fed.processes(msg.dst) if p != self.pid]
                self._r_deliver(msg, out)
        elif isinstance(msg, Timestamp):
            self.timestamps[msg.mid].setdefault(src, msg.ts)
            self._try_start(msg.mid, out)
        elif isinstance(msg, Gossip):
            self._gossip(src, msg, out)
        else:
            inst = self.consensus.get(msg.mid)
            if inst is None:
                self._early[msg.mid].append((src, msg))
            else:
                self._consensus_step(msg.mid, inst.receive(src, msg), out)
        return out

    def suspect(self, now: float, suspected: Iterable[int]) -> list[Output]:
        """The ◇S failure detector's output changed to ``suspected``."""
        self._suspected = frozenset(suspected)
        out: list[Output] = []
        for mid, inst in list(self.consensus.items()):
            if inst.decision is None:
                self._consensus_step(mid, inst.suspect(self._suspected), out)
        return out

    # steps

    def _r_deliver(self, data: Data, out: list[Output]) -> None:
        mid = data.mid
        rec = self.clock
        self.clock += 1
        self.history.append((mid, rec))
        self.timestamps[mid].setdefault(self.pid, rec)
        participants = self.fed.processes(data.dst)
        out += [Send(p, Timestamp(mid, rec)) for p in participants if p != self.pid]
        self.pending.add(mid)
        inst = ConsensusInstance(mid, self.pid, participants)
        self.consensus[mid] = inst
        inst.suspect(self._suspected)
        for src, msg in self._early.pop(mid, []):
            inst.receive(src, msg)
        self._try_start(mid, out)

    def _try_start(self, mid: MsgId, out: list[Output]) -> None:
        inst = self.consensus.get(mid)
        if inst is None or inst.started:
            return
        got = self.timestamps[mid]
        if self.fed.is_qualified_majority(self.data[mid].dst, got):
            self._consensus_step(mid, inst.start(max(got.values())), out)

    def _consensus_step(self, mid: MsgId, step: ConsensusStep, out: list[Output]) -> None:
        out += [Send(dst, msg) for dst, msg in step.sends]
        if step.decided is not None and mid not in self.sn:
            self._decided(mid, step.decided, out)

    def _decided(self, mid: MsgId, sn: int, out: list[Output]) -> None:
        self.sn[mid] = sn
        self.clock = max(self.clock, sn) + 1
        self.pending.discard(mid)
        self.compute_pps.add(mid)
        entries = tuple(self.history[self._gossiped:])
        self._gossiped = len(self.history)
        gossip = Gossip(self._gossip_seq, self.clock, entries)
        self._gossip_seq += 1
        out += [Send(p, gossip) for p in self.peers]
        self._try_pps(out)

    def _gossip(self, src: int, msg: Gossip, out: list[Output]) -> None:
        peer = self._peer.get(src)
        if peer is None or msg.seq < peer.next_seq:
            return
        peer.early[msg.seq] = msg
        while peer.next_seq in peer.early:
            g = peer.early.pop(peer.next_seq)
            peer.next_seq += 1
            peer.rdelivered.update(g.entries)
            peer.horizon = max(peer.horizon, g.horizon)
        self._try_pps(out)

    def _try_pps(self, out: list[Output]) -> None:
        if self.group is None:
            return
        need = self.config.history_quorum or len(self.fed.groups[self.group]) // 2 + 1
        for mid in sorted(self.compute_pps, key=lambda m: (self.sn[m], m)):
            sn = self.sn[mid]
            known = [p for p in self.peers if self._peer[p].horizon > sn]
            if len(known) + 1 < need:  # + 1: this process, whose clock is > sn(m)
                continue
            bound = sn - 1 if self.config.literal_history_bound else sn
            pps = {m for m, ts in self.history if ts <= bound}
            for p in known:
                pps |= {m for m, ts in self._peer[p].rdelivered.items() if ts <= bound}
            pps -= self.delivered
            pps.discard(mid)
            self.pps[mid] = frozenset(pps)
            self.compute_pps.discard(mid)
            bisect.insort(self.queue, (sn, mid))
        self._try_deliver(out)

    def _try_deliver(self, out: list[Output]) -> None:
        while self.queue:
            sn, mid = self.queue[0]
            for other in self.pps[mid]:
                if other in self.delivered:
                    continue
                if other not in self.sn or (self.sn[other], other) < (sn, mid):
                    return
            self.queue.pop(0)
            self.delivered.add(mid)
            out.append(Deliver(mid, self.data[mid].payload, sn))
