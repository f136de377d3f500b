"""The membership sweep with a second daemon started with a member's node id
(``--impostor-faults``).

On top of each seed's plan, a daemon claiming the id of a member the plan leaves alone
runs for 1 to 10 suspect timeouts and is stopped; half the time another member then
crashes (and mostly restarts): the view change after a refused daemon, which once
wedged a cluster. Every property holds, liveness included: the impostor never changes
what the group knows of the real member (docs/membership.md, 'Joins, restarts,
refusals, reloads').
"""

from __future__ import annotations

import json
import os

import pytest
from amcast.protocols.simulation.faults import IMPOSTOR_ENDPOINT
from amcast.protocols.simulation.membership_sweep import membership_point, run_membership_sweep

from amcast.cli import main

SEEDS = range(40)
SUSPECT = 0.8


def test_impostor_faults_draw_from_their_own_stream() -> None:
    """The rest of a seed's plan is the same with and without ``--impostor-faults``;
    the impostor claims a node the plan leaves alone, starts, and is stopped."""
    crashes = 0
    for seed in range(60):
        plain = membership_point(seed)
        claimed = membership_point(seed, impostor_faults=True)
        assert claimed.plan[:len(plain.plan)] == plain.plan
        extra = claimed.plan[len(plain.plan):]
        if claimed.claimed is None:
            assert not extra
            continue
        touched = {i for f in plain.plan for i in (*f.nodes, *(n for g in f.groups for n in g))}
        assert claimed.claimed not in touched
        start, stop = extra[:2]
        assert (start.kind, stop.kind) == ("start", "crash")
        assert start.nodes == stop.nodes == (IMPOSTOR_ENDPOINT,)
        assert SUSPECT <= stop.at - start.at <= 10 * SUSPECT
        crashes += len(extra) > 2
    assert 10 <= crashes <= 45, crashes


@pytest.mark.slow
def test_ci_membership_sweep_with_an_impostor_every_property_holds() -> None:
    jobs = min(2, os.cpu_count() or 1)
    report = run_membership_sweep(SEEDS, n_range=(3, 6), messages_per_node=18, jobs=jobs,
                                  impostor_faults=True)
    assert report["ok"], report["notes"][:10]
    assert "a second daemon with a member's id per seed" in report["title"]
    # the impostors were heard and refused, not taken in
    assert report["figures"]["datagrams of a daemon refused as a duplicate id"] > 5 * len(SEEDS)


def test_the_cli_runs_the_membership_sweep_with_an_impostor(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["simulate", "--preset", "membership", "--seeds", "2", "--impostor-faults",
                 "--json", "--n-max", "4", "--messages", "4"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "a second daemon with a member's id per seed" in out["title"]
