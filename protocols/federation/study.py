"""The multi-group figures: the federation against broadcast-and-filter, in the simulator.

Theory of operation. Genuine atomic multicast (seed 003, SCALATOM, section 5.2: Skeen's
timestamps, one "process" per group) lets a message addressed to one group be ordered by
that group alone; broadcast-and-filter orders every message in one big group and lets each
node drop what is not addressed to it. This study runs both on the same load, over real
Nodes on one virtual clock (``node_simulation``: wire, membership, reliable causal
multicast, ToTo, a ``FederationMember`` beside each Node), seeded and failure-free:

- *federation*: k clusters of 3 Nodes; a local message is ordered (agreed service) by its
  cluster only, a global one goes through the federation layer (two safe orderings and
  two inter-cluster hops);
- *broadcast-and-filter*: one cluster of 3k Nodes orders every message (agreed service);
  the addressees of a message are the 3 Nodes standing for each of its clusters.

The load: every node is a client sending at ``rate`` messages/s (Poisson) for ``load_s``
seconds. A message is global with probability g, then addressed to its sender's cluster
and one other cluster chosen at random (2 clusters). The send times, senders and the
random draws do not depend on g, so the global messages at a smaller g are a subset of
those at a larger one, and broadcast-and-filter's run (which orders the same messages
whatever their addressees) is one run per k, read once per g.

Every link (between the Nodes of a cluster and between clusters alike) takes ``hop``
seconds plus up to ``jitter``: a latency in message delays is the latency over ``hop``.
The latency of a message is until its *last* addressee delivers it.

Throughput, in a simulator that has no CPU model, is the work each node does per message
delivered: the payloads its total order must carry (client messages and federation
records) and the datagrams it sends and receives (inside its cluster and between
clusters), the idle traffic of a run without messages (heartbeats, of the same length)
subtracted. At a fixed budget of datagrams per node per second the system's capacity is
that budget over the datagrams a node handles per message. Under the federation a local
message costs only its own cluster, so the capacity grows with k; under
broadcast-and-filter every node handles every message.

Every run is judged by each cluster's checkers and the federation's (``judge``); the
study reports their violations (none expected).

Run: ``python -m amcast.protocols.federation.study [--json] [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace

from ..simulation.network import LinkFaults
from .node_simulation import NodeFedScenario, NodeGlobal, _NodeSim

FEDERATION = "federation"
BROADCAST = "broadcast-and-filter"
ONE_CLUSTER = "all"


@dataclass(frozen=True, slots=True)
class StudyConfig:
    ks: tuple[int, ...] = (1, 2, 4, 8)
    shares: tuple[int, ...] = (0, 10, 25, 50, 100)
    """Percentages of global messages."""
    nodes_per_cluster: int = 3
    rate: float = 20.0
    """Messages per second per client (one client per node)."""
    load_s: float = 1.0
    start: float = 0.5
    """Load starts here (membership settled)."""
    drain_s: float = 1.0
    hop: float = 0.001
    jitter: float = 0.0001
    budget: float = 10_000.0
    """Datagrams a node handles per second, for the capacity figure."""
    seed: int = 1


@dataclass(frozen=True, slots=True)
class Send:
    time: float
    cluster: int
    node: int
    dst: tuple[int, ...]
    """Cluster indexes, sorted; the sender's cluster alone for a local message."""


@dataclass(slots=True)
class Latency:
    count: int = 0
    p50_ms: float | None = None
    p99_ms: float | None = None
    p50_delays: float | None = None
    p99_delays: float | None = None


@dataclass(slots=True)
class Work:
    messages: int = 0
    ordered_per_node_per_msg: float = 0.0
    """Payloads a node's total order carries per message sent in the system."""
    datagrams_per_node_per_msg: float = 0.0
    """Datagrams a node sends and receives per message sent, idle traffic subtracted."""
    cross_cluster_datagrams: int = 0
    capacity_msgs_s: float = 0.0


@dataclass(slots=True)
class Row:
    system: str
    clusters: int
    nodes: int
    global_pct: int
    local: Latency = field(default_factory=Latency)
    global_: Latency = field(default_factory=Latency)
    work: Work = field(default_factory=Work)
    violations: list[str] = field(default_factory=list)


def cluster_name(j: int) -> str:
    return f"c{j}"


