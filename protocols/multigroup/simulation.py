"""A seeded, virtual-time simulator of SCALATOM over lossy, reordering links.

Processes (``scalatom.ScalatomProcess``) in groups, plus clients outside every group,
exchange datagrams over the per-link faults of ``simulation/network.py``
(``LinkFaults``: loss, duplication, delay, jitter, reordering). Links between groups
get the given faults; links inside a group are clean unless ``intra_faults`` is set.
A lost datagram is sent again after ``rto`` by the link, also after its sender
crashed, until it reaches the receiver or the receiver crashes: the reliable channels
of Chandra and Toueg, which the uniform R-multicast needs (``scalatom.py``).

Faults: crashes of a minority of each group at random times, a sender crashing in the
middle of its multicast (only a prefix of its datagrams leaves), one slow member whose
links are several times slower (it lags behind its group's majority), and a ◇S failure
detector fed to every process: a crashed process is suspected by everyone a little
after its crash (strong completeness), and correct processes are falsely suspected
for a while until ``stable_after`` (eventual weak accuracy).

After a run, ``checkers.check_run`` judges the delivery logs of every process (the
global acyclicity oracle, integrity, uniform agreement, termination) and every
datagram sent (participant minimality). ``sweep`` does that for many seeds.
"""

from __future__ import annotations

import heapq
import random
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from ..simulation.network import LinkFaults, NetworkConfig, SimNetwork
from . import messages as scalatom_messages
from . import skeen_messages
from .checkers import Datagram, Multicast, check_run
from .messages import MsgId
from .scalatom import (
    Deliver,
    Federation,
    Output,
    ScalatomConfig,
    ScalatomProcess,
)
from .skeen import ProductionConfig, ProductionProcess

PROTOCOLS = ("scalatom", "production")
"""``scalatom``: SCALATOM (``scalatom.py``); ``production``: Skeen's timestamps over
ordered clusters (``skeen.py``)."""

AnyMessage = scalatom_messages.Message | skeen_messages.Message


def about(msg: AnyMessage) -> tuple[MsgId, ...]:
    if isinstance(msg, scalatom_messages.MESSAGE_TYPES):
        return scalatom_messages.about(msg)
    return skeen_messages.about(msg)  # type: ignore[arg-type]


def header_bytes(msg: AnyMessage) -> int:
    if isinstance(msg, scalatom_messages.MESSAGE_TYPES):
        return scalatom_messages.header_bytes(msg)
    return skeen_messages.header_bytes(msg)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class PlannedMulticast:
    time: float
    sender: int
    dst: tuple[int, ...]
    payload: bytes = b"x"
    crash_after: int | None = None
    """Crash the sender once this many of the multicast's datagrams have left."""


@dataclass(frozen=True, slots=True)
class Scenario:
    federation: Federation
    clients: tuple[int, ...] = ()
    multicasts: tuple[PlannedMulticast, ...] = ()
    crashes: Mapping[int, float] = field(default_factory=dict)
    false_suspicions: tuple[tuple[int, int, float, float], ...] = ()
    """``(observer, suspected, from, until)``."""
    inter_faults: LinkFaults = field(default_factory=LinkFaults)
    intra_faults: LinkFaults | None = None
    detect_delay: tuple[float, float] = (1.0, 5.0)
    rto: float = 2.0
    slow_node: int | None = None
    """Every link of this process is ``slow_factor`` times slower (in and out)."""
    slow_factor: float = 8.0
    config: ScalatomConfig = field(default_factory=ScalatomConfig)
    max_events: int = 2_000_000
    protocol: str = "scalatom"
    production: ProductionConfig = field(default_factory=ProductionConfig)
    partitions: tuple[tuple[frozenset[int], float, float], ...] = ()
    """``(side, from, until)``: the side (a minority of one group) is cut off from every
    other process during ``[from, until)``; datagrams across wait for ``until`` (the
    reliable channels), and each side suspects the other side's group members."""


