"""What a join and a leave cost per ordering (*Ordered Multicast and Distributed Swap*,
section 6.2), measured on the simulated cluster of real Nodes beside ToTo.

Theory of operation. The paper makes a join or a leave a local operation whose cost is
proportional to the node's degree. In the Node membership stays a view change (virtual
synchrony: the flush agrees the old view's last vertices), but the swap tree is carried
from view to view by section 6.2's local joins and leaves (``swap.carry``): only the
joiner or leaver and its tree neighbours change links. This study measures both parts,
per ``protocol.ordering``, on one seeded workload: n members (balanced tree), every
member but the one the event is about sending ``agreed`` messages at ``rate`` per second
from t = 0.5 s to the event + 1 s (the same with the event and without it), and one
event at t = 1.5 s:

- ``join``: node n - 1 starts (the others formed their first view without it);
- ``leave``: node n - 1 leaves gracefully (a leaf of every tree shape);
- ``leave-inner``: node 1 leaves gracefully (an inner node of the balanced tree: the
  root's first child, of degree fan-out + 1);
- ``leave-root``: node 0 leaves gracefully (the arrow's sink, the combining root and
  the first member of the hybrid's virtual root).

Per event also: the node's tree degree, the members whose tree links changed between
the view before the event and the view after it (``links``), and those that would have
changed had the new view rebuilt its tree from the member list (``rebuilt``: the rule
before the tree was carried).

Per event: the time until the new view is installed at its last member, the time until
deliveries resume (the first delivery of the new view at its last member), the
messages delayed (sent within 1 s of the event and delivered later than the same
mode's p99 in the run without the event, same seed and schedule), and the datagrams the
event cost: those sent in the run with it minus the run without it, by kind (swap,
membership, the rest). Every run passes every checker of ``simulation.checkers``.

``python -m amcast.protocols.simulation.swap_churn_study`` prints the table; ``--json``
writes the rows.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from ..swap import carry
from ..wire.codec import KIND_NAMES
from .checkers import Delivery
from .cluster import Cluster, RunResult
from .faults import Fault
from .network import NetworkConfig
from .swap_node_study import MODES, drive, node_config, percentile

EVENTS = ("join", "leave", "leave-inner", "leave-root")
AT = 1.5
"""Virtual time of the event, seconds."""
START = 0.5
"""The first submission (the first view is formed by then)."""
WINDOW = 0.5
"""Datagrams are compared over [event, event + WINDOW): the view change and the
deliveries' resumption fit in it."""


@dataclass(frozen=True, slots=True)
class ChurnRow:
    mode: str
    event: str
    n: int
    seeds: int
    view_ms: float
    """Event to the new view installed at its last member (mean over seeds)."""
    resume_ms: float
    """Event to the first delivery of the new view at its last member (mean)."""
    delayed: float
    """Messages per seed sent within 1 s of the event and delivered later than the
    steady p99 of the run without it."""
    steady_p99_ms: float
    worst_ms: float
    """The largest latency (to the last member) of a message sent within 1 s of the
    event (mean over seeds)."""
    extra_swap: float
    """Datagrams per seed sent within ``WINDOW`` of the event, with it minus without
    it: swap kind."""
    extra_membership: float
    extra_other: float
    violations: int
    degree: float = 0.0
    """The joiner's (new tree) or leaver's (old tree) degree (mean over seeds)."""
    links_changed: float = 0.0
    """Members whose tree links changed from the view before to the view after (mean)."""
    links_rebuilt: float = 0.0
    """The same, had the view after rebuilt its tree from its member list (mean)."""


def who(n: int, event: str) -> int:
    """The node the event is about."""
    return {"leave-root": 0, "leave-inner": 1}.get(event, n - 1)


def tree_change(result: RunResult, node: int, shape: str = "balanced", fanout: int = 2,
                root_group: int = 1) -> tuple[int, int, int] | None:
    """(degree of ``node``, members whose links changed, the same for a rebuilt tree)
    across the event: the last view installed before it and the first after it."""
    before = [v for vs in result.views.values() for v in vs
              if v.time < AT and v.swap_tree is not None]
    after = [v for vs in result.views.values() for v in vs
             if v.time >= AT and v.swap_tree is not None]
    if not before or not after:
        return None
    old = max(before, key=lambda v: v.view).swap_tree
    new = min(after, key=lambda v: v.view).swap_tree
    assert old is not None and new is not None
    side = new if node in new.parent else old
    degree = len(side.neighbours()[node])
    rebuilt = carry.initial(new.members, shape, fanout, root_group)
    return (degree, len(carry.changed_members(old, new)),
            len(carry.changed_members(old, rebuilt)))


