"""A cluster of full Nodes over the simulated multicast network, on a virtual clock.

The very code the daemon runs (``protocols.node.Node``: wire, reliable causal layer,
ToTo engine; section 1 of the ToTo paper for the layer below the order, sections 3-5 for
the order) is driven by one deterministic event loop: the next event is the earliest of
a datagram arrival, a node timer (``next_timer``) or a scheduled submission; after every
input the node's datagrams go to ``SimNetwork`` and its events are recorded. A run ends
when every node delivered every message, or at ``max_time``. ``checkers`` then verify
integrity, validity, agreement, total order and causal order; ``safe`` deliveries are
checked live (every member had released the vertex when it was delivered).
``run_cluster_simulation`` sweeps seeds and returns a report dict for ``amcast.report``.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

from protocols.errors import BackpressureError
from protocols.events import (
    BackpressureReleased,
    BatchDelivered,
    DatagramDropped,
    Event,
    ServiceLevel,
)
from protocols.node import Node
from protocols.node_config import NodeConfig
from protocols.simulation.checkers import Delivery, SentMessage, check_all
from protocols.simulation.network import LinkFaults, NetworkConfig, SimNetwork

DEFAULT_SERVICES: tuple[tuple[ServiceLevel, float], ...] = (
    (ServiceLevel.AGREED, 0.7),
    (ServiceLevel.CAUSAL, 0.15),
    (ServiceLevel.SAFE, 0.15),
)


@dataclass(frozen=True, slots=True)
class Workload:
    messages_per_node: int = 20
    senders: int | None = None
    """The first ``senders`` nodes submit; ``None`` = all."""
    interval: float = 0.002
    """Mean seconds between one sender's submissions (exponential); 0 = saturate."""
    services: tuple[tuple[ServiceLevel, float], ...] = DEFAULT_SERVICES
    min_size: int = 16
    max_size: int = 200
    large_fraction: float = 0.05
    large_size: int = 5000
    """Size of the occasional large (fragmented) message, bytes."""


@dataclass(slots=True)
class RunResult:
    seed: int
    n: int
    end_time: float
    sent: list[SentMessage]
    logs: dict[int, list[Delivery]]
    violations: dict[str, list[str]]
    nodes: dict[int, Node]
    network: SimNetwork
    drops: dict[str, int] = field(default_factory=dict)
    repair_latencies: list[float] = field(default_factory=list)
    """Delivery latency of causal messages at nodes that lost the first copy."""
    clean_latencies: list[float] = field(default_factory=list)
    """Delivery latency of causal messages at nodes that got the first copy."""

    @property
    def ok(self) -> bool:
        return not any(self.violations.values())


