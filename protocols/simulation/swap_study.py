"""The counting study for ordering by distributed swap (*Ordered Multicast and
Distributed Swap*, section 6.1's comparison, measured): swap datagrams and hops per
delivered message for arrow, combining and the hybrid, on a star, a path and a balanced
binary tree, with one sender (a leaf far from the sink or root) or every member sending.

Per configuration it runs ``seeds`` simulations (every checker on) and reports, per
message: the swap datagrams (``msgs``; the one <pred, m> multicast comes on top),
the mean and largest hops a request crossed before its predecessor was known, and the
load on the busiest node (swap datagrams it received per message): the bottleneck of
section 6.1; and the mean ordering latency (from the swap's start to the multicast of
<pred, m>, combining windows included). ``format_table`` prints the rows; ``python -m
amcast.protocols.simulation.swap_study`` prints the table of docs/swap.md.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from ..swap.tree import Shape
from .swap_cluster import Mode, SwapSimConfig
from .swap_sweep import simulate

SHAPES: tuple[Shape, ...] = ("star", "path", "balanced")
MODES: tuple[Mode, ...] = ("arrow", "combining", "hybrid")


@dataclass(frozen=True, slots=True)
class StudyRow:
    shape: Shape
    senders: str
    mode: Mode
    messages: int
    swaps_per_msg: float
    mean_hops: float
    max_hops: int
    busiest_per_msg: float
    latency_ms: float
    """Mean time from a message's swap to its <pred, m> multicast."""
    diameter: int
    violations: int


def study(n: int = 15, seeds: range = range(5), messages: int = 4,
          window: float = 0.001, reply: bool = False) -> list[StudyRow]:
    rows = []
    for shape in SHAPES:
        for who in ("one", "all"):
            for mode in MODES:
                senders = (n - 1,) if who == "one" else None
                per_sender = messages * n if who == "one" else messages
                cfg = SwapSimConfig(mode=mode, n=n, shape=shape, senders=senders,
                                    messages=per_sender, window=window, reply=reply)
                total = swaps = hops = max_hops = busiest = bad = 0
                latency = 0.0
                diameter = 0
                for seed in seeds:
                    trace = simulate(cfg, seed)
                    bad += len(trace.violations)
                    total += len(trace.multicasts)
                    swaps += len(trace.swaps)
                    hops += sum(r.event.hops for r in trace.multicasts)
                    max_hops = max([max_hops, *(r.event.hops for r in trace.multicasts)])
                    load = Counter(r.dst for r in trace.swaps)
                    busiest += max(load.values(), default=0)
                    latency += sum(r.time - trace.sent_at[r.event.ordered.msg_id]
                                   for r in trace.multicasts)
                    diameter = max(r.hop_bound for r in trace.multicasts)
                rows.append(StudyRow(shape, who, mode, total, swaps / total, hops / total,
                                     max_hops, busiest / total, 1000 * latency / total,
                                     diameter, bad))
    return rows


def format_table(rows: list[StudyRow]) -> str:
    head = ("| tree (diameter) | senders | mode | messages | swap datagrams/msg | mean hops "
            "| max hops | busiest node/msg | latency ms | violations |")
    lines = [head, "|" + "---|" * 10]
    for r in rows:
        lines.append(
            f"| {r.shape} ({r.diameter}) | {r.senders} | {r.mode} | {r.messages} "
            f"| {r.swaps_per_msg:.2f} | {r.mean_hops:.2f} | {r.max_hops} "
            f"| {r.busiest_per_msg:.2f} | {r.latency_ms:.2f} | {r.violations} |"
        )
    return "\n".join(lines)


def main() -> None:
    print(format_table(study()))


if __name__ == "__main__":
    main()
