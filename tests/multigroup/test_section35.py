"""The example of section 3.5 of Scalable Atomic Multicast: g1 = {p1, p2, p3},
g2 = {p4, p5, p6}."""

from __future__ import annotations

from amcast.protocols.multigroup.scalatom import Federation
from amcast.protocols.multigroup.simulation import (
    LinkFaults,
    PlannedMulticast,
    Scenario,
    run_scenario,
)

FED = Federation({1: (1, 2, 3), 2: (4, 5, 6)})
UNIT = LinkFaults(delay=1.0, jitter=0.0)


def test_qualified_majority_example() -> None:
    assert FED.is_qualified_majority((1, 2), {1, 2, 4, 5})
    assert not FED.is_qualified_majority((1, 2), {1, 2, 3, 4})
    assert FED.is_qualified_majority((1,), {1, 2, 3, 4})


def test_multicast_to_both_groups_failure_free() -> None:
    r = run_scenario(Scenario(FED, multicasts=(PlannedMulticast(0.0, 1, (1, 2)),),
                              inter_faults=UNIT, intra_faults=UNIT))
    assert r.violations == []
    assert all(r.deliveries[p] == [(1, 0)] for p in range(1, 7))
    k = 5
    # R-multicast k + k^2, timestamps k(k+1), consensus 2k + k^2, gossip inside groups
    assert r.sent_by_kind == {"Data": k + k * k, "Timestamp": k * (k + 1), "Propose": k,
                              "Ack": k, "Decide": k * k, "Gossip": 2 * 3 * 2}
    steps = {p: r.delivery_times[p][(1, 0)] for p in range(1, 7)}
    # p1 coordinates: it decides after 4 steps, its group peers decide after 5 and
    # complete a majority with p1's gossip; everyone else waits for a peer's gossip
    assert steps == {1: 6.0, 2: 5.0, 3: 5.0, 4: 6.0, 5: 6.0, 6: 6.0}


def test_genuine_multicast_to_one_group_leaves_the_other_silent() -> None:
    fed = Federation({1: (1, 2, 3), 2: (4, 5, 6), 3: (7, 8, 9)})
    r = run_scenario(Scenario(fed, clients=(10,), multicasts=(
        PlannedMulticast(0.0, 10, (1,)), PlannedMulticast(0.5, 4, (2, 3)),
        PlannedMulticast(0.7, 1, (1, 3))), inter_faults=UNIT, intra_faults=UNIT))
    assert r.violations == []
    about_first = [d for d in r.datagrams if (10, 0) in d.about]
    assert {d.src for d in about_first} | {d.dst for d in about_first} == {1, 2, 3, 10}
    assert r.deliveries[10] == []
    assert r.deliveries[7] == r.deliveries[9]
    assert r.deliveries[4] == [(4, 0)]