@dataclass(slots=True)
class RunResult:
    deliveries: dict[int, list[MsgId]]
    delivery_times: dict[int, dict[MsgId, float]]
    multicasts: dict[MsgId, Multicast]
    multicast_times: dict[MsgId, float]
    correct: set[int]
    datagrams: list[Datagram]
    sent_by_kind: Counter[str]
    largest_header: int
    quiesced: bool
    violations: list[str] = field(default_factory=list)


class _Sim:
    def __init__(self, sc: Scenario, rng: random.Random) -> None:
        self.sc = sc
        self.rng = rng
        fed = sc.federation
        members = [p for g in fed.groups.values() for p in g]
        self.pids = sorted(members) + sorted(sc.clients)
        intra = {}
        if sc.intra_faults is not None:
            for g in fed.groups.values():
                intra |= {(a, b): sc.intra_faults for a in g for b in g if a != b}
        else:
            clean = LinkFaults(delay=sc.inter_faults.delay, jitter=sc.inter_faults.jitter)
            for g in fed.groups.values():
                intra |= {(a, b): clean for a in g for b in g if a != b}
        self.net = SimNetwork(NetworkConfig(default=sc.inter_faults, links=intra),
                              self.pids, rng)
        if sc.protocol not in PROTOCOLS:
            raise ValueError(f"unknown protocol {sc.protocol!r}")
        self.procs: dict[int, ScalatomProcess | ProductionProcess] = {
            p: (ScalatomProcess(p, fed, sc.config) if sc.protocol == "scalatom"
                else ProductionProcess(p, fed, sc.production)) for p in self.pids}
        self.crashed: set[int] = set()
        self.suspected: dict[int, set[int]] = defaultdict(set)
        self.heap: list[tuple[float, int, str, tuple]] = []
        self._seq = 0
        self.result = RunResult({p: [] for p in self.pids}, defaultdict(dict), {}, {},
                                set(), [], Counter(), 0, True)

    def at(self, t: float, kind: str, *args: object) -> None:
        self._seq += 1
        heapq.heappush(self.heap, (t, self._seq, kind, args))

    def _cut_until(self, now: float, src: int, dst: int) -> float | None:
        for side, t0, t1 in self.sc.partitions:
            if t0 <= now < t1 and (src in side) != (dst in side):
                return t1
        return None

    def send(self, now: float, src: int, dst: int, msg: AnyMessage, first: bool = True) -> None:
        r = self.result
        r.datagrams.append(Datagram(src, dst, about(msg)))
        if first:
            r.sent_by_kind[type(msg).__name__] += 1
            r.largest_header = max(r.largest_header, header_bytes(msg))
        cut = self._cut_until(now, src, dst)
        if cut is not None:
            self.at(cut, "retry", src, dst, msg)
            return
        f = self.net.faults(src, dst)
        if f.loss and self.rng.random() < f.loss:
            self.at(now + self.sc.rto, "retry", src, dst, msg)
            return
        copies = 2 if f.duplicate and self.rng.random() < f.duplicate else 1
        for _ in range(copies):
            delay = f.delay + self.rng.uniform(0.0, f.jitter)
            if f.reorder and self.rng.random() < f.reorder:
                delay += self.rng.uniform(0.0, f.reorder_window)
            if self.sc.slow_node in (src, dst):
                delay *= self.sc.slow_factor
            self.at(now + delay, "arrive", src, dst, msg)

    def emit(self, now: float, pid: int, outputs: list[Output], limit: int | None = None) -> None:
        sent = 0
        for o in outputs:
            if isinstance(o, Deliver):
                self.result.deliveries[pid].append(o.mid)
                self.result.delivery_times[pid][o.mid] = now
                continue
            if limit is not None and sent >= limit:
                break
            self.send(now, pid, o.dst, o.msg)
            sent += 1
        if limit is not None:
            self.crash(now, pid)

    def crash(self, now: float, pid: int) -> None:
        if pid in self.crashed:
            return
        self.crashed.add(pid)
        lo, hi = self.sc.detect_delay
        for p in self.procs:
            if p != pid:
                self.at(now + self.rng.uniform(lo, hi), "suspect", p, pid, True)

    def run(self) -> RunResult:
        sc, r = self.sc, self.result
        for m in sc.multicasts:
            self.at(m.time, "multicast", m)
        for pid, t in sc.crashes.items():
            self.at(t, "crash", pid)
        for obs, sus, t0, t1 in sc.false_suspicions:
            self.at(t0, "suspect", obs, sus, True)
            self.at(t1, "suspect", obs, sus, False)
        for side, t0, t1 in sc.partitions:
            for g in sc.federation.groups.values():
                if not side & set(g):
                    continue
                for a in g:
                    for b in g:
                        if (a in side) != (b in side):
                            self.at(t0, "suspect", a, b, True)
                            self.at(t1, "suspect", a, b, False)
        events = 0
        while self.heap:
            events += 1
            if events > sc.max_events:
                r.quiesced = False
                break
            now, _, kind, args = heapq.heappop(self.heap)
            if kind == "multicast":
                m: PlannedMulticast = args[0]  # type: ignore[assignment]
                if m.sender in self.crashed:
                    continue
                outs = self.procs[m.sender].multicast(now, m.payload, m.dst)
                mid = (m.sender, self.procs[m.sender]._next_seq - 1)
                r.multicasts[mid] = Multicast(
                    m.sender, frozenset(sc.federation.processes(m.dst)))
                r.multicast_times[mid] = now
                self.emit(now, m.sender, outs, m.crash_after)
            elif kind == "arrive":
                src, dst, msg = args
                if dst not in self.crashed:
                    self.emit(now, dst, self.procs[dst].receive(now, src, msg))  # type: ignore[arg-type]
            elif kind == "retry":
                src, dst, msg = args
                if dst not in self.crashed:
                    self.send(now, src, dst, msg, first=False)  # type: ignore[arg-type]
            elif kind == "crash":
                self.crash(now, args[0])  # type: ignore[arg-type]
            elif kind == "suspect":
                obs, sus, on = args
                if obs in self.crashed:
                    continue
                # a crashed process stays suspected once detected (strong completeness)
                if not on and sus in self.crashed:
                    continue
                (self.suspected[obs].add if on else self.suspected[obs].discard)(sus)  # type: ignore[arg-type]
                self.emit(now, obs, self.procs[obs].suspect(now, self.suspected[obs]))  # type: ignore[index]
        r.correct = set(self.pids) - self.crashed
        r.violations = check_run(r.deliveries, r.multicasts, r.correct, r.datagrams)
        if not r.quiesced:
            r.violations.append(f"the run did not quiesce within {sc.max_events} events")
        return r


