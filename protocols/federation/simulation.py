"""A seeded, virtual-time simulation of the federation layer over modelled clusters.

Each cluster's total order is *modelled*, not run with real Nodes: a record a member
orders (``OrderLocally``, or a local client message) reaches the cluster's sequence
after ``order_delay`` (plus jitter) if the member is still attached to the order, and
every attached member receives the sequence in order, each with its own jitter. A
record of a member that crashes (or is cut off) before its record is sequenced is
lost or sequenced, at random: safe delivery is all or nothing. The order delay stands
for one safe ordering of the ToTo path (``k`` message delays), the inter-cluster delay
for one hop.

Between clusters, every ``SendRemote`` datagram (the datagrams of one input of a member
batched per destination member, ``batching.batch_sends``) is lost, duplicated, delayed
and reordered by ``LinkFaults``; the layer's own retransmissions repair it. Faults: member
crashes (a view change reaches the others after ``detect_delay``), restarts as joiners
(a new incarnation with ``joining=True`` that gets the state through the order), a
member cut off from its cluster's order for a while (it keeps its stale state and still
answers other clusters, then comes back as a joiner: the same daemon, whose new member
``adopt``s the old one's own multicasts), a sender crashing in the middle of
its multicast (only a prefix of its datagrams leaves), and a whole cluster unreachable
from the others for seconds (its messages stall, ``Stalled`` is reported, then they
finish).

Every run is checked: ``multigroup.checkers.check_run`` (the global acyclicity oracle on
the merged delivered-before graph of every incarnation, local messages included;
integrity; uniform agreement and termination for the correct members; participant
minimality of every datagram), ``checkers.check_joiners``, ``checkers.check_outcomes``
(every global message of a daemon that stayed up is delivered by every destination or
reported ``Undelivered`` once, and no report says "not delivered" of a delivered one),
and quiescence (no correct member still retransmits at the end: bounded retransmission
state).
"""

from __future__ import annotations

import heapq
import random
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from ..multigroup.checkers import Datagram, Multicast, check_run
from ..multigroup.messages import MsgId
from ..simulation.network import LinkFaults
from .batching import batch_sends
from .checkers import check_joiners, check_outcomes
from .config import FederationConfig
from .member import FederationMember
from .outputs import (
    Deliver,
    DroppedRemote,
    FedId,
    OrderLocally,
    Output,
    SendRemote,
    Stalled,
    Undelivered,
)
from .wire import DgAck, DgBatch, decode_datagram, encode_datagram, is_record

LOCAL_TAG = b"L"
IDLE_TICK = 0.5
MIN_TICK = 0.01
DRAIN_S = 120.0
"""After ``end``, a member that still has messages in flight keeps ticking (its
retransmissions go on, no new load comes) for up to this long: links are fair-lossy,
so an acknowledgement lost five times in a row at 30% loss is no violation, while a
message still in flight after two more minutes of retransmissions is one (quiescence)."""


@dataclass(frozen=True, slots=True)
class Global:
    time: float
    node: str
    dst: tuple[str, ...]
    payload: bytes = b"x"
    crash_after: int | None = None
    """The sender crashes once this many of the multicast's outputs have left."""


@dataclass(frozen=True, slots=True)
class FedScenario:
    clusters: Mapping[str, tuple[str, ...]]
    globals_: tuple[Global, ...] = ()
    locals_: tuple[tuple[float, str], ...] = ()
    """``(time, node)``: a local message ordered by that node's cluster only."""
    crashes: Mapping[str, float] = field(default_factory=dict)
    restarts: Mapping[str, float] = field(default_factory=dict)
    """Node -> when it comes back (after its crash) as a joiner."""
    cutoffs: tuple[tuple[str, float, float], ...] = ()
    """``(node, from, until)``: cut off from its cluster's order, back as a joiner."""
    unreachable: tuple[tuple[str, float, float], ...] = ()
    """``(cluster, from, until)``: no datagram reaches it or leaves it."""
    link: LinkFaults = field(default_factory=lambda: LinkFaults(delay=0.02, jitter=0.01))
    order_delay: float = 0.05
    order_jitter: float = 0.02
    member_jitter: float = 0.005
    detect_delay: float = 0.5
    crash_drop: float = 0.5
    retransmit_s: float = 0.2
    stall_after_s: float = 2.0
    deadline_s: float = 60.0
    """``FederationConfig.deadline_s``: an own multicast not committed after this long
    is reported ``Undelivered``."""
    end: float = 30.0
    """Ticks stop here (but for members with messages in flight: ``DRAIN_S``); the run
    then drains its events."""


