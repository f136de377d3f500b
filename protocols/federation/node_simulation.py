"""The federation layer over real Nodes: one simulated amcast cluster per federation
cluster, on one virtual clock.

Each federation cluster is a ``simulation.cluster.Cluster`` of full Nodes (wire,
membership, reliable causal multicast, ToTo), the code the daemon runs, with its own
faults (``simulation.faults.Fault``: crash, restart, partition, pause ...). Beside each
Node runs a ``FederationMember``, glued the way a daemon would: an ``OrderLocally``
record is submitted to the Node with *safe* service (again at the next tick if the
Node refuses it for backpressure); every payload the Node delivers that is a
federation record (``wire.is_record``) goes to ``on_ordered``, the others are local
messages; a ``ViewInstalled`` goes to ``on_view``; a restarted process or an
``OrderGap`` (the member missed part of its cluster's order) starts a new
``FederationMember`` with ``joining=True`` (after a gap, the same daemon: the new member
``adopt``s the old one's own multicasts). The datagrams of one input of a member go
out batched per destination member (``batching.batch_sends``) and cross a lossy,
duplicating, reordering link (``LinkFaults``).

One loop takes the earliest event of every cluster (arrival, timer, fault) and of the
federation (a datagram between clusters, a member's tick, a client's multicast). At the
end, each cluster's own checkers (``Cluster.result``: agreement, total and causal order,
virtual synchrony ...) and the federation's (the modelled simulation's ``judge``) run.
"""

from __future__ import annotations

import heapq
import random
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from ..events import OrderGap, ViewInstalled
from ..multigroup.checkers import Datagram, Multicast
from ..multigroup.messages import MsgId
from ..simulation.cluster import Cluster
from ..simulation.faults import Fault
from ..simulation.network import LinkFaults, NetworkConfig
from ..vocabulary import ServiceLevel
from .batching import batch_sends
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
from .simulation import FedResult, judge
from .wire import DgBatch, decode_datagram, is_record


def node_name(cluster: str, i: int) -> str:
    return f"{cluster}n{i}"


@dataclass(frozen=True, slots=True)
class NodeGlobal:
    time: float
    cluster: str
    node: int
    dst: tuple[str, ...]
    payload: bytes = b"x"


@dataclass(frozen=True, slots=True)
class NodeFedScenario:
    sizes: Mapping[str, int]
    globals_: tuple[NodeGlobal, ...] = ()
    locals_: tuple[tuple[float, str, int], ...] = ()
    faults: Mapping[str, tuple[Fault, ...]] = field(default_factory=dict)
    unreachable: tuple[tuple[str, float, float], ...] = ()
    link: LinkFaults = field(default_factory=lambda: LinkFaults(delay=0.02, jitter=0.01))
    intra: LinkFaults = field(default_factory=LinkFaults)
    retransmit_s: float = 0.2
    stall_after_s: float = 2.0
    tick_s: float = 0.1
    end: float = 25.0