def run_scenario(scenario: Scenario, seed: int = 0) -> RunResult:
    return _Sim(scenario, random.Random(seed)).run()


@dataclass(frozen=True, slots=True)
class SweepConfig:
    groups: tuple[int, int] = (2, 4)
    group_size: tuple[int, int] = (1, 5)
    clients: int = 2
    messages: tuple[int, int] = (4, 14)
    send_window: float = 20.0
    inter_faults: LinkFaults = field(default_factory=lambda: LinkFaults(
        loss=0.15, duplicate=0.05, reorder=0.3, delay=1.0, jitter=0.5, reorder_window=3.0))
    intra_faults: LinkFaults = field(default_factory=lambda: LinkFaults(
        loss=0.05, duplicate=0.05, reorder=0.1, delay=0.2, jitter=0.2, reorder_window=1.0))
    crash_probability: float = 0.5
    """Per group: the chance that some (a minority) of its members crash."""
    partial_multicast_probability: float = 0.1
    false_suspicions: int = 6
    stable_after: float = 60.0
    slow_probability: float = 0.5
    """The chance of one slow group member (its links ``slow_factor`` times slower)."""
    partition_probability: float = 0.0
    """Per group of 3 or more: the chance that a minority of it (its leader, for the
    production protocol, half the time) is cut off for a while."""


CONTENTION = SweepConfig(messages=(20, 40), send_window=5.0, group_size=(3, 5))
"""Many concurrent multicasts to larger groups: where a slow member lags its majority."""