@dataclass(slots=True)
class FedResult:
    deliveries: dict[int, list[MsgId]] = field(default_factory=lambda: defaultdict(list))
    delivery_times: dict[int, dict[MsgId, float]] = field(
        default_factory=lambda: defaultdict(dict))
    multicasts: dict[MsgId, Multicast] = field(default_factory=dict)
    multicast_times: dict[MsgId, float] = field(default_factory=dict)
    global_ids: set[MsgId] = field(default_factory=set)
    correct: set[int] = field(default_factory=set)
    datagrams: list[Datagram] = field(default_factory=list)
    sent_by_kind: Counter[str] = field(default_factory=Counter)
    stalls: list[tuple[float, int, Stalled]] = field(default_factory=list)
    dropped: Counter[str] = field(default_factory=Counter)
    records_ordered: int = 0
    member_counters: Counter[str] = field(default_factory=Counter)
    """The members' ``counters`` summed (snapshots, retransmissions, refusals)."""
    largest_datagram_header: int = 0
    undelivered: dict[MsgId, list[str]] = field(default_factory=lambda: defaultdict(list))
    """Global message -> the outcomes its sender reported ``Undelivered`` with."""
    stayed_up: set[MsgId] = field(default_factory=set)
    """Global messages whose sender's daemon stayed up to the end (order gaps, cutoffs
    included: its member's successor adopted them)."""
    violations: list[str] = field(default_factory=list)


