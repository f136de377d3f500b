"""Random causal DAGs and causally consistent reveal orders, for the property tests.

An execution is a list of sends. Before each send the sender learns messages of other
processors (with a lag, so knowledge is partial): vector clocks keep its knowledge
causally closed. A message acknowledges what its sender learned since its previous
message (compact acks, as on the wire). ``narrow`` DAGs learn from most processors
before each send; ``wide`` ones mostly inside one of two halves (two LANs).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from amcast.protocols.ordering import CausalMessage
from hypothesis import strategies as st


@dataclass(frozen=True)
class Execution:
    n: int
    messages: tuple[CausalMessage, ...]  # in a causal order
    clocks: dict[tuple[int, int], tuple[int, ...]]  # vector clock of each message

    def precedes(self, a: tuple[int, int], b: tuple[int, int]) -> bool:
        """a happened before b (a != b)."""
        return a != b and self.clocks[b][a[0]] >= a[1]


@st.composite
def executions(
    draw: st.DrawFn, *, min_n: int = 3, max_n: int = 12, max_sends: int = 40
) -> Execution:
    n = draw(st.integers(min_n, max_n), label="n")
    wide = draw(st.booleans(), label="wide")
    sends = draw(st.integers(1, max_sends), label="sends")
    sent: list[list[tuple[int, ...]]] = [[] for _ in range(n)]  # per processor: clocks
    known = [[0] * n for _ in range(n)]
    acked = [[0] * n for _ in range(n)]
    messages: list[CausalMessage] = []
    clocks: dict[tuple[int, int], tuple[int, ...]] = {}
    for _ in range(sends):
        p = draw(st.integers(0, n - 1))
        if wide:
            half = range(0, n // 2) if p < n // 2 else range(n // 2, n)
            peers = [q for q in half if q != p]
            far = [q for q in range(n) if q not in half]
            sources = draw(st.lists(st.sampled_from(peers), max_size=len(peers))) if peers else []
            if far and draw(st.integers(0, 4)) == 0:
                sources.append(draw(st.sampled_from(far)))
        else:
            others = [q for q in range(n) if q != p]
            sources = draw(st.lists(st.sampled_from(others), max_size=n))
        for q in sources:
            if not sent[q]:
                continue
            lag = draw(st.integers(0, 3))
            clock = sent[q][max(0, len(sent[q]) - 1 - lag)]
            known[p] = [max(a, b) for a, b in zip(known[p], clock, strict=True)]
        known[p][p] += 1
        seq = known[p][p]
        acks = tuple((q, known[p][q]) for q in range(n) if q != p and known[p][q] > acked[p][q])
        acked[p] = list(known[p])
        ack_only = draw(st.integers(0, 5)) == 0
        clock = tuple(known[p])
        sent[p].append(clock)
        clocks[(p, seq)] = clock
        messages.append(CausalMessage(p, seq, acks, None if ack_only else f"{p}:{seq}"))
    return Execution(n, tuple(messages), clocks)


def reveal_order(execution: Execution, priorities: list[int]) -> list[CausalMessage]:
    """A causally consistent order of all messages: among those whose causal past is
    revealed, the one with the lowest priority comes next (Kahn's algorithm)."""
    msgs = execution.messages
    index = {m.id: i for i, m in enumerate(msgs)}
    preds: list[set[int]] = []
    for m in msgs:
        ps = {index[a] for a in m.acks}
        if m.seq > 1:
            ps.add(index[(m.sender, m.seq - 1)])
        preds.append(ps)
    children: list[list[int]] = [[] for _ in msgs]
    waiting = [len(ps) for ps in preds]
    for i, ps in enumerate(preds):
        for j in ps:
            children[j].append(i)
    ready = [(priorities[i % len(priorities)], i) for i, w in enumerate(waiting) if w == 0]
    heapq.heapify(ready)
    order: list[CausalMessage] = []
    while ready:
        _, i = heapq.heappop(ready)
        order.append(msgs[i])
        for c in children[i]:
            waiting[c] -= 1
            if waiting[c] == 0:
                heapq.heappush(ready, (priorities[c % len(priorities)], c))
    assert len(order) == len(msgs)
    return order
