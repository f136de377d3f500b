"""The seeded sweep: crashes (a minority per group, senders mid-multicast), false
suspicions, loss, duplication and reordering; every run judged by the global oracle,
uniform agreement, termination, integrity and participant minimality."""

from __future__ import annotations

from dataclasses import replace

import pytest
from amcast.protocols.multigroup.scalatom import ScalatomConfig
from amcast.protocols.multigroup.simulation import (
    CONTENTION,
    LinkFaults,
    SweepConfig,
    random_scenario,
    run_scenario,
    sweep,
)


@pytest.mark.slow
def test_three_hundred_seeds_hold_every_property() -> None:
    report = sweep(range(300))
    assert report["failed"] == [], report["violations"]
    assert report["seeds"] == 300 and report["deliveries"] > 10_000


def test_harsh_faults_hold_every_property() -> None:
    harsh = SweepConfig(false_suspicions=20, stable_after=150.0, crash_probability=0.9,
                        partial_multicast_probability=0.5,
                        inter_faults=LinkFaults(loss=0.4, duplicate=0.2, reorder=0.5,
                                                delay=1.0, jitter=2.0, reorder_window=6.0))
    report = sweep(range(1000, 1040), harsh)
    assert report["failed"] == [], report["violations"]


def test_contention_holds_every_property() -> None:
    report = sweep(range(20, 50), CONTENTION)
    assert report["failed"] == [], report["violations"]


def test_the_sweep_exercises_its_faults() -> None:
    crashes = partial = false = slow = 0
    for seed in range(40):
        sc = random_scenario(seed)
        crashes += len(sc.crashes)
        partial += sum(m.crash_after is not None for m in sc.multicasts)
        false += len(sc.false_suspicions)
        slow += sc.slow_node is not None
        for g in sc.federation.groups.values():
            assert 2 * len([p for p in g if p in sc.crashes]) < len(g)
    assert crashes and partial and false and slow


@pytest.mark.parametrize("seed", [2, 9])
def test_the_texts_history_bound_breaks_total_order(seed: int) -> None:
    """PPS(m) from the R-deliveries with a timestamp *lower than* sn(m) (section 4.2's
    wording) leaves out a message with an equal sn ordered first: a cycle."""
    sc = random_scenario(seed)
    assert run_scenario(sc, seed).violations == []
    literal = replace(sc, config=ScalatomConfig(literal_history_bound=True))
    assert any(v.startswith("acyclicity") for v in run_scenario(literal, seed).violations)


def test_potential_predecessors_from_less_than_a_majority_break_total_order() -> None:
    """PPS(m) from this process's own history alone (step 5 waits for a majority): a
    slow member misses a predecessor its majority saw, and delivers out of order."""
    sc = random_scenario(28, CONTENTION)
    assert run_scenario(sc, 28).violations == []
    alone = replace(sc, config=ScalatomConfig(history_quorum=1))
    assert any(v.startswith("acyclicity") for v in run_scenario(alone, 28).violations)