class _Sim:
    def __init__(self, sc: FedScenario, rng: random.Random) -> None:
        self.sc = sc
        self.rng = rng
        self.r = FedResult()
        self.heap: list[tuple[float, int, str, tuple[object, ...]]] = []
        self._n = 0
        self.cluster_of = {n: c for c, ns in sc.clusters.items() for n in ns}
        self.pids: dict[int, tuple[str, int]] = {}
        """pid -> (node, incarnation)."""
        self.current: dict[str, int] = {}
        """node -> its live incarnation's pid."""
        self.members: dict[int, FederationMember] = {}
        self.alive: set[int] = set()
        self.attached: dict[str, list[int]] = {c: [] for c in sc.clusters}
        self.last_t: dict[int, float] = {}
        self.ended: set[int] = set()
        self.joiners: set[int] = set()
        self.fedmap: dict[FedId, MsgId] = {}
        self.local_seq = 0
        self.successor: dict[int, int] = {}
        """pid -> the pid of the same daemon's next member (after a cutoff)."""
        for node in self.cluster_of:
            self._start(node, 0.0, joining=False)

    # ----------------------------------------------------------------- plumbing

    def at(self, t: float, kind: str, *args: object) -> None:
        self._n += 1
        heapq.heappush(self.heap, (t, self._n, kind, args))

    def _config(self, cluster: str) -> FederationConfig:
        sc = self.sc
        return FederationConfig(cluster, sc.clusters, retransmit_s=sc.retransmit_s,
                                stall_after_s=sc.stall_after_s, deadline_s=sc.deadline_s)

    def _start(self, node: str, now: float, *, joining: bool) -> int:
        pid = len(self.pids)
        inc = sum(1 for n, _ in self.pids.values() if n == node)
        self.pids[pid] = (node, inc)
        self.current[node] = pid
        cluster = self.cluster_of[node]
        self.members[pid] = FederationMember(self._config(cluster), node, joining=joining,
                                             first_seq=inc * 1_000_000 + 1)
        self.alive.add(pid)
        self.attached[cluster].append(pid)
        if joining:
            self.joiners.add(pid)
        self.at(now + self.rng.uniform(0, self.sc.retransmit_s / 2), "tick", pid)
        return pid

    def _detach(self, pid: int, now: float) -> None:
        cluster = self.cluster_of[self.pids[pid][0]]
        if pid in self.attached[cluster]:
            self.attached[cluster].remove(pid)
            self.at(now + self.sc.detect_delay, "view", cluster)

    def _end(self, pid: int, now: float) -> None:
        self._detach(pid, now)
        self.alive.discard(pid)
        self.ended.add(pid)

    def _end_for(self, pid: int, cid: MsgId) -> int:
        """``pid`` as the checker sees it for message ``cid``: another incarnation of the
        sender's node is the sender (a restarted daemon still gets its acks)."""
        m = self.r.multicasts.get(cid)
        if m is not None and pid != m.sender and self.pids[pid][0] == self.pids[m.sender][0]:
            return m.sender
        return pid

    def _cid(self, m: FedId) -> MsgId:
        cid = self.fedmap.get(m)
        if cid is None:  # never multicast: integrity reports it
            cid = self.fedmap[m] = (-1, len(self.fedmap))
        return cid

    def _unreachable(self, now: float, a: str, b: str) -> bool:
        return any(t0 <= now < t1 and c in (a, b) for c, t0, t1 in self.sc.unreachable)

    def emit(self, now: float, pid: int, outs: list[Output], limit: int | None = None) -> None:
        r = self.r
        outs = batch_sends(outs)  # as the daemon sends them: one datagram per member
        for count, o in enumerate(outs):
            if limit is not None and count >= limit:
                self._end(pid, now)
                return
            if isinstance(o, SendRemote):
                self.send(now, pid, o)
            elif isinstance(o, OrderLocally):
                self.inject(now, pid, o.record)
            elif isinstance(o, Deliver):
                cid = self._cid(o.msg_id)
                r.deliveries[pid].append(cid)
                r.delivery_times[pid][cid] = now
            elif isinstance(o, Stalled):
                r.stalls.append((now, pid, o))
            elif isinstance(o, Undelivered):
                r.undelivered[self._cid(o.msg_id)].append(o.outcome)
            elif isinstance(o, DroppedRemote):
                r.dropped[o.reason] += 1
        if limit is not None:
            self._end(pid, now)

    def send(self, now: float, pid: int, o: SendRemote) -> None:
        r, sc = self.r, self.sc
        node = self.pids[pid][0]
        src_cluster = self.cluster_of[node]
        dg = decode_datagram(o.datagram)
        r.sent_by_kind[type(dg).__name__] += 1
        dst_pid = self.current.get(o.node, -1)
        for item in dg.items if isinstance(dg, DgBatch) else (dg,):
            payload = 0 if isinstance(item, DgAck) else len(getattr(item, "payload", b""))
            size = len(encode_datagram(item)) if isinstance(dg, DgBatch) else len(o.datagram)
            r.largest_datagram_header = max(r.largest_datagram_header, size - payload)
            cid = self._cid(item.msg_id)
            r.datagrams.append(Datagram(self._end_for(pid, cid),
                                        self._end_for(dst_pid, cid), (cid,)))
        if self._unreachable(now, src_cluster, o.cluster):
            return
        f = sc.link
        if f.loss and self.rng.random() < f.loss:
            return
        copies = 2 if f.duplicate and self.rng.random() < f.duplicate else 1
        for _ in range(copies):
            delay = f.delay + self.rng.uniform(0.0, f.jitter)
            if f.reorder and self.rng.random() < f.reorder:
                delay += self.rng.uniform(0.0, f.reorder_window)
            self.at(now + delay, "arrive", src_cluster, node, o.node, o.datagram)

    def inject(self, now: float, pid: int, payload: bytes) -> None:
        cluster = self.cluster_of[self.pids[pid][0]]
        if pid not in self.attached[cluster]:
            return
        delay = self.sc.order_delay + self.rng.uniform(0.0, self.sc.order_jitter)
        self.at(now + delay, "sequence", cluster, pid, payload)

    # ----------------------------------------------------------------- the run

    def run(self) -> FedResult:
        sc, r = self.sc, self.r
        for g in sc.globals_:
            self.at(g.time, "global", g)
        for t, node in sc.locals_:
            self.at(t, "local", node)
        for node, t in sc.crashes.items():
            self.at(t, "crash", node)
        for node, t in sc.restarts.items():
            self.at(t, "restart", node)
        for node, t0, t1 in sc.cutoffs:
            self.at(t0, "cutoff", node)
            self.at(t1, "rejoin", node)
        while self.heap:
            now, _, kind, args = heapq.heappop(self.heap)
            getattr(self, f"_on_{kind}")(now, *args)
        self._judge()
        return r

    def _on_global(self, now: float, g: Global) -> None:
        pid = self.current.get(g.node)
        if pid is None or pid not in self.alive:
            return
        member = self.members[pid]
        outs = member.multicast(now, "g", g.payload, g.dst)
        assert member.last_id is not None
        cid = self.fedmap[member.last_id] = (pid, member.last_id[2])
        pids = frozenset(p for p, (n, _) in self.pids.items() if self.cluster_of[n] in g.dst)
        self.r.multicasts[cid] = Multicast(pid, pids)
        self.r.multicast_times[cid] = now
        self.r.global_ids.add(cid)
        self.emit(now, pid, outs, g.crash_after)

    def _on_local(self, now: float, node: str) -> None:
        pid = self.current.get(node)
        if pid is None or pid not in self.alive:
            return
        self.local_seq += 1
        cid = (pid, -self.local_seq)
        self.r.multicasts[cid] = Multicast(pid, frozenset())  # addressees set at the end
        self.r.multicast_times[cid] = now
        self.inject(now, pid, LOCAL_TAG + f"{pid}:{self.local_seq}".encode())

    def _on_sequence(self, now: float, cluster: str, pid: int, payload: bytes) -> None:
        if pid not in self.attached[cluster] and self.rng.random() < self.sc.crash_drop:
            return  # its member left before the order took it: all or nothing
        self.r.records_ordered += is_record(payload)
        for q in self.attached[cluster]:
            t = max(now + self.rng.uniform(0.0, self.sc.member_jitter), self.last_t.get(q, 0.0))
            self.last_t[q] = t
            self.at(t, "ordered", q, cluster, payload)

    def _on_ordered(self, now: float, pid: int, cluster: str, payload: bytes) -> None:
        if pid not in self.attached[cluster]:
            return
        if payload.startswith(LOCAL_TAG):
            a, b = payload[1:].split(b":")
            cid = (int(a), -int(b))
            self.r.deliveries[pid].append(cid)
            self.r.delivery_times[pid][cid] = now
            return
        self.emit(now, pid, self.members[pid].on_ordered(now, payload))

    def _on_arrive(self, now: float, src_cluster: str, src_node: str, node: str,
                   data: bytes) -> None:
        pid = self.current.get(node)
        if pid is None or pid not in self.alive:
            return
        self.emit(now, pid, self.members[pid].on_remote(now, src_cluster, src_node, data))

    def _on_tick(self, now: float, pid: int) -> None:
        if pid not in self.alive:
            return
        member = self.members[pid]
        self.emit(now, pid, member.tick(now))
        draining = now < self.sc.end + DRAIN_S and bool(member.in_flight())
        if (now < self.sc.end or draining) and pid in self.alive:
            # wake when the member has work due, at least every IDLE_TICK (work that an
            # input creates in between waits for that: the daemon's timer is as coarse)
            due = member.next_deadline()
            wake = now + IDLE_TICK if due is None else min(max(due, now + MIN_TICK),
                                                           now + IDLE_TICK)
            self.at(wake, "tick", pid)

    def _on_crash(self, now: float, node: str) -> None:
        pid = self.current.get(node)
        if pid is not None and pid in self.alive:
            self._end(pid, now)

    def _on_cutoff(self, now: float, node: str) -> None:
        pid = self.current.get(node)
        if pid is not None and pid in self.alive:
            self._detach(pid, now)  # alive, stale, still heard by other clusters
            self.ended.add(pid)

    def _on_restart(self, now: float, node: str) -> None:
        old = self.current.get(node)
        if old is not None:
            self._end(old, now)
        self._start(node, now, joining=True)
        self._on_view(now, self.cluster_of[node])

    def _on_rejoin(self, now: float, node: str) -> None:
        """The end of a cutoff: the same daemon makes a new member (a joiner), which
        adopts the old one's own multicasts."""
        old = self.current.get(node)
        if old is None or old not in self.alive:
            self._on_restart(now, node)
            return
        self._end(old, now)
        pid = self._start(node, now, joining=True)
        self.members[pid].adopt(self.members[old], now)
        self.successor[old] = pid
        self._on_view(now, self.cluster_of[node])

    def _on_view(self, now: float, cluster: str) -> None:
        view = [self.pids[p][0] for p in self.attached[cluster]]
        for p in list(self.attached[cluster]):
            self.emit(now, p, self.members[p].on_view(now, view))

    # ----------------------------------------------------------------- judging

    def _judge(self) -> None:
        r = self.r
        by_cluster: dict[str, set[int]] = defaultdict(set)
        for p, (n, _) in self.pids.items():
            by_cluster[self.cluster_of[n]].add(p)
        for cid, m in list(r.multicasts.items()):
            if cid not in r.global_ids:
                cluster = self.cluster_of[self.pids[m.sender][0]]
                r.multicasts[cid] = Multicast(m.sender, frozenset(by_cluster[cluster]))
            else:
                dst = {self.cluster_of[self.pids[p][0]] for p in m.dst_processes}
                r.multicasts[cid] = Multicast(
                    m.sender, frozenset(p for c in dst for p in by_cluster[c]))
        for cid in r.global_ids:
            last = r.multicasts[cid].sender
            while last in self.successor:
                last = self.successor[last]
            if last in self.alive and last not in self.ended:
                r.stayed_up.add(cid)
        correct = {p for p in self.alive - self.ended if p not in self.joiners}
        complete = {j for j in self.joiners if j in self.alive and j not in self.ended
                    and self.members[j].state is not None}
        judge(r, self.members, by_cluster, correct, self.joiners, complete)
        for c, ps in by_cluster.items():
            if ps & r.correct and not any(p in r.correct for p in self.attached[c]):
                r.violations.append(f"cluster {c}: no correct member attached")


