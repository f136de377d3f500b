"""The consensus on sn(m): failure-free, a crashed coordinator, a false suspicion."""

from __future__ import annotations

from collections import deque

from amcast.protocols.multigroup.consensus import ConsensusInstance
from amcast.protocols.multigroup.messages import Abort, Ack, ConsensusMessage, Estimate

MID = (0, 0)


def run(values: dict[int, int], crashed: set[int] = frozenset(),
        suspicions: dict[int, frozenset[int]] | None = None,
        lift_after: int | None = None) -> tuple[dict[int, int | None], list[ConsensusMessage]]:
    """Deliver every message FIFO; ``suspicions`` apply from the start, and are lifted
    after ``lift_after`` deliveries (the failure detector becoming accurate)."""
    procs = {p: ConsensusInstance(MID, p, sorted(values)) for p in values}
    queue: deque[tuple[int, int, ConsensusMessage]] = deque()
    sent: list[ConsensusMessage] = []

    def push(src: int, step) -> None:  # type: ignore[no-untyped-def]
        for dst, msg in step.sends:
            sent.append(msg)
            queue.append((src, dst, msg))

    for p, inst in procs.items():
        if p in crashed:
            continue
        push(p, inst.suspect((suspicions or {}).get(p, frozenset()) | crashed))
        push(p, inst.start(values[p]))
    n = 0
    while queue:
        src, dst, msg = queue.popleft()
        n += 1
        if n == lift_after:
            for p, inst in procs.items():
                if p not in crashed:
                    push(p, inst.suspect(frozenset(crashed)))
        if dst not in crashed:
            push(dst, procs[dst].receive(src, msg))
    return {p: procs[p].decision for p in procs if p not in crashed}, sent


def test_failure_free_decides_the_first_coordinator_value_with_paper_cost() -> None:
    decisions, sent = run({1: 10, 2: 20, 3: 30, 4: 40})
    assert set(decisions.values()) == {10}
    k = 3
    assert len(sent) == 2 * k + k * k


def test_crashed_coordinator_is_suspected_and_round_two_decides() -> None:
    decisions, sent = run({1: 10, 2: 20, 3: 30}, crashed={1})
    # coordinator 2 of round 2 picks among estimates of the same age the largest
    assert decisions == {2: 30, 3: 30}
    assert any(isinstance(m, Estimate) for m in sent)


def test_false_suspicion_keeps_agreement() -> None:
    # 2 and 3 wrongly suspect coordinator 1, then trust it again
    decisions, sent = run({1: 10, 2: 20, 3: 30, 4: 40, 5: 50},
                          suspicions={2: frozenset({1}), 3: frozenset({1})}, lift_after=3)
    assert len(set(decisions.values())) == 1 and None not in decisions.values()
    assert any(isinstance(m, Ack) and not m.ok for m in sent)  # the suspicions nacked
    assert any(isinstance(m, Abort) for m in sent)