class _NodeSim:
    def __init__(self, sc: NodeFedScenario, seed: int) -> None:
        self.sc = sc
        self.rng = random.Random(seed * 104729 + 3)
        self.r = FedResult()
        self.names = sorted(sc.sizes)
        self.clusters = {c: Cluster(sc.sizes[c], seed=seed * 100 + k,
                                    network=NetworkConfig(default=sc.intra))
                         for k, c in enumerate(self.names)}
        for c, faults in sc.faults.items():
            for f in faults:
                self.clusters[c].schedule(f)
        members = {c: tuple(node_name(c, i) for i in range(sc.sizes[c])) for c in self.names}
        self.configs = {c: FederationConfig(c, members, retransmit_s=sc.retransmit_s,
                                            stall_after_s=sc.stall_after_s)
                        for c in self.names}
        self.heap: list[tuple[float, int, str, tuple[object, ...]]] = []
        self._n = 0
        self.pid_of: dict[tuple[str, int, int], int] = {}
        """(cluster, node, life) -> pid of that incarnation's federation member."""
        self.cluster_of_pid: dict[int, str] = {}
        self.node_of_pid: dict[int, tuple[str, int]] = {}
        self.members: dict[int, FederationMember] = {}
        self.current: dict[tuple[str, int], int] = {}
        self.read: dict[int, tuple[int, int]] = {}
        """pid -> (deliveries read from its process log, events read from its node)."""
        self.backlog: dict[int, list[bytes]] = {}
        self.joiners: set[int] = set()
        self.successor: dict[int, int] = {}
        """pid -> the pid of the same daemon's next member (after an order gap)."""
        self.ended: set[int] = set()
        self.fedmap: dict[FedId, MsgId] = {}
        self._dst: dict[MsgId, tuple[str, ...]] = {}
        self.local_seq = 0
        self.submitted = 0
        self.now = 0.0
        for c in self.names:
            for i in range(sc.sizes[c]):
                self._new_member(c, i, joining=False)

    # ----------------------------------------------------------------- plumbing

    def at(self, t: float, kind: str, *args: object) -> None:
        self._n += 1
        heapq.heappush(self.heap, (t, self._n, kind, args))

    def _new_member(self, c: str, i: int, *, joining: bool) -> int:
        cl = self.clusters[c]
        pid = len(self.node_of_pid)
        life = cl.life[i]
        old = self.current.get((c, i))
        if old is not None:
            self.ended.add(old)
        self.pid_of[(c, i, life)] = pid
        self.cluster_of_pid[pid] = c
        self.node_of_pid[pid] = (c, i)
        self.current[(c, i)] = pid
        self.members[pid] = FederationMember(self.configs[c], node_name(c, i),
                                             joining=joining,
                                             first_seq=pid * 1_000_000 + 1)
        events = len(cl.other_events[i])
        self.read[pid] = (len(cl.proc_logs.get(cl.proc(i), [])), events)
        self.backlog[pid] = []
        if joining:
            self.joiners.add(pid)
            node = cl.nodes.get(i)
            if node is not None and node.view is not None:
                view = [node_name(c, m.node) for m in node.view.members]
                self.emit(pid, self.members[pid].on_view(self.now, view))
        self.at(self.now + self.sc.tick_s, "tick", pid)
        return pid

    def _cid(self, m: FedId) -> MsgId:
        cid = self.fedmap.get(m)
        if cid is None:
            cid = self.fedmap[m] = (-1, len(self.fedmap))
        return cid

    def _unreachable(self, a: str, b: str) -> bool:
        return any(t0 <= self.now < t1 and c in (a, b) for c, t0, t1 in self.sc.unreachable)

    def emit(self, pid: int, outs: list[Output]) -> None:
        for o in batch_sends(outs):  # as the daemon sends them: one datagram per member
            if isinstance(o, SendRemote):
                self._send(pid, o)
            elif isinstance(o, OrderLocally):
                self.backlog[pid].append(o.record)
            elif isinstance(o, Deliver):
                cid = self._cid(o.msg_id)
                self.r.deliveries[pid].append(cid)
                self.r.delivery_times[pid][cid] = self.now
            elif isinstance(o, Stalled):
                self.r.stalls.append((self.now, pid, o))
            elif isinstance(o, Undelivered):
                self.r.undelivered[self._cid(o.msg_id)].append(o.outcome)
            elif isinstance(o, DroppedRemote):
                self.r.dropped[o.reason] += 1
        self._submit_backlog(pid)

    def _submit_backlog(self, pid: int) -> None:
        c, i = self.node_of_pid[pid]
        cl = self.clusters[c]
        queue = self.backlog[pid]
        if queue:
            cl.advance(self.now)  # the cluster's clock, idle since its last event, to now
        while queue and self.current.get((c, i)) == pid and i in cl.nodes:
            # unique payloads (the cluster's checkers tell messages apart by payload), as
            # a daemon's envelope makes them: the prefix is stripped at delivery
            self.submitted += 1
            wrapped = b"R%d:" % self.submitted + queue[0]
            if not cl.submit(i, wrapped, ServiceLevel.SAFE):
                return  # backpressure: the next tick tries again
            queue.pop(0)
            self._pump(c)

    def _send(self, pid: int, o: SendRemote) -> None:
        c, i = self.node_of_pid[pid]
        dg = decode_datagram(o.datagram)
        self.r.sent_by_kind[type(dg).__name__] += 1
        dst_node = int(o.node[len(o.cluster) + 1:])
        dst = self.current[(o.cluster, dst_node)]
        for item in dg.items if isinstance(dg, DgBatch) else (dg,):
            cid = self._cid(item.msg_id)
            m = self.r.multicasts.get(cid)

            def end(p: int, m: Multicast | None = m) -> int:
                same = m is not None and self.node_of_pid[p] == self.node_of_pid[m.sender]
                return m.sender if same and m is not None else p

            self.r.datagrams.append(Datagram(end(pid), end(dst), (cid,)))
        if self._unreachable(c, o.cluster):
            return
        f = self.sc.link
        if f.loss and self.rng.random() < f.loss:
            return
        for _ in range(2 if f.duplicate and self.rng.random() < f.duplicate else 1):
            delay = f.delay + self.rng.uniform(0.0, f.jitter)
            if f.reorder and self.rng.random() < f.reorder:
                delay += self.rng.uniform(0.0, f.reorder_window)
            self.at(self.now + delay, "arrive", c, node_name(c, i), o.cluster, dst_node,
                    o.datagram)

    def _pump(self, c: str) -> None:
        """Hand every member of cluster ``c`` what its Node delivered and raised since
        the last look; start joiners for new incarnations and order gaps."""
        cl = self.clusters[c]
        again = True
        while again:
            again = False
            for i in range(self.sc.sizes[c]):
                if i not in cl.nodes:
                    pid = self.current.get((c, i))
                    if pid is not None and pid not in self.ended:
                        self.ended.add(pid)
                    continue
                pid = self.current[(c, i)]
                if self.pid_of.get((c, i, cl.life[i])) != pid:
                    pid = self._new_member(c, i, joining=True)
                    again = True
                done, seen = self.read[pid]
                log = cl.proc_logs[cl.proc(i)]
                events = cl.other_events[i]
                if done == len(log) and seen == len(events):
                    continue
                again = True
                self.read[pid] = (len(log), len(events))
                member = self.members[pid]
                for ev in events[seen:]:
                    if isinstance(ev, OrderGap):
                        new = self._new_member(c, i, joining=True)
                        self.members[new].adopt(member, self.now)
                        self.successor[pid] = new
                        break
                    if isinstance(ev, ViewInstalled):
                        self.emit(pid, member.on_view(
                            self.now, [node_name(c, n) for n in ev.members]))
                if self.current[(c, i)] != pid:
                    continue
                for d in log[done:]:
                    if d.payload.startswith(b"R"):
                        record = d.payload[d.payload.index(b":") + 1:]
                        assert is_record(record)
                        self.r.records_ordered += 1
                        self.emit(pid, member.on_ordered(self.now, record))
                    elif d.payload.startswith(b"L"):
                        a, b = d.payload[1:].split(b":")[:2]
                        cid = (int(a), -int(b))
                        self.r.deliveries[pid].append(cid)
                        self.r.delivery_times[pid][cid] = self.now

    # ----------------------------------------------------------------- the run

    def run(self) -> tuple[FedResult, dict[str, dict[str, list[str]]]]:
        sc = self.sc
        for g in sc.globals_:
            self.at(g.time, "global", g)
        for t, c, i in sc.locals_:
            self.at(t, "local", c, i)
        horizon = sc.end + 10.0
        while True:
            best, who = (self.heap[0][0] if self.heap else float("inf")), ""
            for c, cl in self.clusters.items():
                t, kind, _ = cl._next()
                if kind and t < best:
                    best, who = t, c
            if best > horizon:
                break
            self.now = max(self.now, best)
            if who:
                cl = self.clusters[who]
                t, kind, target = cl._next()
                cl._step(t, kind, target)
                self._pump(who)
            else:
                _, _, kind, args = heapq.heappop(self.heap)
                getattr(self, f"_on_{kind}")(*args)
        cluster_checks = {}
        for c, cl in self.clusters.items():
            res = cl.result()
            cluster_checks[c] = {k: v for k, v in res.violations.items() if v}
        self._judge(cluster_checks)
        return self.r, cluster_checks

    def _on_global(self, g: NodeGlobal) -> None:
        pid = self.current[(g.cluster, g.node)]
        if pid in self.ended or g.node not in self.clusters[g.cluster].nodes:
            return
        member = self.members[pid]
        outs = member.multicast(self.now, "g", g.payload, g.dst)
        assert member.last_id is not None
        cid = self.fedmap[member.last_id] = (pid, member.last_id[2])
        self.r.multicasts[cid] = Multicast(pid, frozenset())  # addressees at the end
        self.r.multicast_times[cid] = self.now
        self.r.global_ids.add(cid)
        self._dst[cid] = g.dst
        self.emit(pid, outs)

    def _on_local(self, c: str, i: int) -> None:
        pid = self.current[(c, i)]
        cl = self.clusters[c]
        if pid in self.ended or i not in cl.nodes:
            return
        self.local_seq += 1
        cl.advance(self.now)
        if cl.submit(i, f"L{pid}:{self.local_seq}:".encode(), ServiceLevel.AGREED):
            cid = (pid, -self.local_seq)
            self.r.multicasts[cid] = Multicast(pid, frozenset())
            self.r.multicast_times[cid] = self.now
            self._pump(c)

    def _on_arrive(self, src_cluster: str, src_node: str, c: str, i: int,
                   data: bytes) -> None:
        pid = self.current[(c, i)]
        if pid in self.ended or i not in self.clusters[c].nodes:
            return
        self.emit(pid, self.members[pid].on_remote(self.now, src_cluster, src_node, data))

    def _on_tick(self, pid: int) -> None:
        if pid in self.ended or self.current[self.node_of_pid[pid]] != pid:
            return
        self.emit(pid, self.members[pid].tick(self.now))
        if self.now < self.sc.end:
            self.at(self.now + self.sc.tick_s, "tick", pid)

    def _judge(self, cluster_checks: dict[str, dict[str, list[str]]]) -> None:
        r = self.r
        by_cluster: dict[str, set[int]] = {c: set() for c in self.names}
        for pid, c in self.cluster_of_pid.items():
            by_cluster[c].add(pid)
        for cid, m in list(r.multicasts.items()):
            dst = self._dst.get(cid, (self.cluster_of_pid[m.sender],))
            r.multicasts[cid] = Multicast(
                m.sender, frozenset(p for c in dst for p in by_cluster[c]))
        for cid in r.global_ids:
            last = r.multicasts[cid].sender
            while last in self.successor:
                last = self.successor[last]
            if last not in self.ended and self.current[self.node_of_pid[last]] == last:
                r.stayed_up.add(cid)
        correct = {p for p in self.members if p not in self.ended and p not in self.joiners}
        complete = {p for p in self.joiners if p not in self.ended
                    and self.members[p].state is not None}
        judge(r, self.members, by_cluster, correct, self.joiners, complete)
        for c, checks in sorted(cluster_checks.items()):
            for name, found in sorted(checks.items()):
                r.violations.append(f"cluster {c} {name}: {found[0]}")


