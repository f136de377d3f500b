"""Every checker catches a planted violation, and the global oracle catches a cycle
through three groups that comparing groups two by two misses."""

from __future__ import annotations

from itertools import combinations

from amcast.protocols.multigroup.checkers import (
    Datagram,
    Multicast,
    check_acyclic,
    check_agreement,
    check_integrity,
    check_participants,
    check_run,
    check_size_minimality,
    check_termination,
    find_cycle,
)

# Three groups of one process each: a (group A), b (group B), c (group C).
A, B, C = 1, 2, 3
M1, M2, M3 = (9, 1), (9, 2), (9, 3)
RING = {
    M1: Multicast(9, frozenset({A, B})),
    M2: Multicast(9, frozenset({B, C})),
    M3: Multicast(9, frozenset({C, A})),
}
CYCLE_LOG = {A: [M3, M1], B: [M1, M2], C: [M2, M3]}
"""m1 < m2 at b, m2 < m3 at c, m3 < m1 at a: a cycle through three groups."""


def pairwise_orders_agree(log: dict[int, list[tuple[int, int]]]) -> bool:
    """The check the global oracle replaces: any two processes order their common
    messages alike."""
    for p, q in combinations(log, 2):
        common = set(log[p]) & set(log[q])
        if [m for m in log[p] if m in common] != [m for m in log[q] if m in common]:
            return False
    return True


def test_three_group_cycle_is_missed_pairwise_and_caught_globally() -> None:
    assert pairwise_orders_agree(CYCLE_LOG)
    cycle = find_cycle(CYCLE_LOG)
    assert cycle is not None and set(cycle) == {M1, M2, M3}
    assert check_acyclic(CYCLE_LOG)
    # every other property holds in that log: only the order is wrong
    assert check_run(CYCLE_LOG, RING, {A, B, C}, []) == check_acyclic(CYCLE_LOG)


def test_acyclic_log_passes() -> None:
    good = {A: [M1, M3], B: [M1, M2], C: [M2, M3]}
    assert find_cycle(good) is None
    assert check_run(good, RING, {A, B, C}, []) == []


def test_two_process_inversion() -> None:
    assert check_acyclic({A: [M1, M3], C: [M3, M1]})


def test_integrity_planted() -> None:
    assert check_integrity({A: [M1, M1]}, RING)  # twice
    assert check_integrity({A: [(7, 7)]}, RING)  # never multicast
    assert check_integrity({A: [M2]}, RING)  # not addressed to a


def test_uniform_agreement_planted() -> None:
    # a crashed process (b) delivered m1; correct a did not
    log = {A: [M3], B: [M1, M2], C: [M2, M3]}
    assert check_agreement(log, RING, {A, C})
    assert not check_agreement({A: [M3, M1], B: [M1, M2], C: [M2, M3]}, RING, {A, C})


def test_termination_planted() -> None:
    multicasts = {M1: Multicast(A, frozenset({A, B}))}
    assert check_termination({A: [M1], B: []}, multicasts, {A, B})
    assert not check_termination({A: [], B: []}, multicasts, {B})  # sender crashed


def test_participant_minimality_planted() -> None:
    ok = [Datagram(9, A, (M1,)), Datagram(A, B, (M1,))]
    assert check_participants(ok, RING) == []
    assert check_participants([Datagram(A, C, (M1,))], RING)  # c is not in Dst(m1)
    assert check_participants([Datagram(C, B, (M2, M1))], RING)  # a gossip naming m1


def test_size_minimality_planted() -> None:
    assert check_size_minimality([(2, 6, 31), (2, 60, 31), (3, 6, 40)]) == []
    assert check_size_minimality([(2, 6, 31), (2, 60, 35)])
