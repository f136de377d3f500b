"""Section 7 of *Ordered Multicast and Distributed Swap* in the Node: the arrow,
combining and hybrid orderings measured beside ToTo, in one simulator.

Theory of operation. Where ``swap_study`` measures the swap layer alone, this study
runs the simulated cluster of real ``Node``s (``cluster.Cluster``: wire, membership,
the reliable causal layer and, per ``protocol.ordering``, the ToTo engine or a
``SwapOrdering``) on the same seeded workload for ``toto``, ``arrow``, ``combining``
and ``hybrid``, over the tree shapes ``star``, ``path`` and ``balanced``
(``protocol.swap_tree``; ToTo has no tree) and n = 4, 8, 16 members. The paper's
section 7 is a sketch of such a comparison with no figures; section 6.1 argues the
costs (arrow: a lone sender costs nothing, requests cross at most the diameter;
combining: every request climbs to the root).

The workload is light: ``agreed`` messages of 16 to 200 bytes, Poisson arrivals at
``rate`` messages per second per sender, from one sender (the highest id: a leaf far
from the arrow's initial sink and from the combining root, the lowest id) or from
every member. Every run goes on until every member delivered every message and then
passes every checker of ``simulation.checkers`` (integrity, agreement, total and
causal order, views, own-message accounting, liveness); a violation is counted, not
hidden. Per run:

- latency: submit to delivery at every member (the sender's own delivery included),
  p50 and p99 in virtual ms over every (message, member) pair;
- datagrams sent and received per delivered message, the ``swap`` kind (requests,
  replies and their link acknowledgements) apart from the rest (data, ack-only,
  nacks, repairs, heartbeats, membership), summed over the members; with the
  simulated multicast every member reads every swap datagram;
- swap hops: every ``SwapReply`` seen on the network carries the hops of its
  resolution (a swap its origin resolves itself crosses none), so the mean and
  largest hops per swap are read off the wire (``Cluster.link_filter``), with the
  swaps started and those resolved at their origin (``SwapOrdering.swaps``,
  ``local_swaps``).

``python -m amcast.protocols.simulation.swap_node_study`` prints the table;
``--json PATH`` writes the rows (docs/perf/swap-node-study/ holds them and the plot).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from ..node_config import NodeConfig
from ..swap.engine import build_tree
from ..swap.link import decode
from ..swap.messages import SwapReply
from ..vocabulary import ServiceLevel
from ..wire.codec import SwapDatagram
from .cluster import Cluster, RunResult, Workload
from .network import NetworkConfig

KEY = b"simulation-group-key"
MODES = ("toto", "arrow", "combining", "hybrid")
SHAPES = ("star", "path", "balanced")
SIZES = (4, 8, 16)
SENDERS = ("one", "all")
Progress = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class Case:
    mode: str
    shape: str
    """The swap tree; ``-`` for ToTo (no tree)."""
    n: int
    senders: str
    """``one`` (the highest id) or ``all``."""
    messages: int = 64
    """Messages in all (``all``: split evenly, at least 4 per member)."""
    rate: float = 50.0
    """Messages per second per sender (Poisson)."""


@dataclass(frozen=True, slots=True)
class Row:
    mode: str
    shape: str
    n: int
    diameter: int
    senders: str
    seeds: int
    messages: int
    p50_ms: float
    p99_ms: float
    swap_sent: float
    """Swap datagrams sent per delivered message, all members."""
    other_sent: float
    swap_received: float
    other_received: float
    swaps: int
    local_swaps: int
    mean_hops: float
    """Hops per swap (a local swap crosses none)."""
    max_hops: int
    violations: int


@dataclass(slots=True)
class Observed:
    """What one run measured, before the rows average seeds."""

    latencies: list[float]
    messages: int
    sent: dict[str, int]
    received: dict[str, int]
    swaps: int
    local_swaps: int
    hops: list[int]
    violations: list[str]
    result: RunResult


def node_config(mode: str, shape: str) -> NodeConfig:
    if mode == "toto":
        return NodeConfig(group_key=KEY)
    return NodeConfig(group_key=KEY, ordering=mode, swap_tree=shape)


def diameter(mode: str, shape: str, n: int) -> int:
    return 0 if mode == "toto" else build_tree(tuple(range(n)), shape, 2).diameter()


def schedule(case: Case, seed: int) -> list[tuple[float, int]]:
    """``(time, sender)`` of every submission: Poisson per sender, merged in time."""
    rng = random.Random(seed * 7001 + 3)
    senders = [case.n - 1] if case.senders == "one" else list(range(case.n))
    each = case.messages if case.senders == "one" else max(4, case.messages // case.n)
    out = []
    for i in senders:
        t = 0.2  # after the first view's first heartbeats
        for _ in range(each):
            t += rng.expovariate(case.rate)
            out.append((t, i))
    return sorted(out)


class ReplyTap:
    """``Cluster.link_filter`` that lets everything through and notes the hops of
    every distinct ``SwapReply`` at the member it is addressed to."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.hops: dict[tuple[int, int, int, int], int] = {}
        self._seen: dict[bytes, object] = {}

    def __call__(self, src: int, dst: int, data: bytes) -> bool:
        node = self.cluster.nodes.get(dst)
        if node is None:
            return True
        dg = self._seen.get(data)
        if dg is None:
            if len(self._seen) > 4096:
                self._seen.clear()
            dg = self._seen[data] = node.peek(data)
        if isinstance(dg, SwapDatagram) and dg.dst == dst and dg.seq:
            msg = decode(dg.msg)
            if isinstance(msg, SwapReply):
                self.hops[(dg.view, dg.sender, dst, dg.seq)] = msg.hops
        return True