class Cluster:
    def __init__(
        self,
        n: int,
        *,
        seed: int,
        node_config: NodeConfig | None = None,
        network: NetworkConfig | None = None,
    ) -> None:
        self.n = n
        self.seed = seed
        self.members = list(range(n))
        self.rng = random.Random(seed)
        cfg = node_config or NodeConfig(group_key=b"simulation-group-key")
        self.config = cfg
        self.now = 0.0
        self.nodes = {
            i: Node(cfg, node_id=i, members=self.members, rng=random.Random(seed * 1000 + i),
                    now=0.0)
            for i in self.members
        }
        self._timers = {i: node.next_timer() for i, node in self.nodes.items()}
        """Each node's ``next_timer()``, refreshed in ``_after`` (the only place a node's
        timers can change: every input to a node is followed by ``_after``)."""
        self.network = SimNetwork(network or NetworkConfig(), self.members,
                                  random.Random(seed * 7919 + 1))
        self._heap: list[tuple[float, int, int, bytes]] = []
        self._counter = 0
        self.sent: list[SentMessage] = []
        self.logs: dict[int, list[Delivery]] = {i: [] for i in self.members}
        self._known = dict.fromkeys(self.members, 0)  # causal past bit set per node
        self._by_payload: dict[bytes, SentMessage] = {}
        self.safe_violations: list[str] = []
        self.drops: dict[str, int] = {}
        self.blocked = dict.fromkeys(self.members, False)
        self.other_events: dict[int, list[Event]] = {i: [] for i in self.members}
        """Every event but deliveries, per node (drops, backpressure)."""
        self.track_losses = False
        self._lost_first: set[tuple[int, int, int]] = set()  # (dst, origin, seq)
        self.repair_latencies: list[float] = []
        self.clean_latencies: list[float] = []
        self.link_filter: Callable[[int, int, bytes], bool] | None = None
        """Tests: ``filter(src, dst, datagram)`` returning False drops that copy."""

    # ------------------------------------------------------------------ plumbing

    def _after(self, i: int) -> None:
        node = self.nodes[i]
        for data in node.datagrams_to_send():
            arrivals, lost = self.network.multicast(i, data, self.now)
            if lost and self.track_losses:
                self._note_losses(i, data, lost)
            for at, dst in arrivals:
                if self.link_filter is not None and not self.link_filter(i, dst, data):
                    continue
                self._counter += 1
                heapq.heappush(self._heap, (at, self._counter, dst, data))
        for ev in node.events():
            if isinstance(ev, BatchDelivered):
                self._delivered(i, ev)
            else:
                self.other_events[i].append(ev)
                if isinstance(ev, BackpressureReleased):
                    self.blocked[i] = False
                elif isinstance(ev, DatagramDropped):
                    self.drops[ev.reason] = self.drops.get(ev.reason, 0) + 1
        self._timers[i] = node.next_timer()  # after the flush, which moves timers too

    def _note_losses(self, src: int, data: bytes, lost: list[int]) -> None:
        from protocols.wire.codec import Kind, decode

        node = self.nodes[src]
        dg = decode(data, node._auth, node._limits)
        if dg.kind is Kind.DATA:
            v = dg.vertices[0]
            for dst in lost:
                self._lost_first.add((dst, v.origin, v.seq))

    def _delivered(self, i: int, ev: BatchDelivered) -> None:
        log = self.logs[i]
        known = self._known[i]
        if ev.service is ServiceLevel.SAFE:
            late = [j for j, other in self.nodes.items()
                    if other._releaser.released[ev.sender] < ev.seq]
            if late:
                self.safe_violations.append(
                    f"node {i} delivered safe ({ev.sender}, {ev.seq}) before nodes {late} had it"
                )
        if ev.service is ServiceLevel.CAUSAL and i != ev.sender:
            latency = self.now - ev.send_ts
            if (i, ev.sender, ev.seq) in self._lost_first:
                self.repair_latencies.append(latency)
            else:
                self.clean_latencies.append(latency)
        for k, payload in enumerate(ev.payloads):
            position = None if ev.position is None else ev.position + k
            log.append(Delivery(ev.sender, payload, ev.service, position, self.now))
            m = self._by_payload.get(payload)
            if m is not None:
                known |= (1 << m.index) | m.past
        self._known[i] = known

    def submit(self, i: int, payload: bytes, service: ServiceLevel) -> bool:
        try:
            self.nodes[i].submit(payload, self.now, service=service)
        except BackpressureError:
            self.blocked[i] = True
            self._after(i)
            return False
        m = SentMessage(len(self.sent), i, payload, service, self._known[i])
        self.sent.append(m)
        self._by_payload[payload] = m
        self._known[i] |= 1 << m.index
        self._after(i)
        return True

    # ------------------------------------------------------------------ the loop

    def run(self, workload: Workload, *, max_time: float = 30.0) -> RunResult:
        rng = random.Random(self.seed * 31 + 7)
        senders = self.members[: workload.senders] if workload.senders else self.members
        remaining = dict.fromkeys(senders, workload.messages_per_node)
        next_submit = {i: self._gap(rng, workload) for i in senders}
        counters = dict.fromkeys(senders, 0)
        expected = workload.messages_per_node * len(senders)
        services = [s for s, _ in workload.services]
        weights = [w for _, w in workload.services]
        nodes = self.nodes
        spins = 0
        last_t = -1.0
        while True:
            t = math.inf
            action: tuple[str, int] | None = None
            if self._heap:
                t = self._heap[0][0]
                action = ("net", -1)
            for i, at in next_submit.items():
                if remaining[i] and not self.blocked[i] and at < t:
                    t, action = at, ("submit", i)
            for i, nt in self._timers.items():
                if nt is not None and nt < t:
                    t, action = nt, ("timer", i)
            if action is None or t > max_time:
                break
            spins = spins + 1 if t == last_t else 0
            if spins > 100_000:
                raise RuntimeError(f"simulation stuck at t={t} on {action}")
            last_t = t
            self.now = max(self.now, t)
            kind, i = action
            if kind == "net":
                _, _, dst, data = heapq.heappop(self._heap)
                nodes[dst].receive_datagram(data, self.now)
                self._after(dst)
            elif kind == "timer":
                nodes[i].handle_timer(self.now)
                self._after(i)
            else:
                service = rng.choices(services, weights)[0]
                size = (workload.large_size if rng.random() < workload.large_fraction
                        else rng.randint(workload.min_size, workload.max_size))
                header = f"{i}:{counters[i]}:".encode()
                body = rng.randbytes(max(0, size - len(header)))
                if self.submit(i, header + body, service):
                    counters[i] += 1
                    remaining[i] -= 1
                    next_submit[i] = self.now + self._gap(rng, workload)
            if (
                not any(remaining.values())
                and len(self.sent) == expected
                and all(len(log) == expected for log in self.logs.values())
            ):
                break
        violations = check_all(self.sent, self.logs)
        violations["safe_stability"] = self.safe_violations
        return RunResult(
            self.seed, self.n, self.now, self.sent, self.logs, violations, self.nodes,
            self.network, dict(self.drops), self.repair_latencies, self.clean_latencies,
        )

    def advance(self, until: float) -> None:
        """Process arrivals and timers (no submissions) up to virtual time ``until``."""
        nodes = self.nodes
        while True:
            t, target = math.inf, -1
            if self._heap:
                t = self._heap[0][0]
            for i, nt in self._timers.items():
                if nt is not None and nt < t:
                    t, target = nt, i
            if t > until:
                self.now = max(self.now, until)
                return
            self.now = max(self.now, t)
            if target < 0:
                _, _, dst, data = heapq.heappop(self._heap)
                nodes[dst].receive_datagram(data, self.now)
                self._after(dst)
            else:
                nodes[target].handle_timer(self.now)
                self._after(target)

    @staticmethod
    def _gap(rng: random.Random, workload: Workload) -> float:
        return rng.expovariate(1.0 / workload.interval) if workload.interval > 0 else 0.0


