"""Table 2 of Scalable Atomic Multicast (section 5.2), reproduced by counting.

The paper's best case: no failure, no suspicion, one multicast to d processes sent by
one of them; links of unit delay, so a process's delivery time is its number of
communication steps. The simulator counts the datagrams SCALATOM sends, by kind, and
the largest header (``messages.header_bytes``), for d = 2..6 at growing n (the same
destination groups plus unaddressed groups of 3, which must change nothing).

The paper's figures, with k = d - 1: 6 [5] communication steps and
``3k^2 + 4k [+ k^2]`` messages, that is ``k + k^2`` for the R-multicast (the sender sends
k, each of the k others relays to its k peers), ``k(k + 1)`` timestamps, ``2k + k^2``
for the consensus (proposal, acks, decision relayed) and ``k^2`` for the history gossip.

Where counting differs, and why:

- **Gossip.** Histories are exchanged *inside each group* (4.2, step 4), which costs
  ``sum |g| (|g| - 1)`` over the destination groups, not ``(d - 1)^2``: fewer when Dst(m)
  spans several groups (two groups of 3: 12, not 25), ``d(d - 1)`` for one group of d.
- **Steps.** 6 is the latest delivery. Processes of the coordinator's group whose
  majority includes the coordinator (it decided one step before them, and its gossip
  arrives when they decide) deliver after 5; a group of one process needs no gossip
  (its majority is itself) and delivers after 5, or 4 if it is the coordinator.
  The bracketed 5 of the paper (gossip piggybacked on later traffic) is not modelled.
- **MTO's R-multicast.** The paper writes ``d + (d-1)^2`` for it but sums ``k + k^2``;
  with the sender in Dst(m) the count is ``k + k^2``.

The other rows. The **production protocol** (``skeen.py``) is counted the same way, in
the multigroup simulator, sender the leader of the first destination cluster:
``(G-1)`` submits, ``G(d-1)`` accepts and ``d(d-1)`` acknowledgements for G destination
clusters, 3 steps (2 when Dst(m) is one cluster). The **broadcast** rows (fixed
sequencer, symmetric, Chandra-Toueg) are the failure-free models of ``baselines.py``:
every one of the n processes takes part, so they are counted at each n, sender not the
sequencer or first coordinator (the paper's figures), and the sender as sequencer for
the bracket.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from . import baselines
from .simulation import (
    LinkFaults,
    PlannedMulticast,
    Scenario,
    layout,
    run_scenario,
)

UNIT = LinkFaults(delay=1.0, jitter=0.0)


@dataclass(frozen=True, slots=True)
class Row:
    d: int
    sizes: tuple[int, ...]
    n: int
    min_steps: float
    max_steps: float
    messages: int
    gossip: int
    header: int
    protocol: str = "scalatom"

    @property
    def paper_messages(self) -> int:
        k = self.d - 1
        return 3 * k * k + 4 * k

    @property
    def paper_gossip(self) -> int:
        return (self.d - 1) ** 2


def count(sizes: Sequence[int], extra_groups: int = 0, protocol: str = "scalatom") -> Row:
    """One failure-free multicast from the first destination process (for the production
    protocol, the leader of the first destination cluster) to ``sizes``."""
    fed = layout(sizes, extra_groups)
    dst = tuple(range(len(sizes)))
    sender = fed.groups[0][0]
    sc = Scenario(fed, multicasts=(PlannedMulticast(0.0, sender, dst),),
                  inter_faults=UNIT, intra_faults=UNIT, protocol=protocol)
    r = run_scenario(sc)
    if r.violations:
        raise AssertionError(r.violations)
    times = [t for per in r.delivery_times.values() for t in per.values()]
    gossip = r.sent_by_kind["Gossip"]
    return Row(sum(sizes), tuple(sizes), fed.n, min(times), max(times),
               sum(r.sent_by_kind.values()) - gossip, gossip, r.largest_header, protocol)


def layouts(d: int) -> list[tuple[int, ...]]:
    """One group of d, and d split over two groups."""
    return [(d,), (d - d // 2, d // 2)] if d > 1 else [(1,)]


def table(ds: Sequence[int] = (2, 3, 4, 5, 6),
          extra: Sequence[int] = (0, 2, 10), protocol: str = "scalatom") -> list[Row]:
    return [count(sizes, e, protocol) for d in ds for sizes in layouts(d) for e in extra]


def production_messages(d: int, clusters: int) -> int:
    """Submits to the other clusters' leaders, accepts, acknowledgements."""
    return (clusters - 1) + clusters * (d - 1) + d * (d - 1)


