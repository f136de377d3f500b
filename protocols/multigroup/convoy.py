"""The convoy effect of the production protocol, measured in the multigroup simulator.

Skeen's rule delivers a message only when no pending message of the cluster can still
get a smaller final timestamp. A local message (one destination cluster) that a
cluster's leader timestamps just after a global one therefore waits until the global
message commits, which takes the inter-cluster delays: local messages travel in the
convoy of the global ones.

Set-up (failure-free): clusters of 3; in each, one follower multicasts a Poisson stream;
a message is global with probability ``global_share`` (to its own cluster and one
other, chosen at random), local otherwise. Links inside a cluster take 0.2 time units
(jitter 0.05), links between clusters 1.0 (jitter 0.2): a local message needs three
intra-cluster delays (0.6), a global one about 0.2 + 1.0 + 1.0. The figures are the
latency of every delivery (multicast to delivery, at each addressee), local and global
apart. ``crash_leader_at`` crashes the leader of cluster 0 at that time (the others
suspect it 1 to 5 time units later, the simulator's failure detector): what a view
change costs.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from .simulation import LinkFaults, PlannedMulticast, Scenario, layout, run_scenario

INTRA = LinkFaults(delay=0.2, jitter=0.05)
INTER = LinkFaults(delay=1.0, jitter=0.2)


@dataclass(frozen=True, slots=True)
class ConvoyRow:
    clusters: int
    global_share: float
    local_mean: float | None
    local_p99: float | None
    global_mean: float | None
    messages: int
    local_max: float | None = None


def _percentile(xs: Sequence[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def measure(clusters: int, global_share: float, seed: int = 1, rate: float = 2.0,
            duration: float = 40.0, size: int = 3,
            crash_leader_at: float | None = None) -> ConvoyRow:
    """One failure-free run; ``rate`` multicasts per time unit per cluster."""
    rng = random.Random(seed)
    fed = layout([size] * clusters)
    planned = []
    for g in range(clusters):
        sender = fed.groups[g][1 % size]
        t = rng.expovariate(rate)
        while t < duration:
            if clusters > 1 and rng.random() < global_share:
                other = rng.choice([h for h in range(clusters) if h != g])
                dst = tuple(sorted((g, other)))
            else:
                dst = (g,)
            planned.append(PlannedMulticast(t, sender, dst))
            t += rng.expovariate(rate)
    planned.sort(key=lambda m: m.time)
    crashes = {} if crash_leader_at is None else {fed.groups[0][0]: crash_leader_at}
    r = run_scenario(Scenario(fed, multicasts=tuple(planned), inter_faults=INTER,
                              intra_faults=INTRA, protocol="production", crashes=crashes),
                     seed)
    if r.violations:
        raise AssertionError(r.violations[:3])
    local: list[float] = []
    glob: list[float] = []
    for per in r.delivery_times.values():
        for mid, t in per.items():
            groups = {fed.group_of(p) for p in r.multicasts[mid].dst_processes}
            (glob if len(groups) > 1 else local).append(t - r.multicast_times[mid])
    return ConvoyRow(clusters, global_share,
                     sum(local) / len(local) if local else None,
                     _percentile(local, 0.99) if local else None,
                     sum(glob) / len(glob) if glob else None, len(planned),
                     max(local) if local else None)


def table(clusters: Sequence[int] = (1, 2, 4, 8),
          shares: Sequence[float] = (0.0, 0.1, 0.25, 0.5, 0.75, 1.0),
          seed: int = 1) -> list[ConvoyRow]:
    return [measure(c, s, seed) for c in clusters for s in shares if c > 1 or s == 0.0]


def render(rows: Sequence[ConvoyRow]) -> str:
    def f(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f}"

    head = (f"{'clusters':>8} {'global %':>8}  {'local mean':>10} {'local p99':>9}  "
            f"{'global mean':>11} {'msgs':>5}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r.clusters:>8} {100 * r.global_share:>8.0f}  {f(r.local_mean):>10} "
                     f"{f(r.local_p99):>9}  {f(r.global_mean):>11} {r.messages:>5}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(render(table()))