def random_scenario(seed: int, cfg: SweepConfig = SweepConfig()) -> Scenario:
    rng = random.Random(seed)
    groups: dict[int, tuple[int, ...]] = {}
    pid = 0
    for gid in range(rng.randint(*cfg.groups)):
        size = rng.randint(*cfg.group_size)
        groups[gid] = tuple(range(pid, pid + size))
        pid += size
    clients = tuple(range(pid, pid + cfg.clients))
    fed = Federation(groups)
    members = [p for g in groups.values() for p in g]
    crashes: dict[int, float] = {}
    for g in groups.values():
        if rng.random() < cfg.crash_probability:
            for p in rng.sample(g, rng.randint(0, (len(g) - 1) // 2)):
                crashes[p] = rng.uniform(0.0, cfg.send_window * 1.5)
    senders = members + list(clients)
    multicasts = []
    for _ in range(rng.randint(*cfg.messages)):
        dst = tuple(sorted(rng.sample(sorted(groups), rng.randint(1, len(groups)))))
        sender = rng.choice(senders)
        crash_after = None
        # a sender that crashes mid-multicast: one of the group's crash budget, or a client
        if (rng.random() < cfg.partial_multicast_probability
                and (sender in clients or sender in crashes)):
            crash_after = rng.randint(0, len(fed.processes(dst)))
        multicasts.append(PlannedMulticast(rng.uniform(0.0, cfg.send_window), sender, dst,
                                           f"m{len(multicasts)}".encode(), crash_after))
    false = []
    for _ in range(rng.randint(0, cfg.false_suspicions)):
        obs, sus = rng.sample(members, 2) if len(members) > 1 else (members[0], members[0])
        if obs == sus:
            continue
        t0 = rng.uniform(0.0, cfg.stable_after)
        false.append((obs, sus, t0, rng.uniform(t0, cfg.stable_after)))
    slow = rng.choice(members) if rng.random() < cfg.slow_probability else None
    slow_factor = rng.uniform(3.0, 10.0)
    partitions = []
    if cfg.partition_probability:
        for g in groups.values():
            if len(g) >= 3 and rng.random() < cfg.partition_probability:
                side = set(rng.sample(g, rng.randint(1, (len(g) - 1) // 2)))
                if rng.random() < 0.5:
                    side = {g[0]} | set(list(side)[:-1])
                t0 = rng.uniform(0.0, cfg.send_window)
                partitions.append((frozenset(side), t0, t0 + rng.uniform(2.0, 20.0)))
    return Scenario(fed, clients, tuple(multicasts), crashes, tuple(false),
                    cfg.inter_faults, cfg.intra_faults, slow_node=slow,
                    slow_factor=slow_factor, partitions=tuple(partitions))


PRODUCTION = SweepConfig(partition_probability=0.3)
"""The production protocol's sweep: every fault of the SCALATOM sweep, and partitions
inside clusters (the leader on the cut-off side half the time)."""


def sweep(seeds: Iterable[int], cfg: SweepConfig = SweepConfig(),
          progress: Callable[[str], None] | None = None,
          protocol: str = "scalatom") -> dict[str, object]:
    """Run every seed and check it; ``failed`` lists the seeds with a violation."""
    failed: list[int] = []
    first: dict[str, list[str]] = {}
    seeds = list(seeds)
    delivered = 0
    for i, seed in enumerate(seeds):
        sc = random_scenario(seed, cfg)
        if protocol != "scalatom":
            sc = replace(sc, protocol=protocol)
        r = run_scenario(sc, seed)
        delivered += sum(len(v) for v in r.deliveries.values())
        if r.violations:
            failed.append(seed)
            first.setdefault(str(seed), r.violations[:5])
        if progress and (i + 1) % 50 == 0:
            progress(f"{i + 1}/{len(seeds)} seeds, {len(failed)} failed")
    return {"seeds": len(seeds), "failed": failed, "deliveries": delivered,
            "violations": first}


def layout(sizes: Sequence[int], extra_groups: int = 0, extra_size: int = 3) -> Federation:
    """Groups of the given sizes (the destinations), then unaddressed groups."""
    groups: dict[int, tuple[int, ...]] = {}
    pid = 0
    for gid, size in enumerate(list(sizes) + [extra_size] * extra_groups):
        groups[gid] = tuple(range(pid, pid + size))
        pid += size
    return Federation(groups)
