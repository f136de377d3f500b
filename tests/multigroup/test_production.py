"""The production protocol (``skeen.py``): Skeen's timestamps over ordered clusters.

Failure-free delays, the seeded sweep under crashes of leaders and followers,
partitions inside clusters, false suspicions, loss and reordering between clusters
(every run judged by the global oracle, uniform agreement, termination, integrity and
participant minimality), and two planted departures from the protocol that the oracle
catches."""

from __future__ import annotations

from dataclasses import replace

import pytest
from amcast.protocols.multigroup.convoy import measure
from amcast.protocols.multigroup.convoy import render as render_convoy
from amcast.protocols.multigroup.scalatom import Federation
from amcast.protocols.multigroup.simulation import (
    CONTENTION,
    PRODUCTION,
    LinkFaults,
    PlannedMulticast,
    Scenario,
    SweepConfig,
    random_scenario,
    run_scenario,
    sweep,
)
from amcast.protocols.multigroup.skeen import ProductionConfig

UNIT = LinkFaults(delay=1.0, jitter=0.0)
FED = Federation({0: (0, 1, 2), 1: (3, 4, 5), 2: (6, 7, 8)})
CLIENT = 9
HARSH = SweepConfig(false_suspicions=20, stable_after=150.0, crash_probability=0.9,
                    partial_multicast_probability=0.5, partition_probability=0.5,
                    inter_faults=LinkFaults(loss=0.4, duplicate=0.2, reorder=0.5,
                                            delay=1.0, jitter=2.0, reorder_window=6.0))


def one(dst: tuple[int, ...], sender: int = CLIENT) -> dict[int, float]:
    r = run_scenario(Scenario(FED, clients=(CLIENT,),
                              multicasts=(PlannedMulticast(0.0, sender, dst),),
                              inter_faults=UNIT, intra_faults=UNIT, protocol="production"))
    assert r.violations == []
    return {p: t for p, per in r.delivery_times.items() for t in per.values()}


def test_three_delays_for_a_global_message_and_no_more_for_a_local_one() -> None:
    glob = one((0, 1, 2))
    assert set(glob) == set(range(9)) and max(glob.values()) == 3.0
    local = one((1,))
    assert set(local) == {3, 4, 5} and max(local.values()) <= max(glob.values())
    # sent by the leader of the only destination cluster: its followers deliver after 1
    # (the leader acknowledges at once), the leader after 2
    assert one((0,), sender=0) == {0: 2.0, 1: 1.0, 2: 1.0}


def test_only_the_destination_clusters_and_the_sender_take_part() -> None:
    r = run_scenario(Scenario(FED, clients=(CLIENT,), multicasts=(
        PlannedMulticast(0.0, CLIENT, (0,)), PlannedMulticast(0.2, 4, (1, 2)),
        PlannedMulticast(0.4, 0, (0, 2))), inter_faults=UNIT, intra_faults=UNIT,
        protocol="production"))
    assert r.violations == []
    ends = {e for d in r.datagrams if (CLIENT, 0) in d.about for e in (d.src, d.dst)}
    assert ends == {0, 1, 2, CLIENT}
    assert r.deliveries[6] == r.deliveries[8] and len(r.deliveries[6]) == 2


def test_the_sweep_holds_every_property() -> None:
    report = sweep(range(150), PRODUCTION, protocol="production")
    assert report["failed"] == [], report["violations"]
    assert report["deliveries"] > 5_000  # type: ignore[operator]


def test_harsh_faults_hold_every_property() -> None:
    report = sweep(range(1000, 1030), HARSH, protocol="production")
    assert report["failed"] == [], report["violations"]


def test_contention_holds_every_property() -> None:
    report = sweep(range(20, 40), replace(CONTENTION, partition_probability=0.3),
                   protocol="production")
    assert report["failed"] == [], report["violations"]


def test_the_sweep_exercises_its_faults() -> None:
    leaders = followers = cut_leaders = views = false = 0
    for seed in range(40):
        sc = random_scenario(seed, PRODUCTION)
        firsts = {g[0] for g in sc.federation.groups.values()}
        leaders += len(set(sc.crashes) & firsts)
        followers += len(set(sc.crashes) - firsts)
        cut_leaders += sum(bool(side & firsts) for side, _, _ in sc.partitions)
        false += len(sc.false_suspicions)
        r = run_scenario(replace(sc, protocol="production"), seed)
        views += r.sent_by_kind["StartView"]
    assert leaders and followers and cut_leaders and false and views


@pytest.mark.parametrize("seed", [31, 46])
def test_commit_without_the_leader_breaks_total_order(seed: int) -> None:
    """Committing on any majority of the own cluster, not waiting for its leader's
    acknowledgement (and its log): the leader may still give a smaller timestamp to a
    message this process does not know yet."""
    sc = replace(random_scenario(seed, replace(CONTENTION, partition_probability=0.3)),
                 protocol="production")
    assert run_scenario(sc, seed).violations == []
    bad = replace(sc, production=ProductionConfig(leader_in_quorum=False))
    assert any(v.startswith("acyclicity") for v in run_scenario(bad, seed).violations)


@pytest.mark.parametrize("seed", [8, 47])
def test_not_raising_the_clock_breaks_total_order(seed: int) -> None:
    """Skeen's rule: a cluster's clock passes the final timestamp of what it acknowledged."""
    sc = replace(random_scenario(seed, PRODUCTION), protocol="production")
    assert run_scenario(sc, seed).violations == []
    bad = replace(sc, production=ProductionConfig(raise_clock=False))
    assert any(v.startswith("acyclicity") for v in run_scenario(bad, seed).violations)


@pytest.mark.slow
def test_two_thousand_seeds_hold_every_property() -> None:
    report = sweep(range(2000), PRODUCTION, protocol="production")
    assert report["failed"] == [], report["violations"]


def test_convoy_local_messages_wait_behind_global_ones() -> None:
    alone = measure(2, 0.0, duration=10.0)
    mixed = measure(2, 0.5, duration=10.0)
    assert alone.local_mean is not None and mixed.local_mean is not None
    assert alone.local_mean < 0.7 < 1.2 < mixed.local_mean
    assert mixed.global_mean is not None and mixed.global_mean < 3.6
    assert "local p99" in render_convoy([alone, mixed])


def test_a_leader_crash_costs_a_view_change() -> None:
    calm = measure(1, 0.0, duration=20.0)
    crash = measure(1, 0.0, duration=20.0, crash_leader_at=10.0)
    assert calm.local_max is not None and crash.local_max is not None
    assert calm.local_max < 1.0 < crash.local_max