def drive(cluster: Cluster, plan: Sequence[tuple[float, int]], seed: int, *,
          tail: float = 10.0, until: float | None = None) -> int:
    """Submit ``plan``'s ``agreed`` messages (16 to 200 bytes, seeded; a sender not
    running then skips its turn), then run until every running member delivered every
    message (or ``tail`` virtual seconds more) and 0.2 s beyond, or, given ``until``,
    up to that virtual time; the number of submissions backpressure refused."""
    load = random.Random(seed * 31 + 5)
    refused = 0
    for k, (t, i) in enumerate(plan):
        cluster.advance(t)
        if i not in cluster.nodes:
            continue
        header = f"{i}:{k}:".encode()
        body = load.randbytes(max(0, load.randint(16, 200) - len(header)))
        if not cluster.submit(i, header + body, ServiceLevel.AGREED):
            refused += 1
    if until is not None:
        cluster.advance(until)
        return refused
    end = cluster.now + tail
    total = len(cluster.sent)
    while cluster.now < end and any(len(cluster.logs[i]) < total for i in cluster.nodes):
        cluster.advance(cluster.now + 0.05)
    cluster.advance(cluster.now + 0.2)  # the last acknowledgements
    return refused


def run_case(case: Case, seed: int, *, tail: float = 10.0) -> Observed:
    """One seeded run of ``case``: submit the schedule, run until every member delivered
    every message (or ``tail`` virtual seconds after the last submission), check."""
    cluster = Cluster(case.n, seed=seed, node_config=node_config(case.mode, case.shape),
                      network=NetworkConfig())
    tap = ReplyTap(cluster)
    cluster.link_filter = tap
    refused = drive(cluster, schedule(case, seed), seed, tail=tail)
    total = len(cluster.sent)
    result = cluster.result()
    sent_at = {m.payload: m.time for m in result.sent}
    latencies = [d.time - sent_at[d.payload] for log in result.logs.values() for d in log]
    sent: dict[str, int] = {}
    received: dict[str, int] = {}
    swaps = local = 0
    for nd in result.all_nodes:
        for kind, count in nd.stats.datagrams_sent.items():
            sent[kind] = sent.get(kind, 0) + count
        for kind, count in nd.stats.datagrams_received.items():
            received[kind] = received.get(kind, 0) + count
        session = nd.membership.session
        if session is not None and session.swap is not None:
            swaps += session.swap.swaps
            local += session.swap.local_swaps
    violations = [f"{prop}: {v}" for prop, found in result.violations.items() for v in found]
    if refused:
        violations.append(f"backpressure: {refused} submissions refused")
    return Observed(latencies, total, sent, received, swaps, local, list(tap.hops.values()),
                    violations, result)


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def row(case: Case, runs: Sequence[Observed]) -> Row:
    latencies = [x for r in runs for x in r.latencies]
    messages = sum(r.messages for r in runs)

    def per(which: str, swap: bool) -> float:
        total = 0
        for r in runs:
            counts = r.sent if which == "sent" else r.received
            total += sum(v for k, v in counts.items() if (k == "swap") == swap)
        return round(total / messages, 3) if messages else 0.0

    swaps = sum(r.swaps for r in runs)
    hops = [h for r in runs for h in r.hops]
    return Row(case.mode, case.shape, case.n, diameter(case.mode, case.shape, case.n),
               case.senders, len(runs), messages,
               round(1000 * percentile(latencies, 0.5), 3),
               round(1000 * percentile(latencies, 0.99), 3),
               per("sent", True), per("sent", False),
               per("received", True), per("received", False),
               swaps, sum(r.local_swaps for r in runs),
               round(sum(hops) / swaps, 3) if swaps else 0.0, max(hops, default=0),
               sum(len(r.violations) for r in runs))