@dataclass(frozen=True, slots=True)
class BroadcastRow:
    n: int
    rows: tuple[baselines.BaselineRow, ...]
    """Per model: sender not the sequencer or first coordinator, then the sender as it."""


def broadcast_table(ns: Sequence[int] = (2, 3, 4, 5, 6, 8, 12, 16)) -> list[BroadcastRow]:
    return [BroadcastRow(n, tuple(baselines.count(m, n, s) for m in baselines.MODELS
                                  for s in (n - 1, 0)))
            for n in ns]


def render(rows: Sequence[Row]) -> str:
    head = (f"{'d':>2} {'groups':>7} {'n':>3}  {'steps':>5} {'paper':>5}  "
            f"{'msgs':>4} {'paper':>5}  {'gossip':>6} {'paper':>5}  {'header B':>8}")
    lines = [head, "-" * len(head)]
    for r in rows:
        steps = f"{r.min_steps:g}-{r.max_steps:g}" if r.min_steps != r.max_steps else (
            f"{r.max_steps:g}")
        lines.append(
            f"{r.d:>2} {'+'.join(map(str, r.sizes)):>7} {r.n:>3}  {steps:>5} {'6 [5]':>5}  "
            f"{r.messages:>4} {r.paper_messages:>5}  {r.gossip:>6} {r.paper_gossip:>5}  "
            f"{r.header:>8}")
    return "\n".join(lines)


def render_production(rows: Sequence[Row]) -> str:
    head = (f"{'d':>2} {'groups':>7} {'n':>3}  {'steps':>5}  {'msgs':>4} {'formula':>7}  "
            f"{'header B':>8}")
    lines = [head, "-" * len(head)]
    for r in rows:
        steps = f"{r.min_steps:g}-{r.max_steps:g}" if r.min_steps != r.max_steps else (
            f"{r.max_steps:g}")
        lines.append(f"{r.d:>2} {'+'.join(map(str, r.sizes)):>7} {r.n:>3}  {steps:>5}  "
                     f"{r.messages:>4} {production_messages(r.d, len(r.sizes)):>7}  "
                     f"{r.header:>8}")
    return "\n".join(lines)


def _steps(r: baselines.BaselineRow) -> str:
    return f"{r.min_steps:g}-{r.max_steps:g}" if r.min_steps != r.max_steps else (
        f"{r.max_steps:g}")


def render_broadcast(rows: Sequence[BroadcastRow]) -> str:
    head = f"{'n':>3}  " + "  ".join(
        f"{m + ' steps':>19} {'msgs':>5} {'paper':>9}" for m in baselines.MODELS)
    lines = [head, "-" * len(head)]
    for b in rows:
        cells = []
        for i, m in enumerate(baselines.MODELS):
            far, near = b.rows[2 * i], b.rows[2 * i + 1]
            steps, msgs = baselines.paper(m, b.n)
            paper = f"{msgs} [+{b.n * (b.n - 1)}]" if m == "symmetric" else f"{msgs}"
            cells.append(f"{_steps(far) + ' [' + _steps(near) + '] (' + steps + ')':>19} "
                         f"{far.messages:>5} {paper:>9}")
        lines.append(f"{b.n:>3}  " + "  ".join(cells))
    return "\n".join(lines)


def print_table() -> None:
    print(render(table()))
    print()
    print(render_production(table(protocol="production")))
    print()
    print(render_broadcast(broadcast_table()))


if __name__ == "__main__":
    print_table()
