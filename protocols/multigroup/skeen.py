"""The production protocol: Skeen's timestamps over ordered clusters, in three message
delays (the White-Box atomic multicast of Gotsman, Lefort and Chockler, with a
Viewstamped Replication view change inside each cluster).

SCALATOM (``scalatom.py``) pays a consensus among all of Dst(m) per message because its
groups have no internal order (Scalable Atomic Multicast, 4.2: 6 steps). Here each
cluster is an *ordered group*: a leader-based replicated log with majority
acknowledgements and leader replacement on suspicion (the plan at the end of
``docs/multigroup.md``). Skeen's algorithm (the symmetric row of section 5.2, one
"process" per cluster) runs on top, and the two rounds are merged: a cluster's
acknowledgement of its log entry is also the exchange of timestamps.

Failure-free, for m multicast to the clusters Dst(m):

1. The sender sends ``Submit(m)`` to the leader of each destination cluster (delay 1).
2. The leader of cluster g appends m to its log with local timestamp
   ``lts_g(m) = ++clock`` and sends ``Accept(m, g, ballot, slot, lts)`` to every process
   of Dst(m) (delay 2). Members of g append it in slot order.
3. A member holding m in its log and knowing ``lts_h(m)`` of every destination cluster h
   raises its clock to ``max_h lts_h(m)`` and sends ``Accepted(m, g, ballot, vector,
   length)`` to every process of Dst(m) (delay 3).
4. p (of g) *commits* m with the vector V once a majority of every destination
   cluster acknowledged V (its own cluster's majority in p's current ballot and
   including that ballot's leader, and p's log at least as long as the leader's when
   it acknowledged); ``gts(m) = max V``.
5. p delivers the entry of its log with the smallest key, while it is committed; the
   key is ``(gts(m), m)`` for a committed entry and ``(lts_g(m), m)`` (a lower bound
   of its final key) for the others. Failure-free, every addressee delivers after
   3 message delays (2 when the sender leads the only destination cluster).

Why it orders. Keys are agreed: a majority of h acknowledged ``lts_h(m)`` in one ballot,
and the view change keeps such an entry with its timestamp (below). When p delivers m,
any m' of g with a smaller final key is in p's log: the leader of p's ballot raised its
clock to gts(m) before it acknowledged m, so what it appends later gets a larger
timestamp, and what it appended before is within the ``length`` p waited for; a later
ballot starts from a clock at least gts(m) (its leader takes the maximum clock of a
majority, which meets the majority that acknowledged m). So every process delivers in
increasing ``(gts, id)`` order: one global order, acyclic.

The ordered group (Viewstamped Replication, Oki and Liskov; ballots are views). The
leader of ballot b is ``members[b % size]``. A member that suspects its leader moves to
the next ballot whose leader it does not suspect, tells the cluster (``ViewChange``)
and sends its state (``DoViewChange``: log of its last normal ballot, clock, messages
it knows but has not logged) to the new leader. With a majority of states, the leader
takes the log with the largest ``(last normal ballot, length)``, the largest clock,
appends the known messages missing from it, sends ``StartView`` to the cluster and
``Accept`` for every entry to the other clusters. An entry acknowledged by a majority
in one ballot is in every later ballot's log. Members deliver only in a normal ballot.

Liveness. A sender that suspects the leader it submitted to sends ``Submit`` to every
member of that cluster; a follower forwards a ``Submit`` to its leader, and a message
it knows but the new log lacks after a view change. A leader appends a message it
learns from another cluster's ``Accept`` (a sender that crashed mid-multicast).

Modelled, not built: the links are the simulator's reliable channels (retransmission
after loss, as for SCALATOM); the failure detector is an input; logs are never pruned.
In a deployment the ordered group is an amcast cluster (its ToTo stream with ``safe``
delivery and membership view changes); the leader and its majority acknowledgement
stand for that stream.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from .messages import MsgId
from .scalatom import Deliver, Federation, Output, Send
from .skeen_messages import (
    Accept,
    Accepted,
    DoViewChange,
    Entry,
    Message,
    StartView,
    Submit,
    ViewChange,
)

NORMAL, CHANGE = "normal", "change"


@dataclass(frozen=True, slots=True)
class ProductionConfig:
    leader_in_quorum: bool = True
    """Commit needs the own cluster's leader among the acknowledgements (and the log as
    long as the leader's). False is unsafe; kept so that a test shows the oracle
    catching it."""
    raise_clock: bool = True
    """A member raises its clock to gts(m) when it acknowledges m (Skeen's rule). False
    is unsafe; kept for the oracle's tests."""


class ProductionProcess:
    """One process: a member of one cluster, or a client of none (it only multicasts)."""

    def __init__(self, pid: int, federation: Federation,
                 config: ProductionConfig = ProductionConfig()) -> None:
        self.pid = pid
        self.fed = federation
        self.config = config
        self.group = federation.group_of(pid)
        self.members: tuple[int, ...] = (
            () if self.group is None else federation.groups[self.group])
        self.clock = 0
        self.ballot = 0
        self.status = NORMAL
        self.last_normal = 0
        self.log: list[MsgId] = []
        self.lts: dict[MsgId, int] = {}
        self._early: dict[tuple[int, int], Accept] = {}
        self.data: dict[MsgId, tuple[tuple[int, ...], bytes]] = {}
        self.remote: dict[MsgId, dict[int, tuple[int, int]]] = defaultdict(dict)
        self._acked: dict[MsgId, tuple[int, tuple[int, ...]]] = {}
        self.acks: dict[MsgId, dict[tuple[int, int], dict[tuple[int, ...], dict[int, int]]]] = (
            defaultdict(lambda: defaultdict(dict)))
        """``acks[m][(group, ballot)][vector][member]``: the log length it acknowledged at."""
        self.delivered: set[MsgId] = set()
        self._dvc: dict[int, dict[int, DoViewChange]] = defaultdict(dict)
        self._suspected: frozenset[int] = frozenset()
        self._next_seq = 0
        self.mine: dict[MsgId, tuple[int, ...]] = {}
        self._payloads: dict[MsgId, bytes] = {}
        self._targets: dict[MsgId, dict[int, set[int]]] = defaultdict(dict)
        """Where each own multicast was submitted, per destination cluster."""
        self._hint: dict[int, tuple[int, int]] = {g: (0, m[0])
                                                  for g, m in federation.groups.items()}

    # helpers

    def leader_of(self, ballot: int) -> int:
        return self.members[ballot % len(self.members)]

    @property
    def is_leader(self) -> bool:
        return (self.group is not None and self.status == NORMAL
                and self.leader_of(self.ballot) == self.pid)

    def _majority(self, gid: int) -> int:
        return len(self.fed.groups[gid]) // 2 + 1

    def _send_all(self, pids: Iterable[int], msg: Message, out: list[Output]) -> None:
        out += [Send(p, msg) for p in pids if p != self.pid]  # type: ignore[arg-type]

    def _entry(self, mid: MsgId) -> Entry:
        dst, payload = self.data[mid]
        return (mid, self.lts[mid], dst, payload)

    def _known(self) -> list[MsgId]:
        """Messages addressed to this cluster that it has data for and has not logged."""
        return sorted(mid for mid, (dst, _) in self.data.items()
                      if self.group in dst and mid not in self.lts)

    # inputs

    def multicast(self, now: float, payload: bytes, dst: Iterable[int]) -> list[Output]:
        groups = tuple(sorted(set(dst)))
        if not groups or any(g not in self.fed.groups for g in groups):
            raise ValueError(f"unknown destination groups {groups}")
        mid = (self.pid, self._next_seq)
        self._next_seq += 1
        self.mine[mid] = groups
        self._payloads[mid] = payload
        out: list[Output] = []
        sub = Submit(mid, groups, payload)
        for g in groups:
            if g == self.group:
                self._on_submit(sub, out)
                continue
            leader = self._hint[g][1]
            targets = set(self.fed.groups[g]) if leader in self._suspected else {leader}
            self._targets[mid][g] = targets
            self._send_all(sorted(targets), sub, out)
        self._try_deliver(out)
        return out

    def receive(self, now: float, src: int, msg: Message) -> list[Output]:
        out: list[Output] = []
        if isinstance(msg, Submit):
            self._on_submit(msg, out)
        elif isinstance(msg, Accept):
            self._on_accept(msg, out)
        elif isinstance(msg, Accepted):
            if src in self.fed.groups.get(msg.group, ()):
                self._record_ack(src, msg)
        elif self.group is None or src not in self.members:
            return out
        elif isinstance(msg, ViewChange):
            if msg.ballot > self.ballot:
                self._start_change(msg.ballot, out)
        elif isinstance(msg, DoViewChange):
            self._on_do_view_change(src, msg, out)
        else:
            self._on_start_view(msg, out)
        self._try_deliver(out)
        return out

    def suspect(self, now: float, suspected: Iterable[int]) -> list[Output]:
        """The failure detector's output changed to ``suspected``."""
        new = frozenset(suspected)
        newly = new - self._suspected
        self._suspected = new
        out: list[Output] = []
        if self.group is not None:
            leader = self.leader_of(self.ballot)
            if leader != self.pid and leader in new:
                self._start_change(self.ballot + 1, out)
        for mid, per_group in sorted(self._targets.items()):
            for gid, targets in sorted(per_group.items()):
                if targets & newly and mid not in self.delivered:
                    members = self.fed.groups[gid]
                    per_group[gid] = set(members)
                    sub = Submit(mid, self.mine[mid], self._payloads[mid])
                    self._send_all(members, sub, out)
        self._try_deliver(out)
        return out

    # the ordered group

    def _on_submit(self, msg: Submit, out: list[Output]) -> None:
        if self.group not in msg.dst:
            return
        self.data.setdefault(msg.mid, (msg.dst, msg.payload))
        if msg.mid in self.lts:
            return
        if self.is_leader:
            self._append(msg.mid, out)
        elif self.status == NORMAL:
            out.append(Send(self.leader_of(self.ballot), msg))

    def _append(self, mid: MsgId, out: list[Output]) -> None:
        self.clock += 1
        self.lts[mid] = self.clock
        slot = len(self.log)
        self.log.append(mid)
        dst, payload = self.data[mid]
        assert self.group is not None
        self._send_all(self.fed.processes(dst),
                       Accept(mid, dst, payload, self.group, self.ballot, slot, self.clock), out)
        self._try_ack(mid, out)

    def _on_accept(self, a: Accept, out: list[Output]) -> None:
        self.data.setdefault(a.mid, (a.dst, a.payload))
        if a.group != self.group:
            hb, _ = self._hint.get(a.group, (-1, -1))
            if a.ballot >= hb:
                members = self.fed.groups[a.group]
                self._hint[a.group] = (a.ballot, members[a.ballot % len(members)])
            rec = self.remote[a.mid].get(a.group)
            if rec is None or a.ballot > rec[0]:
                self.remote[a.mid][a.group] = (a.ballot, a.lts)
                self._try_ack(a.mid, out)
            if self.is_leader and a.mid not in self.lts:
                self._append(a.mid, out)
            return
        if a.ballot < self.ballot or (a.ballot == self.ballot and self.is_leader):
            return
        self._early[(a.ballot, a.slot)] = a
        self._drain(out)

    def _drain(self, out: list[Output]) -> None:
        if self.status != NORMAL:
            return
        while (self.ballot, len(self.log)) in self._early:
            a = self._early.pop((self.ballot, len(self.log)))
            self.log.append(a.mid)
            self.lts[a.mid] = a.lts
            self.clock = max(self.clock, a.lts)
            self._try_ack(a.mid, out)

    def _start_change(self, ballot: int, out: list[Output]) -> None:
        while self.leader_of(ballot) in self._suspected and self.leader_of(ballot) != self.pid:
            ballot += 1
        if ballot <= self.ballot:
            return
        self.ballot = ballot
        self.status = CHANGE
        self._send_all(self.members, ViewChange(ballot), out)
        dvc = DoViewChange(ballot, self.last_normal, self.clock,
                           tuple(self._entry(m) for m in self.log),
                           tuple((m, 0, *self.data[m]) for m in self._known()))
        leader = self.leader_of(ballot)
        if leader == self.pid:
            self._on_do_view_change(self.pid, dvc, out)
        else:
            out.append(Send(leader, dvc))

    def _on_do_view_change(self, src: int, d: DoViewChange, out: list[Output]) -> None:
        if d.ballot < self.ballot:
            return
        if d.ballot > self.ballot:
            self._start_change(d.ballot, out)
            if d.ballot != self.ballot:
                return
        self._dvc[d.ballot][src] = d
        states = self._dvc[self.ballot]
        assert self.group is not None
        if (self.status != CHANGE or self.leader_of(self.ballot) != self.pid
                or len(states) < self._majority(self.group)):
            return
        best = max(states.values(), key=lambda s: (s.last_normal, len(s.log)))
        self._install(best.log, max(s.clock for s in states.values()))
        for s in states.values():
            for mid, _, dst, payload in s.known + s.log:
                self.data.setdefault(mid, (dst, payload))
        del self._dvc[self.ballot]
        self._send_all(self.members, StartView(self.ballot, self.clock,
                                               tuple(self._entry(m) for m in self.log)), out)
        others = [p for p in self.fed.processes(self.fed.groups) if p not in self.members]
        for slot, mid in enumerate(self.log):
            dst, payload = self.data[mid]
            acc = Accept(mid, dst, payload, self.group, self.ballot, slot, self.lts[mid])
            self._send_all([p for p in self.fed.processes(dst) if p in others], acc, out)
        for mid in self.log:
            self._try_ack(mid, out)
        for mid in self._known():
            self._append(mid, out)

    def _install(self, log: tuple[Entry, ...], clock: int) -> None:
        self.status = NORMAL
        self.last_normal = self.ballot
        self.log = [e[0] for e in log]
        self.lts = {e[0]: e[1] for e in log}
        for mid, _, dst, payload in log:
            self.data.setdefault(mid, (dst, payload))
        self.clock = max([self.clock, clock, *self.lts.values()])
        self._early = {k: v for k, v in self._early.items() if k[0] >= self.ballot}

    def _on_start_view(self, s: StartView, out: list[Output]) -> None:
        if s.ballot < self.ballot or (s.ballot == self.ballot and self.status == NORMAL):
            return
        self.ballot = s.ballot
        self._install(s.log, s.clock)
        for mid in self.log:
            self._try_ack(mid, out)
        self._drain(out)
        leader = self.leader_of(self.ballot)
        for mid in self._known():
            dst, payload = self.data[mid]
            out.append(Send(leader, Submit(mid, dst, payload)))

    # Skeen

    def _vector(self, mid: MsgId) -> tuple[int, ...] | None:
        dst = self.data[mid][0]
        out = []
        for g in dst:
            if g == self.group:
                out.append(self.lts[mid])
            else:
                rec = self.remote[mid].get(g)
                if rec is None:
                    return None
                out.append(rec[1])
        return tuple(out)

    def _try_ack(self, mid: MsgId, out: list[Output]) -> None:
        if self.status != NORMAL or mid not in self.lts:
            return
        vector = self._vector(mid)
        if vector is None or self._acked.get(mid) == (self.ballot, vector):
            return
        self._acked[mid] = (self.ballot, vector)
        if self.config.raise_clock:
            self.clock = max(self.clock, *vector)
        assert self.group is not None
        acc = Accepted(mid, self.group, self.ballot, vector, len(self.log))
        self._record_ack(self.pid, acc)
        self._send_all(self.fed.processes(self.data[mid][0]), acc, out)

    def _record_ack(self, src: int, a: Accepted) -> None:
        by = self.acks[a.mid][(a.group, a.ballot)].setdefault(a.vector, {})
        by[src] = max(by.get(src, 0), a.length)

    def _committed(self, mid: MsgId) -> int | None:
        """gts(m) if m is committed for this process now, else None."""
        assert self.group is not None
        acks = self.acks.get(mid)
        if acks is None:
            return None
        own = acks.get((self.group, self.ballot), {})
        leader = self.leader_of(self.ballot)
        for vector, by in own.items():
            if self.config.leader_in_quorum and (
                    leader not in by or len(self.log) < by[leader]):
                continue
            if all(any(len(acks.get((g, b), {}).get(vector, {})) >= self._majority(g)
                       for b in ([self.ballot] if g == self.group
                                 else [b for h, b in acks if h == g]))
                   for g in self.data[mid][0]):
                return max(vector)
        return None

    def _try_deliver(self, out: list[Output]) -> None:
        if self.group is None or self.status != NORMAL:
            return
        while True:
            best: tuple[int, MsgId, int | None] | None = None
            for mid in self.log:
                if mid in self.delivered:
                    continue
                gts = self._committed(mid)
                key = (gts if gts is not None else self.lts[mid], mid, gts)
                if best is None or key[:2] < best[:2]:
                    best = key
            if best is None or best[2] is None:
                return
            self.delivered.add(best[1])
            out.append(Deliver(best[1], self.data[best[1]][1], best[2]))