def judge(r: FedResult, members: Mapping[int, FederationMember],
          by_cluster: Mapping[str, set[int]], correct: set[int], joiners: Iterable[int],
          complete: set[int]) -> None:
    """Every check of one run, into ``r.violations``: ``multigroup.checkers.check_run``,
    ``check_joiners`` (each joiner against the lowest correct member of its cluster) and
    quiescence (no correct or complete member still has messages in flight)."""
    for member in members.values():
        r.member_counters.update(member.counters)
    r.correct = set(correct)
    r.violations = check_run(r.deliveries, r.multicasts, r.correct, r.datagrams)
    refs = {c: min(ps & r.correct) for c, ps in by_cluster.items() if ps & r.correct}
    cluster_of = {p: c for c, ps in by_cluster.items() for p in ps}
    pairs = {j: refs[cluster_of[j]] for j in sorted(joiners) if cluster_of[j] in refs}
    r.violations += check_joiners(r.deliveries, pairs, r.global_ids, complete)
    delivered_in: dict[MsgId, set[str]] = defaultdict(set)
    for p, seq in r.deliveries.items():
        for cid in seq:
            if cid in r.global_ids and p in cluster_of:
                delivered_in[cid].add(cluster_of[p])
    dst_clusters = {cid: {cluster_of[p] for p in r.multicasts[cid].dst_processes
                          if p in cluster_of} for cid in r.global_ids}
    r.violations += check_outcomes(r.stayed_up, dst_clusters, delivered_in, r.undelivered)
    for p in sorted(r.correct | complete):
        busy = members[p].in_flight()
        if busy:
            r.violations.append(f"quiescence: member {p} still has {len(busy)} messages "
                                f"in flight, e.g. {busy[0]}")


