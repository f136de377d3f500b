"""Invariant checkers over a ``SwapTrace`` (*Ordered Multicast and Distributed Swap*),
run on every simulated run by ``swap_sweep.simulate``:

- one sink (arrow, section 4; the hybrid's virtual root): at every step the sinks number
  1 + the arrow requests in flight, so exactly one at rest;
- swap hops: a request crosses at most diameter(T) links before its message's
  predecessor is known (section 4; for combining and the hybrid, the path up the tree
  is a tree path too);
- single sender (arrow, section 6.1): one sender costs no swap datagram once it is the
  sink: the whole run costs at most its distance to the initial sink (and one reply);
- through the root (combining and hybrid, sections 5 and 6.1): every swap request goes
  from a child to its parent (or inside the virtual root; replies to an origin aside),
  and every message is resolved
  by the root or combined into a request that the root resolved;
- total order: any two members deliver their common messages in the same order;
- agreement: every member delivers, or reports as a named gap, every message multicast
  while it was a member (when no data copy was lost: with no gap at all), exactly once;
  a message that vanished (reached nobody) is covered by an unnamed gap;
- predecessor first: each member's deliveries form one chain: every delivered message's
  predecessor is the member's previous delivery (or named gap, or start), unless a gap
  "one or more messages missing" precedes it;
- local changes (section 6.2): a join or a leave changes the tree neighbours and the
  pointers (arrow link, combining parent) only of the joiner or leaver and its tree
  neighbours (in the tree after a join, before a leave).

Each checker returns human-readable violations; empty means the property holds.
"""

from __future__ import annotations

from collections import Counter
from itertools import combinations

from ..swap.delivery import Delivered, Gap
from ..swap.messages import MsgId
from .swap_cluster import SwapTrace


def one_sink(trace: SwapTrace) -> list[str]:
    return [
        f"t={t:.6f}: {sinks} sinks with {flying} requests in flight"
        for t, sinks, flying in trace.sink_samples
        if sinks != 1 + flying
    ][:5]


def swap_hops(trace: SwapTrace) -> list[str]:
    return [
        f"{r.event.ordered.msg_id}: {r.event.hops} swap hops > diameter {r.hop_bound}"
        for r in trace.multicasts
        if r.event.hops > r.hop_bound
    ][:5]


def single_sender_quiet(trace: SwapTrace) -> list[str]:
    budget = trace.single_sender_budget
    if budget is None or len(trace.swaps) <= budget:
        return []
    return [f"one sender cost {len(trace.swaps)} swap datagrams, at most {budget} allowed"]


def through_root(trace: SwapTrace) -> list[str]:
    if trace.mode == "arrow":
        return []
    out = [
        f"swap datagram {r.src}->{r.dst} does not go toward the root"
        for r in trace.swaps
        if not r.toward_root and not r.reply
    ][:3]
    by_id = {r.event.ordered.msg_id: r.event for r in trace.multicasts}
    for mid, ev in by_id.items():
        seen: set[MsgId] = set()
        cur = ev
        while not cur.by_root:
            if cur.via is None or cur.via in seen or cur.via not in by_id:
                out.append(f"{mid} was resolved at {ev.at} without reaching the root")
                break
            seen.add(cur.via)
            cur = by_id[cur.via]
    return out[:5]


def _sequence(trace: SwapTrace, member: int) -> list[MsgId]:
    return [e.ordered.msg_id for e in trace.deliveries[member] if isinstance(e, Delivered)]


def total_order(trace: SwapTrace) -> list[str]:
    out = []
    seqs = {m: _sequence(trace, m) for m in trace.deliveries}
    for a, b in combinations(sorted(seqs), 2):
        common = set(seqs[a]) & set(seqs[b])
        ra = [x for x in seqs[a] if x in common]
        rb = [x for x in seqs[b] if x in common]
        if ra != rb:
            first = next(i for i, (x, y) in enumerate(zip(ra, rb, strict=True)) if x != y)
            out.append(f"members {a} and {b} differ at common position {first}: "
                       f"{ra[first]} vs {rb[first]}")
    return out[:5]


def agreement(trace: SwapTrace) -> list[str]:
    out = []
    for member in trace.final_members:
        events = trace.deliveries[member]
        delivered = Counter(e.ordered.msg_id for e in events if isinstance(e, Delivered))
        named = {e.missing for e in events if isinstance(e, Gap) and e.missing is not None}
        twice = [m for m, c in delivered.items() if c > 1]
        if twice:
            out.append(f"member {member} delivered {twice[:3]} more than once")
        if not trace.data_loss and any(isinstance(e, Gap) for e in events):
            out.append(f"member {member} reported a gap with no loss")
        since = trace.joined_after.get(member, 0)
        for r in trace.multicasts[since:]:
            mid = r.event.ordered.msg_id
            if mid not in delivered and mid not in named and mid not in trace.vanished:
                out.append(f"member {member} neither delivered nor reported {mid}")
                break
    return out[:5]


def predecessor_first(trace: SwapTrace) -> list[str]:
    out = []
    for member, events in trace.deliveries.items():
        position: MsgId | None = trace.start.get(member)
        unknown = False
        """After a gap "one or more missing", the next predecessor is not known."""
        for e in events:
            if isinstance(e, Gap):
                if e.missing is not None and not unknown and e.after != position:
                    out.append(f"member {member}: gap for {e.missing} not after {position}")
                position, unknown = e.missing, e.missing is None
                continue
            pred = e.ordered.pred
            if not unknown and pred != position:
                out.append(f"member {member} delivered {e.ordered.msg_id} after {position}, "
                           f"its predecessor is {pred}")
            position, unknown = e.ordered.msg_id, False
    return out[:5]


def local_changes(trace: SwapTrace) -> list[str]:
    out = []
    for c in trace.changes:
        side = c.after if c.join else c.before
        allowed = {c.node, *side[c.node][0]}
        moved = {n for n in set(c.before) | set(c.after)
                 if c.before.get(n) != c.after.get(n)} - allowed
        out += [f"{'join' if c.join else 'leave'} of {c.node} changed the links of {n}, "
                f"not its neighbour" for n in sorted(moved)]
    return out


CHECKERS = (one_sink, swap_hops, single_sender_quiet, through_root, total_order, agreement,
            predecessor_first, local_changes)


def check(trace: SwapTrace) -> list[str]:
    return [f"{c.__name__}: {v}" for c in CHECKERS for v in c(trace)]