def schedule(k: int, share: int, cfg: StudyConfig) -> list[Send]:
    """The offered load; the draws are the same for every ``share``."""
    rng = random.Random(cfg.seed * 7919 + k)
    sends = []
    for c in range(k):
        for i in range(cfg.nodes_per_cluster):
            t = cfg.start
            while True:
                t += rng.expovariate(cfg.rate)
                if t > cfg.start + cfg.load_s:
                    break
                u, other = rng.random(), rng.randrange(max(k - 1, 1))
                if k > 1 and u * 100 < share:
                    o = other if other < c else other + 1
                    sends.append(Send(t, c, i, tuple(sorted((c, o)))))
                else:
                    sends.append(Send(t, c, i, (c,)))
    sends.sort(key=lambda s: s.time)
    return sends


def _link(cfg: StudyConfig) -> LinkFaults:
    return LinkFaults(delay=cfg.hop, jitter=cfg.jitter)


def _scenario(system: str, k: int, sends: Sequence[Send], cfg: StudyConfig
              ) -> NodeFedScenario:
    n = cfg.nodes_per_cluster
    end = cfg.start + cfg.load_s + cfg.drain_s
    if system == BROADCAST:
        sizes = {ONE_CLUSTER: k * n}
        locals_ = tuple((s.time, ONE_CLUSTER, s.cluster * n + s.node) for s in sends)
        globals_: tuple[NodeGlobal, ...] = ()
    else:
        sizes = {cluster_name(c): n for c in range(k)}
        locals_ = tuple((s.time, cluster_name(s.cluster), s.node)
                        for s in sends if len(s.dst) == 1)
        globals_ = tuple(NodeGlobal(s.time, cluster_name(s.cluster), s.node,
                                    tuple(cluster_name(d) for d in s.dst))
                         for s in sends if len(s.dst) > 1)
    return NodeFedScenario(sizes, globals_, locals_, link=_link(cfg), intra=_link(cfg),
                           retransmit_s=0.2, stall_after_s=5.0, end=end)


@dataclass(slots=True)
class _Run:
    """One simulated run: when each addressee node delivered each send, and the work."""
    delivered: dict[int, dict[int, float]]
    """send index -> node index (cluster * n + node) -> delivery time."""
    ordered: int
    datagrams: int
    cross: int
    violations: list[str]


def _simulate(system: str, k: int, sends: Sequence[Send], cfg: StudyConfig) -> _Run:
    sim = _NodeSim(_scenario(system, k, sends, cfg), cfg.seed)
    r, checks = sim.run()
    n = cfg.nodes_per_cluster
    # pid -> node index: no faults, so the members' pids are their nodes' in order
    node_of = {}
    for pid, (c, i) in sim.node_of_pid.items():
        node_of[pid] = i if c == ONE_CLUSTER else int(c[1:]) * n + i
    by_key: dict[tuple[float, int], int] = {}
    for idx, s in enumerate(sends):
        by_key[(s.time, s.cluster * n + s.node)] = idx
    cid_to_send = {cid: by_key[(t, node_of[r.multicasts[cid].sender])]
                   for cid, t in r.multicast_times.items()}
    delivered: dict[int, dict[int, float]] = {i: {} for i in range(len(sends))}
    for pid, times in r.delivery_times.items():
        for cid, at in times.items():
            delivered[cid_to_send[cid]][node_of[pid]] = at
    ordered = sum(len(cl.logs[i]) for cl in sim.clusters.values() for i in cl.logs)
    datagrams = sum(cl.network.stats.multicasts + cl.network.stats.copies_delivered
                    for cl in sim.clusters.values())
    cross = sum(r.sent_by_kind.values())  # a batch is one datagram
    datagrams += 2 * cross  # sent by one node, received by another
    violations = list(r.violations)
    for c, found in sorted(checks.items()):
        violations += [f"cluster {c} {name}: {v[0]}" for name, v in sorted(found.items())]
    return _Run(delivered, ordered, datagrams, cross, violations)


def _percentile(xs: Sequence[float], q: float) -> float:
    ys = sorted(xs)
    return ys[min(len(ys) - 1, int(q * len(ys)))]


def _latency(xs: Sequence[float], hop: float) -> Latency:
    if not xs:
        return Latency()
    p50, p99 = _percentile(xs, 0.5), _percentile(xs, 0.99)
    return Latency(len(xs), round(p50 * 1000, 3), round(p99 * 1000, 3),
                   round(p50 / hop, 2), round(p99 / hop, 2))