def run_node_scenario(sc: NodeFedScenario, seed: int = 0
                      ) -> tuple[FedResult, dict[str, dict[str, list[str]]]]:
    return _NodeSim(sc, seed).run()


def random_node_scenario(seed: int) -> NodeFedScenario:
    """2 or 3 clusters of 3 to 5 Nodes; global and local messages over 3 s; per seed, some
    of: a member crash, a restart, a minority partition inside a cluster, a cluster
    unreachable from the others for a few seconds; loss between clusters up to 20%."""
    rng = random.Random(seed * 3571 + 5)
    names = [f"c{k}" for k in range(rng.randint(2, 3))]
    sizes = {c: rng.randint(3, 5) for c in names}
    globals_ = []
    for _ in range(rng.randint(6, 16)):
        c = rng.choice(names)
        while True:
            dst = tuple(sorted(rng.sample(names, rng.randint(1, len(names)))))
            if dst != (c,):
                break
        globals_.append(NodeGlobal(rng.uniform(0.5, 3.5), c, rng.randrange(sizes[c]), dst,
                                   rng.randbytes(rng.randint(0, 32))))
    locals_ = tuple((rng.uniform(0.5, 3.5), c, rng.randrange(sizes[c]))
                    for c in (rng.choice(names) for _ in range(rng.randint(4, 16))))
    faults: dict[str, tuple[Fault, ...]] = {}
    victim = rng.choice(names)
    n = sizes[victim]
    kind = rng.choice(["crash", "restart", "partition", "none"])
    t0 = rng.uniform(0.5, 3.0)
    if kind in ("crash", "restart"):
        faults[victim] = (Fault(t0, kind, (rng.randrange(n),)),)
    elif kind == "partition":
        faults[victim] = (Fault(t0, "partition", groups=((rng.randrange(n),),),
                                duration=rng.uniform(2.0, 8.0)),)
    unreachable = ()
    if rng.random() < 0.3:
        u0 = rng.uniform(0.5, 3.0)
        unreachable = ((rng.choice(names), u0, u0 + rng.uniform(1.0, 4.0)),)
    link = LinkFaults(loss=rng.uniform(0, 0.2), duplicate=0.05, reorder=0.2, delay=0.02,
                      jitter=0.01, reorder_window=0.05)
    return NodeFedScenario(sizes, tuple(sorted(globals_, key=lambda g: g.time)), locals_,
                           faults, unreachable, link)