def run_scenario(sc: FedScenario, seed: int = 0) -> FedResult:
    return _Sim(sc, random.Random(seed)).run()


# --------------------------------------------------------------------- random scenarios


@dataclass(frozen=True, slots=True)
class FedSweepConfig:
    clusters: tuple[int, int] = (2, 4)
    size: tuple[int, int] = (1, 4)
    globals_: tuple[int, int] = (8, 24)
    locals_: tuple[int, int] = (10, 40)
    load_window: float = 6.0
    max_loss: float = 0.3
    duplicate: float = 0.1
    reorder: float = 0.3
    crash: float = 0.5
    restart: float = 0.6
    cutoff: float = 0.3
    unreachable: float = 0.3
    sender_crash: float = 0.3
    deadline_s: float = 4.0
    """Shorter than the longest unreachable window (8 s): some messages are reported
    ``Undelivered`` (outcome unknown) and then delivered."""
    end: float = 30.0


def random_scenario(seed: int, cfg: FedSweepConfig = FedSweepConfig()) -> FedScenario:
    rng = random.Random(seed * 7919 + 1)
    n = rng.randint(*cfg.clusters)
    clusters = {f"c{i}": tuple(f"c{i}n{j}" for j in range(rng.randint(*cfg.size)))
                for i in range(n)}
    names = sorted(clusters)
    nodes = [x for c in names for x in clusters[c]]
    cluster_of = {x: c for c, xs in clusters.items() for x in xs}
    globals_ = []
    for _ in range(rng.randint(*cfg.globals_)):
        node = rng.choice(nodes)
        while True:
            dst = tuple(sorted(rng.sample(names, rng.randint(1, min(3, n)))))
            if dst != (cluster_of[node],):
                break
        globals_.append(Global(rng.uniform(0, cfg.load_window), node, dst,
                               rng.randbytes(rng.randint(0, 64))))
    locals_ = tuple((rng.uniform(0, cfg.load_window), rng.choice(nodes))
                    for _ in range(rng.randint(*cfg.locals_)))
    crashes: dict[str, float] = {}
    restarts: dict[str, float] = {}
    cutoffs: list[tuple[str, float, float]] = []
    # every cluster keeps a correct member: faults only hit clusters of 2 or more,
    # one node each, never the cluster's first member
    spare = [c for c in names if len(clusters[c]) >= 2]
    victims = [k for k, g in enumerate(globals_)
               if cluster_of[g.node] in spare and g.node != clusters[cluster_of[g.node]][0]]
    if victims and rng.random() < cfg.sender_crash:
        g = globals_[k := rng.choice(victims)]
        globals_[k] = Global(g.time, g.node, g.dst, g.payload, rng.randint(0, 2))
        spare.remove(cluster_of[g.node])
    if spare and rng.random() < cfg.crash:
        c = rng.choice(spare)
        node = rng.choice(clusters[c][1:])
        crashes[node] = rng.uniform(0, cfg.load_window + 1)
        if rng.random() < cfg.restart:
            restarts[node] = crashes[node] + rng.uniform(0.5, 3.0)
        spare.remove(c)
    big = [c for c in spare if len(clusters[c]) >= 3]
    if big and rng.random() < cfg.cutoff:
        c = rng.choice(big)
        t0 = rng.uniform(0, cfg.load_window)
        cutoffs.append((rng.choice(clusters[c][1:]), t0, t0 + rng.uniform(0.5, 5.0)))
    unreachable = []
    if rng.random() < cfg.unreachable:
        t0 = rng.uniform(0, cfg.load_window)
        unreachable.append((rng.choice(names), t0, t0 + rng.uniform(1.0, 8.0)))
    link = LinkFaults(loss=rng.uniform(0, cfg.max_loss), duplicate=rng.uniform(0, cfg.duplicate),
                      reorder=rng.uniform(0, cfg.reorder), delay=rng.uniform(0.005, 0.05),
                      jitter=0.01, reorder_window=0.1)
    return FedScenario(clusters, tuple(sorted(globals_, key=lambda g: g.time)), locals_,
                       crashes, restarts, tuple(cutoffs), tuple(unreachable), link,
                       order_delay=rng.uniform(0.01, 0.08), deadline_s=cfg.deadline_s,
                       end=cfg.end)