def _row(system: str, k: int, share: int, sends: Sequence[Send], run: _Run, idle: _Run,
         cfg: StudyConfig) -> Row:
    n = cfg.nodes_per_cluster
    local: list[float] = []
    global_: list[float] = []
    violations = list(run.violations)
    for idx, s in enumerate(sends):
        addressees = [d * n + i for d in s.dst for i in range(n)]
        times = run.delivered[idx]
        missing = [a for a in addressees if a not in times]
        if missing:
            violations.append(f"message {idx} not delivered at nodes {missing}")
            continue
        lat = max(times[a] for a in addressees) - s.time
        (local if len(s.dst) == 1 else global_).append(lat)
    nodes = k * n
    msgs = max(len(sends), 1)
    per_node = (run.datagrams - idle.datagrams) / nodes / msgs
    work = Work(len(sends), round(run.ordered / nodes / msgs, 4), round(per_node, 3),
                run.cross, round(cfg.budget / per_node, 1) if per_node > 0 else 0.0)
    return Row(system, k, nodes, share, _latency(local, cfg.hop),
               _latency(global_, cfg.hop), work, violations)


def study(cfg: StudyConfig = StudyConfig(),
          progress: Callable[[str], None] | None = None) -> list[Row]:
    """Every (system, k, g) row; broadcast-and-filter runs once per k (its order does not
    depend on the addressees), the federation once per (k, g); k = 1 has no global
    message, so one g."""
    rows = []
    for k in cfg.ks:
        shares = cfg.shares if k > 1 else (0,)
        bf_sends = schedule(k, 0, cfg)
        bf_run = _simulate(BROADCAST, k, bf_sends, cfg)
        bf_idle = _simulate(BROADCAST, k, [], cfg)
        fed_idle = _simulate(FEDERATION, k, [], cfg)
        for g in shares:
            sends = schedule(k, g, cfg)
            assert [(s.time, s.cluster, s.node) for s in sends] == \
                [(s.time, s.cluster, s.node) for s in bf_sends]
            fed = _row(FEDERATION, k, g, sends, _simulate(FEDERATION, k, sends, cfg),
                       fed_idle, cfg)
            bf = _row(BROADCAST, k, g, sends, bf_run, bf_idle, cfg)
            rows += [fed, bf]
            if progress is not None:
                progress(f"k={k} g={g}%: {len(sends)} messages, "
                         f"{len(fed.violations) + len(bf.violations)} violations")
    return rows


def as_json(cfg: StudyConfig, rows: Sequence[Row]) -> dict[str, object]:
    out = []
    for row in rows:
        d = asdict(row)
        d["global"] = d.pop("global_")
        out.append(d)
    return {"config": asdict(cfg), "rows": out}


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:g}"


def table(rows: Sequence[Row]) -> str:
    """A Markdown table of every row."""
    head = ("| system | k | nodes | global % | local p50 / p99 ms | global p50 / p99 ms "
            "| ordered / node / msg | datagrams / node / msg | capacity msgs/s |")
    lines = [head, "|" + "---|" * 9]
    for r in rows:
        lines.append(
            f"| {r.system} | {r.clusters} | {r.nodes} | {r.global_pct} "
            f"| {_fmt(r.local.p50_ms)} / {_fmt(r.local.p99_ms)} "
            f"| {_fmt(r.global_.p50_ms)} / {_fmt(r.global_.p99_ms)} "
            f"| {r.work.ordered_per_node_per_msg:g} | {r.work.datagrams_per_node_per_msg:g} "
            f"| {r.work.capacity_msgs_s:,.0f} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m amcast.protocols.federation.study",
                                description=__doc__.splitlines()[0])
    p.add_argument("--json", action="store_true", help="print the raw results as JSON")
    p.add_argument("--quick", action="store_true", help="k = 1, 2, 4 only")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    cfg = StudyConfig(seed=args.seed)
    if args.quick:
        cfg = replace(cfg, ks=(1, 2, 4))
    rows = study(cfg, progress=lambda line: print(line, file=sys.stderr))
    if args.json:
        print(json.dumps(as_json(cfg, rows), indent=1))
    else:
        print(table(rows))
    return 1 if any(r.violations for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