def cases(sizes: Sequence[int] = SIZES, modes: Sequence[str] = MODES,
          shapes: Sequence[str] = SHAPES, senders: Sequence[str] = SENDERS,
          messages: int = 64, rate: float = 50.0) -> list[Case]:
    out = []
    for n in sizes:
        for who in senders:
            for mode in modes:
                for shape in (("-",) if mode == "toto" else shapes):
                    out.append(Case(mode, shape, n, who, messages, rate))
    return out


def study(case_list: Sequence[Case], seeds: Sequence[int],
          progress: Progress | None = None) -> list[Row]:
    rows = []
    for case in case_list:
        rows.append(row(case, [run_case(case, seed) for seed in seeds]))
        if progress:
            r = rows[-1]
            progress(f"n={r.n} {r.senders} {r.mode} {r.shape}: p50 {r.p50_ms} ms, "
                     f"swap sent/msg {r.swap_sent}, violations {r.violations}")
    return rows


def saturation(mode: str, n: int = 8, senders: int | None = None,
               seeds: Sequence[int] = (1, 2), messages: int = 400) -> tuple[float, int]:
    """Ordered messages per virtual second when the first ``senders`` members (None:
    all) each submit ``messages`` ``agreed`` messages as fast as flow control allows
    (balanced tree), from the first submission to the last delivery, mean over
    ``seeds``; and the violations found. The simulator charges no CPU, so this is the
    protocols' own bound (round trips, windows, batching), not a daemon's."""
    rates, bad = [], 0
    for seed in seeds:
        cluster = Cluster(n, seed=seed, node_config=node_config(mode, "balanced"))
        result = cluster.run(Workload(messages_per_node=messages, senders=senders,
                                      interval=0.0, services=((ServiceLevel.AGREED, 1.0),),
                                      large_fraction=0.0), max_time=60.0)
        first = min(m.time for m in result.sent)
        last = max(d.time for log in result.logs.values() for d in log)
        rates.append(len(result.sent) / (last - first))
        bad += sum(len(v) for v in result.violations.values())
    return sum(rates) / len(rates), bad


COLUMNS = ("n", "senders", "mode", "tree (diameter)", "p50 ms", "p99 ms",
           "swap sent/msg", "other sent/msg", "swap recv/msg", "other recv/msg",
           "local swaps", "mean hops", "max hops", "violations")


def format_table(rows: Sequence[Row]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        tree = "-" if r.mode == "toto" else f"{r.shape} ({r.diameter})"
        local = "-" if r.mode == "toto" else f"{r.local_swaps}/{r.swaps}"
        cells = [r.n, r.senders, r.mode, tree, f"{r.p50_ms:.2f}", f"{r.p99_ms:.2f}",
                 f"{r.swap_sent:.2f}", f"{r.other_sent:.2f}", f"{r.swap_received:.2f}",
                 f"{r.other_received:.2f}", local, f"{r.mean_hops:.2f}", r.max_hops,
                 r.violations]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m amcast.protocols.simulation.swap_node_study",
                                description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="4,8,16")
    p.add_argument("--seeds", type=int, default=3, help="seeds per case (from 1)")
    p.add_argument("--messages", type=int, default=64)
    p.add_argument("--rate", type=float, default=50.0)
    p.add_argument("--json", help="also write the rows to this file")
    p.add_argument("--saturation", action="store_true",
                   help="print the saturation rates (``saturation``) instead, n = 8")
    args = p.parse_args(argv)
    if args.saturation:
        print("| mode | senders | ordered msgs per virtual s | violations |")
        print("|---|---|---|---|")
        for mode in MODES:
            for senders in (1, None):
                rate, bad = saturation(mode, senders=senders)
                print(f"| {mode} | {senders or 'all'} | {rate:,.0f} | {bad} |", flush=True)
        return 0
    sizes = [int(x) for x in args.sizes.split(",")]
    rows = study(cases(sizes, messages=args.messages, rate=args.rate),
                 range(1, args.seeds + 1),
                 progress=lambda line: print(line, file=sys.stderr, flush=True))
    print(format_table(rows))
    if args.json:
        meta = {"seeds": args.seeds, "messages": args.messages, "rate": args.rate,
                "workload": "agreed, 16-200 bytes, Poisson per sender; one sender: the "
                            "highest id; links 0.5-0.7 ms, no loss"}
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "rows": [asdict(r) for r in rows]}, f, indent=1)
            f.write("\n")
    return 0 if all(r.violations == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