def sweep(seeds: Iterable[int], cfg: FedSweepConfig = FedSweepConfig(),
          progress: Callable[[str], None] | None = None) -> dict[str, object]:
    """Run ``random_scenario(seed)`` for every seed: ``seeds``, ``failed``, the violations
    by seed and totals."""
    failed: list[int] = []
    violations: dict[int, list[str]] = {}
    totals: Counter[str] = Counter()
    count = 0
    for seed in seeds:
        count += 1
        r = run_scenario(random_scenario(seed, cfg), seed)
        totals["deliveries"] += sum(len(v) for v in r.deliveries.values())
        totals["global messages"] += len(r.global_ids)
        totals["stall reports"] += len(r.stalls)
        totals["undelivered reports"] += sum(len(v) for v in r.undelivered.values())
        totals["reported, then delivered"] += sum(
            1 for cid in r.undelivered if any(cid in r.delivery_times[p]
                                              for p in r.delivery_times))
        totals["records ordered"] += r.records_ordered
        totals["datagrams"] += sum(r.sent_by_kind.values())
        totals["snapshots installed"] += r.member_counters["snapshots_installed"]
        totals["retransmissions"] += (r.member_counters["retransmit_submit"]
                                      + r.member_counters["retransmit_timestamp"])
        if r.violations:
            failed.append(seed)
            violations[seed] = r.violations
        if progress is not None and count % 50 == 0:
            progress(f"{count} seeds, {len(failed)} failed")
    return {"seeds": count, "failed": failed, "violations": violations, **totals}


