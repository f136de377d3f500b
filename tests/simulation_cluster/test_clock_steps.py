"""The membership sweep with a node whose wall clock is off for a while
(``--clock-faults``).

On top of each seed's plan of crashes, restarts, pauses, leaves and partitions, one
node's host clock steps by 35 to 120 s, ahead or behind (seven seeds in ten), or by 2 to
25 s (within the 30 s replay window), for 2 to 20 suspect timeouts, then back; four
times in ten the node restarts during the step, writing its state and incarnation on
the wrong clock. Beyond the window it and the others refuse each other's datagrams as
``stale``/``future``: it is excluded like a silent member and taken in again once its
clock is right. Every property holds, liveness after the step included (docs/operations.md,
*Sealed datagrams*: whose clock, and by how much).
"""

from __future__ import annotations

import json
import os

import pytest
from amcast.protocols.simulation.membership_sweep import membership_point, run_membership_sweep

from amcast.cli import main

SEEDS = range(40)
SUSPECT = 0.8


def test_clock_faults_draw_from_their_own_stream() -> None:
    """The rest of a seed's plan is the same with and without ``--clock-faults``; what
    is added steps one node's clock, mostly beyond the window, sometimes with a restart
    of that node during the step."""
    beyond = restarted = 0
    for seed in range(60):
        plain = membership_point(seed)
        stepped = membership_point(seed, clock_faults=True)
        extra = stepped.plan[len(plain.plan):]
        assert stepped.plan[:len(plain.plan)] == plain.plan
        step = extra[0]
        assert step.kind == "clock_step" and len(step.nodes) == 1
        assert 2 * SUSPECT <= step.duration <= 20 * SUSPECT
        assert 2.0 <= abs(step.offset) <= 120.0 and not 25.0 < abs(step.offset) < 35.0
        beyond += abs(step.offset) > 30.0
        if len(extra) == 2:
            restart = extra[1]
            assert restart.kind == "restart" and restart.nodes == step.nodes
            assert step.at < restart.at < step.at + step.duration
            restarted += 1
    assert 30 <= beyond <= 55 and 10 <= restarted <= 40, (beyond, restarted)


@pytest.mark.slow
def test_ci_membership_sweep_with_a_clock_step_every_property_holds() -> None:
    jobs = min(2, os.cpu_count() or 1)
    report = run_membership_sweep(SEEDS, n_range=(3, 6), messages_per_node=18, jobs=jobs,
                                  clock_faults=True)
    assert report["ok"], report["notes"][:10]
    assert "a node whose clock is off for a while per seed" in report["title"]
    assert report["figures"]["faults: clock_step"] == len(SEEDS)
    # the steps beyond the window were refused (both ways), not waved through
    assert report["figures"]["datagrams refused for their send time"] > 100 * len(SEEDS)


def test_the_cli_runs_the_membership_sweep_with_a_clock_step(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # (another preset refuses the flag: READ_BY, tests/simulation_cluster/test_read_batching.py)
    assert main(["simulate", "--preset", "membership", "--seeds", "2", "--clock-faults",
                 "--json", "--n-max", "4", "--messages", "4"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "a node whose clock is off for a while per seed" in out["title"]
    assert out["figures"]["faults: clock_step"] == 2
