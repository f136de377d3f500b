"""The membership sweep with a node that hears nothing but is heard (``--deaf-faults``).

A one-way cut into one node (a host firewall that drops what comes in) for 2 to 30
suspect timeouts, on top of each seed's plan of crashes, restarts, pauses, leaves and
partitions. The others exclude it and, as coordinator, hold it back from view changes
while its JOINs show it did not hear the view history sent to it
(``MembershipLayer._renew_holds``): the sweep checks that this keeps every property,
liveness after the cut included, and counts the views installed while it lasted
(docs/membership.md, *A member that is heard but does not hear*).
"""

from __future__ import annotations

import json
import os

import pytest
from amcast.protocols.simulation.membership_sweep import membership_point, run_membership_sweep

from amcast.cli import main

SEEDS = range(60)
SUSPECT = 0.8


def test_deaf_faults_draw_from_their_own_stream() -> None:
    """The rest of a seed's plan is the same with and without ``--deaf-faults``; what is
    added cuts every link into one node, and only those, for 2 to 30 suspect timeouts."""
    for seed in range(30):
        plain = membership_point(seed)
        deaf = membership_point(seed, deaf_faults=True)
        assert deaf.plan[:-1] == plain.plan
        cut = deaf.plan[-1]
        assert cut.kind == "partition" and cut.one_way
        others, (node,) = cut.groups
        assert cut.links(range(deaf.n)) == {(i, node) for i in others}
        assert 2 * SUSPECT <= cut.duration <= 30 * SUSPECT


@pytest.mark.slow
def test_ci_membership_sweep_with_a_deaf_node_every_property_holds() -> None:
    jobs = min(2, os.cpu_count() or 1)
    report = run_membership_sweep(SEEDS, n_range=(3, 6), messages_per_node=25, jobs=jobs,
                                  deaf_faults=True)
    assert report["ok"], report["notes"][:10]
    assert "a node that hears nothing but is heard per seed" in report["title"]
    # at least the view without it, on every seed whose deaf node was in a view
    assert report["figures"]["views installed while a node was deaf"] >= len(SEEDS) / 2


def test_the_cli_runs_the_membership_sweep_with_a_deaf_node(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # (another preset refuses the flag: READ_BY, tests/simulation_cluster/test_read_batching.py)
    assert main(["simulate", "--preset", "membership", "--seeds", "2", "--deaf-faults",
                 "--json", "--n-max", "4", "--messages", "4"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "a node that hears nothing but is heard per seed" in out["title"]
    assert out["figures"]["faults: partition"] >= 2
