"""Checkers of the properties of atomic multicast to multiple groups, over one run.

Table 1 of Scalable Atomic Multicast, and its scalability properties (section 1.2):

- **acyclicity** (TO3, uniform total order): m1 < m2 iff some process, correct or not,
  TO-delivered m1 before m2; the relation must be acyclic. Checked *globally*: every
  process's delivery sequence adds its consecutive pairs as edges of one graph (the
  union of the per-process orders has the same transitive closure) and the graph must
  have no cycle. Comparing groups two by two misses cycles through three or more
  groups (``tests/multigroup`` keeps one such log);
- **integrity**: a process TO-delivers a message at most once, only a multicast one,
  and only if it belongs to a group of Dst(m);
- **uniform agreement** (TO1): if any process of Dst(m) TO-delivered m, every correct
  process of Dst(m) did;
- **termination** (TO2): if a correct process TO-multicast m, every correct process of
  Dst(m) TO-delivered it;
- **participant minimality** (genuineness): every datagram about m is sent and received
  only by the sender of m and processes of Dst(m);
- **message-size minimality**: at a fixed d, the largest header does not change with n.

Each checker returns human-readable violations; empty means the property holds.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

from .messages import MsgId


@dataclass(frozen=True, slots=True)
class Multicast:
    """A TO-multicast: who sent it and the processes of Dst(m)."""

    sender: int
    dst_processes: frozenset[int]


@dataclass(frozen=True, slots=True)
class Datagram:
    """One datagram sent: its ends and the messages it is about."""

    src: int
    dst: int
    about: tuple[MsgId, ...]


def find_cycle(deliveries: Mapping[int, Sequence[MsgId]]) -> list[MsgId] | None:
    """A cycle of the global delivered-before relation, or None (iterative DFS)."""
    succ: dict[MsgId, set[MsgId]] = defaultdict(set)
    for seq in deliveries.values():
        for a, b in pairwise(seq):
            if a != b:
                succ[a].add(b)
    white, grey, black = 0, 1, 2
    colour: dict[MsgId, int] = defaultdict(int)
    for root in sorted(succ):
        if colour[root] != white:
            continue
        path: list[MsgId] = [root]
        stack = [iter(sorted(succ[root]))]
        colour[root] = grey
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                colour[path.pop()] = black
                stack.pop()
            elif colour[nxt] == grey:
                return [*path[path.index(nxt):], nxt]
            elif colour[nxt] == white:
                colour[nxt] = grey
                path.append(nxt)
                stack.append(iter(sorted(succ[nxt])))
    return None


def check_acyclic(deliveries: Mapping[int, Sequence[MsgId]]) -> list[str]:
    cycle = find_cycle(deliveries)
    if cycle is None:
        return []
    return ["acyclicity: delivered-before cycle " + " < ".join(map(str, cycle))]


def check_integrity(deliveries: Mapping[int, Sequence[MsgId]],
                    multicasts: Mapping[MsgId, Multicast]) -> list[str]:
    out = []
    for pid, seq in sorted(deliveries.items()):
        if len(set(seq)) != len(seq):
            out.append(f"integrity: process {pid} delivered a message twice")
        for mid in seq:
            m = multicasts.get(mid)
            if m is None:
                out.append(f"integrity: process {pid} delivered {mid}, never multicast")
            elif pid not in m.dst_processes:
                out.append(f"integrity: process {pid} delivered {mid}, not addressed to it")
    return out


def check_agreement(deliveries: Mapping[int, Sequence[MsgId]],
                    multicasts: Mapping[MsgId, Multicast], correct: Iterable[int]) -> list[str]:
    live = set(correct)
    delivered = {pid: set(seq) for pid, seq in deliveries.items()}
    out = []
    for mid in sorted({m for seq in deliveries.values() for m in seq if m in multicasts}):
        for pid in sorted(multicasts[mid].dst_processes & live):
            if mid not in delivered.get(pid, set()):
                out.append(f"uniform agreement: {mid} delivered somewhere, not by correct "
                           f"process {pid}")
    return out


def check_termination(deliveries: Mapping[int, Sequence[MsgId]],
                      multicasts: Mapping[MsgId, Multicast], correct: Iterable[int]) -> list[str]:
    live = set(correct)
    delivered = {pid: set(seq) for pid, seq in deliveries.items()}
    out = []
    for mid, m in sorted(multicasts.items()):
        if m.sender not in live:
            continue
        for pid in sorted(m.dst_processes & live):
            if mid not in delivered.get(pid, set()):
                out.append(f"termination: correct sender's {mid} not delivered by {pid}")
    return out


def check_participants(datagrams: Iterable[Datagram],
                       multicasts: Mapping[MsgId, Multicast]) -> list[str]:
    out = []
    for d in datagrams:
        for mid in d.about:
            m = multicasts[mid]
            allowed = m.dst_processes | {m.sender}
            for end in (d.src, d.dst):
                if end not in allowed:
                    out.append(f"participant minimality: process {end} sent or received a "
                               f"datagram about {mid}")
    return out


def check_size_minimality(headers: Iterable[tuple[int, int, int]]) -> list[str]:
    """``headers``: ``(d, n, largest header bytes)``; at each d, one size for every n."""
    by_d: dict[int, dict[int, int]] = defaultdict(dict)
    for d, n, size in headers:
        by_d[d][n] = max(size, by_d[d].get(n, 0))
    return [f"message-size minimality: at d={d} the header grows with n: {sizes}"
            for d, sizes in sorted(by_d.items()) if len(set(sizes.values())) > 1]


def check_run(deliveries: Mapping[int, Sequence[MsgId]], multicasts: Mapping[MsgId, Multicast],
              correct: Iterable[int], datagrams: Iterable[Datagram]) -> list[str]:
    live = set(correct)
    return (check_acyclic(deliveries) + check_integrity(deliveries, multicasts)
            + check_agreement(deliveries, multicasts, live)
            + check_termination(deliveries, multicasts, live)
            + check_participants(datagrams, multicasts))