# ---------------------------------------------------------------------- sweeps


@dataclass(frozen=True, slots=True)
class SweepPoint:
    seed: int
    n: int
    loss: float
    duplicate: float
    reorder: float
    slow_node: bool = False
    asymmetric: bool = False


def sweep_points(seeds: Iterable[int], *, n_range: tuple[int, int] = (3, 8),
                 max_loss: float = 0.2, duplicate: float = 0.2, reorder: float = 0.2,
                 slow_every: int = 5, asymmetric_every: int = 7) -> list[SweepPoint]:
    """Seeds spread over cluster sizes and loss rates; every k-th has a slow node / bad link."""
    points = []
    lo, hi = n_range
    for k, seed in enumerate(seeds):
        n = lo + k % (hi - lo + 1)
        loss = max_loss * ((k * 7) % 11) / 10
        points.append(SweepPoint(seed, n, min(loss, max_loss), duplicate, reorder,
                                 slow_every > 0 and k % slow_every == 1,
                                 asymmetric_every > 0 and k % asymmetric_every == 3))
    return points


def run_point(point: SweepPoint, workload: Workload, node_config: NodeConfig | None = None,
              *, max_time: float = 60.0) -> RunResult:
    faults = LinkFaults(loss=point.loss, duplicate=point.duplicate, reorder=point.reorder)
    links = {}
    if point.asymmetric:
        links[(0, point.n - 1)] = replace(faults, loss=min(0.5, point.loss + 0.3), delay=0.002)
    net = NetworkConfig(default=faults, links=links,
                        slow_node=point.n - 1 if point.slow_node else None)
    cluster = Cluster(point.n, seed=point.seed, node_config=node_config, network=net)
    return cluster.run(workload, max_time=max_time)


def run_cluster_simulation(
    seeds: Sequence[int],
    *,
    n_range: tuple[int, int] = (3, 8),
    max_loss: float = 0.2,
    duplicate: float = 0.2,
    reorder: float = 0.2,
    messages_per_node: int = 10,
    rule: str = "stoto",
    slow_node: bool = True,
    asymmetric: bool = True,
    max_time: float = 60.0,
    progress: Callable[[str], None] | None = None,
) -> dict:
    """Run one cluster per seed and check every safety property; return a report dict.

    ``progress`` (if given) receives a line every tenth of the sweep and on each failure.
    """
    cfg = NodeConfig(group_key=b"simulation-group-key", rule=rule)
    workload = Workload(messages_per_node=messages_per_node)
    points = sweep_points(seeds, n_range=n_range, max_loss=max_loss, duplicate=duplicate,
                          reorder=reorder, slow_every=5 if slow_node else 0,
                          asymmetric_every=7 if asymmetric else 0)
    failures: list[str] = []
    totals = {"messages": 0, "datagrams": 0, "lost": 0, "retransmissions": 0}
    step = max(1, len(points) // 10)
    for k, point in enumerate(points, 1):
        result = run_point(point, workload, cfg, max_time=max_time)
        totals["messages"] += len(result.sent)
        totals["datagrams"] += result.network.stats.multicasts
        totals["lost"] += result.network.stats.lost
        totals["retransmissions"] += sum(nd.stats.retransmissions for nd in result.nodes.values())
        for prop, found in result.violations.items():
            for violation in found[:3]:
                failures.append(f"seed {point.seed} n={point.n} loss={point.loss:.2f}: "
                                f"{prop}: {violation}")
        if progress and (k % step == 0 or k == len(points) or not result.ok):
            state = "ok" if result.ok else "VIOLATION"
            progress(f"{k}/{len(points)} seeds (seed {point.seed}, n={point.n}, "
                     f"loss {point.loss:.0%}): {state}; {len(failures)} violations so far")
    return {
        "title": f"cluster simulation: {len(points)} seeds, n {n_range[0]}..{n_range[1]}, "
                 f"loss 0..{max_loss:.0%}, dup {duplicate:.0%}, reorder {reorder:.0%}, "
                 f"rule {rule}",
        "figures": {
            "seeds": len(points),
            "seeds failed": len({f.split(' ')[1] for f in failures}),
            "messages submitted": totals["messages"],
            "datagrams multicast": totals["datagrams"],
            "copies lost": totals["lost"],
            "retransmissions": totals["retransmissions"],
        },
        "notes": failures[:50] or ["integrity, validity, agreement, total order, causal order "
                                   "and safe stability held on every seed"],
        "ok": not failures,
    }