def node_sweep(seeds: Iterable[int],
               progress: Callable[[str], None] | None = None) -> dict[str, object]:
    failed: list[int] = []
    violations: dict[int, list[str]] = {}
    totals: Counter[str] = Counter()
    count = 0
    for seed in seeds:
        count += 1
        r, _ = run_node_scenario(random_node_scenario(seed), seed)
        totals["deliveries"] += sum(len(v) for v in r.deliveries.values())
        totals["global messages"] += len(r.global_ids)
        totals["snapshots installed"] += r.member_counters["snapshots_installed"]
        if r.violations:
            failed.append(seed)
            violations[seed] = r.violations
        if progress is not None:
            progress(f"{count} seeds, {len(failed)} failed")
    return {"seeds": count, "failed": failed, "violations": violations, **totals}


def node_delays(hop: float = 1.0) -> dict[str, float]:
    """Failure-free latency over real Nodes: 3 clusters of 3, inter-cluster hops of
    ``hop`` seconds (no jitter, no loss), senders in and out of Dst(m), 2 and 3
    destinations. Returns the largest latency, the whole hops in it, and what is left
    for the safe orderings (seconds)."""
    sizes = {"c0": 3, "c1": 3, "c2": 3}
    globals_ = []
    t = 1.0
    for dst in (("c0", "c1"), ("c1", "c2"), ("c0", "c1", "c2")):
        for c, n in (("c0", 1), ("c2", 0)):
            globals_.append(NodeGlobal(t, c, n, dst))
            t += 5 * hop
    sc = NodeFedScenario(sizes, tuple(globals_), link=LinkFaults(delay=hop, jitter=0.0),
                         retransmit_s=10 * hop, stall_after_s=100 * hop, end=t + 5 * hop)
    r, checks = run_node_scenario(sc, 1)
    worst = max(at - r.multicast_times[cid] for times in r.delivery_times.values()
                for cid, at in times.items() if cid in r.global_ids)
    hops = int(worst // hop)
    return {"latency_s": worst, "hops": hops, "orderings_s": worst - hops * hop,
            "violations": len(r.violations) + sum(len(v) for v in checks.values())}