def plan(n: int, event: str, rate: float, seed: int) -> list[tuple[float, int]]:
    """Submissions of every member but the one the event is about (the same with the
    event and without it)."""
    rng = random.Random(seed * 7001 + 11)
    out = []
    for i in range(n):
        if i == who(n, event):
            continue
        t = START
        while True:
            t += rng.expovariate(rate)
            if t > AT + 1.0:
                break
            out.append((t, i))
    return sorted(out)


class SendTap:
    """``Cluster.link_filter`` that lets everything through and notes the time and kind
    of every datagram sent (once per send: at its copy to the first other endpoint)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.sends: list[tuple[float, str]] = []
        self._kinds: dict[bytes, str] = {}

    def __call__(self, src: int, dst: int, data: bytes) -> bool:
        if dst != (1 if src == 0 else 0):
            return True
        kind = self._kinds.get(data)
        if kind is None:
            reader = next(iter(self.cluster.nodes.values()))
            if len(self._kinds) > 4096:
                self._kinds.clear()
            kind = self._kinds[data] = KIND_NAMES[reader.peek(data).kind]
        self.sends.append((self.cluster.now, kind))
        return True

    def between(self, start: float, end: float) -> dict[str, int]:
        out: dict[str, int] = {}
        for t, kind in self.sends:
            if start <= t < end:
                key = kind if kind in ("swap", "membership") else "other"
                out[key] = out.get(key, 0) + 1
        return out


def run(mode: str, event: str, n: int, seed: int, rate: float, *, happens: bool = True,
        shape: str = "balanced") -> tuple[RunResult, SendTap]:
    """One run; ``happens=False`` is the baseline (for a join: n - 1 members throughout)."""
    joining = event == "join"
    cluster = Cluster(n, seed=seed, node_config=node_config(mode, shape),
                      network=NetworkConfig(), bootstrap="join" if joining else "agreed",
                      start=range(n - 1) if joining else None)
    tap = SendTap(cluster)
    cluster.link_filter = tap
    if happens:
        kind = "start" if joining else "leave"
        cluster.schedule(Fault(AT, kind, (who(n, event),), duration=0.0 if joining else 5.0))
    drive(cluster, plan(n, event, rate, seed), seed, until=AT + 4.0)
    return cluster.result(), tap


def _latencies(result: RunResult) -> dict[bytes, float]:
    """Per message, submit to its delivery at the last member that delivered it."""
    sent_at = {m.payload: m.time for m in result.sent}
    last: dict[bytes, float] = {}
    for log in result.logs.values():
        for d in log:
            last[d.payload] = max(last.get(d.payload, 0.0), d.time - sent_at[d.payload])
    return last


def _first_of_new_view(result: RunResult) -> tuple[float, float]:
    """(view installed at the last member, first delivery at the last member) of the
    first view installed after the event, relative to the event."""
    new_view = min((v.view for vs in result.views.values() for v in vs if v.time >= AT),
                   default=None)
    if new_view is None:
        return float("nan"), float("nan")
    installed = [v.time for vs in result.views.values() for v in vs if v.view == new_view]
    firsts: dict[int, Delivery] = {}
    for node, log in result.logs.items():
        for d in log:
            if d.view == new_view:
                firsts[node] = d
                break
    members = {p.node for p, vs in result.views.items() if any(v.view == new_view for v in vs)}
    if not members <= set(firsts):
        return max(installed) - AT, float("nan")
    return max(installed) - AT, max(firsts[i].time for i in members) - AT


def churn_row(mode: str, event: str, n: int, seeds: Sequence[int],
              rate: float) -> ChurnRow:
    views, resumes, delayed, p99s, worst = [], [], 0, [], []
    extra = {"swap": 0, "membership": 0, "other": 0}
    bad = 0
    links = [0, 0, 0]
    for seed in seeds:
        base, base_tap = run(mode, event, n, seed, rate, happens=False)
        hit, hit_tap = run(mode, event, n, seed, rate)
        bad += sum(len(v) for v in hit.violations.values())
        bad += sum(len(v) for v in base.violations.values())
        steady = percentile(list(_latencies(base).values()), 0.99)
        p99s.append(steady)
        sent_at = {m.payload: m.time for m in hit.sent}
        near = [lat for payload, lat in _latencies(hit).items()
                if abs(sent_at[payload] - AT) <= 1.0]
        delayed += sum(lat > steady for lat in near)
        worst.append(max(near, default=0.0))
        view, resume = _first_of_new_view(hit)
        views.append(view)
        resumes.append(resume)
        a, b = hit_tap.between(AT, AT + WINDOW), base_tap.between(AT, AT + WINDOW)
        for key in extra:
            extra[key] += a.get(key, 0) - b.get(key, 0)
        change = tree_change(hit, who(n, event), root_group=3 if mode == "hybrid" else 1)
        if change is not None:
            links = [x + y for x, y in zip(links, change, strict=True)]
    k = len(seeds)
    return ChurnRow(mode, event, n, k, round(1000 * sum(views) / k, 2),
                    round(1000 * sum(resumes) / k, 2), round(delayed / k, 2),
                    round(1000 * sum(p99s) / k, 3), round(1000 * sum(worst) / k, 2),
                    round(extra["swap"] / k, 1),
                    round(extra["membership"] / k, 1), round(extra["other"] / k, 1), bad,
                    round(links[0] / k, 2), round(links[1] / k, 2), round(links[2] / k, 2))


def study(sizes: Sequence[int] = (4, 8), seeds: Sequence[int] = (1, 2, 3),
          rate: float = 20.0, events: Sequence[str] = EVENTS,
          modes: Sequence[str] = MODES) -> list[ChurnRow]:
    return [churn_row(mode, event, n, seeds, rate)
            for n in sizes for event in events for mode in modes]


COLUMNS = ("n", "event", "mode", "view installed ms", "deliveries resume ms",
           "messages delayed", "steady p99 ms", "worst ms", "extra swap dgrams",
           "extra membership dgrams",
           "extra other dgrams", "degree", "links changed", "links if rebuilt",
           "violations")


def format_table(rows: Sequence[ChurnRow]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        cells = [r.n, r.event, r.mode, f"{r.view_ms:.1f}", f"{r.resume_ms:.1f}",
                 f"{r.delayed:.1f}", f"{r.steady_p99_ms:.2f}", f"{r.worst_ms:.1f}",
                 f"{r.extra_swap:.0f}",
                 f"{r.extra_membership:.0f}", f"{r.extra_other:.0f}",
                 *(("-",) * 3 if r.mode == "toto" else
                   (f"{r.degree:.1f}", f"{r.links_changed:.1f}", f"{r.links_rebuilt:.1f}")),
                 r.violations]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def links_rows(sizes: Sequence[int], shapes: Sequence[str] = ("balanced", "star", "path"),
               fanout: int = 2) -> list[tuple[int, str, str, int, int, int]]:
    """``(n, shape, event, degree, links changed, links if rebuilt)`` for the tree alone
    (``swap.carry``, no cluster): n members 0..n - 1 in the first view's tree, then node
    n joins, or node n - 1 (a leaf), node 1 (inner on the balanced tree and the path)
    or node 0 (the root) leaves; ``join-low``: node 0 joins members 1..n (a low id, as
    a restarted or healed member may have)."""
    out = []
    for n in sizes:
        for shape in shapes:
            for event, first, members, node in (
                    ("join", range(n), range(n + 1), n),
                    ("join-low", range(1, n + 1), range(n + 1), 0),
                    ("leave", range(n), range(n - 1), n - 1),
                    ("leave-inner", range(n), [i for i in range(n) if i != 1], 1),
                    ("leave-root", range(n), range(1, n), 0)):
                old = carry.initial(first, shape, fanout, 1)
                new = carry.next_tree(old, members, shape, fanout, 1)
                side = new if node in new.parent else old
                rebuilt = carry.initial(members, shape, fanout, 1)
                out.append((n, shape, event, len(side.neighbours()[node]),
                            len(carry.changed_members(old, new)),
                            len(carry.changed_members(old, rebuilt))))
    return out


def format_links(rows: Sequence[tuple[int, str, str, int, int, int]]) -> str:
    lines = ["| n | shape | event | degree | links changed | links if rebuilt |",
             "|---|---|---|---|---|---|"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m amcast.protocols.simulation.swap_churn_study",
                                description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="4,8")
    p.add_argument("--seeds", type=int, default=3, help="seeds per row (from 1)")
    p.add_argument("--rate", type=float, default=20.0, help="messages/s per sender")
    p.add_argument("--json", help="also write the rows to this file")
    p.add_argument("--links", action="store_true",
                   help="only the tree's links changed per event (no cluster), at --sizes")
    args = p.parse_args(argv)
    if args.links:
        print(format_links(links_rows([int(x) for x in args.sizes.split(",")])))
        return 0
    rows = study([int(x) for x in args.sizes.split(",")], range(1, args.seeds + 1), args.rate)
    print(format_table(rows))
    if args.json:
        meta = {"seeds": args.seeds, "rate": args.rate, "event_at_s": AT, "tree": "balanced"}
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "rows": [asdict(r) for r in rows]}, f, indent=1)
            f.write("\n")
    return 0 if all(r.violations == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