# --------------------------------------------------------------------- message delays


def count_delays(dsts: Iterable[tuple[str, ...]] = (("c0", "c1"), ("c1", "c2"),
                                                    ("c0", "c1", "c2"))) -> dict[str, int]:
    """Failure-free message delays, counted: one inter-cluster hop takes 1 time unit, one
    safe ordering ``K`` = 1000 units (no jitter, no loss), so a latency ``a + 1000 b`` is
    ``a`` hops and ``b`` orderings. Returns the largest counts over the senders (in and
    out of Dst) and destinations."""
    clusters = {f"c{i}": (f"c{i}n0", f"c{i}n1", f"c{i}n2") for i in range(4)}
    hop, k = 1.0, 1000.0
    globals_ = []
    t = 0.0
    for dst in dsts:
        for sender in ("c0n1", "c3n0"):
            globals_.append(Global(t, sender, dst))
            t += 10 * k
    sc = FedScenario(clusters, tuple(globals_), link=LinkFaults(delay=hop, jitter=0.0),
                     order_delay=k, order_jitter=0.0, member_jitter=0.0, retransmit_s=100 * k,
                     stall_after_s=1e9, end=0.0)  # no loss: nothing to retransmit
    r = run_scenario(sc, 0)
    hops = orders = 0
    for times in r.delivery_times.values():
        for cid, at in times.items():
            lat = at - r.multicast_times[cid]
            b, a = divmod(round(lat), round(k))
            orders, hops = max(orders, b), max(hops, a)
    return {"hops": hops, "safe orderings": orders, "violations": len(r.violations)}
