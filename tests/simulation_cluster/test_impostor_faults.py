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
from amcast.protocols.simulation.faults import IMPOSTOR_ENDPOINT, down_at_end
from amcast.protocols.simulation.membership_sweep import (
    membership_point,
    run_membership_sweep,
    seed_outcome,
)

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


# Seeds of the sweep of 2026-12-01 (n 3..8, 40 messages per node, ``--impostor-faults``)
# that ended with live processes in different views, and live senders' messages never
# delivered. Two defects of the duplicate-id handling, both of a member the group could
# not hear from as the second daemon started:
# - 400511 (arrow; the rest, all orderings, alike): two of four members away, the live
#   ones without a quorum; only a member of a primary view refused a daemon with its
#   id, so the others took that one for its restart, formed the next view with it, and
#   refused the live member for good. A member outside a primary view now refuses a
#   later incarnation too, and a member that formed its view with the later one does not
#   take the earlier one's word for it (``MembershipLayer._claimed``, ``_on_refuse``).
# - 402048 (arrow): a member cut off from another while the second daemon, reaching
#   both, started: the other took it for a restart, and once it stopped the live
#   member's JOINs were dropped as stale for good, the later incarnation being a member
#   of its view. An earlier incarnation's JOIN after the later one's silence now takes
#   it in, in the view or not (``MembershipLayer._outlived``).
# - 530009, 540766 (ToTo; sweep of 2026-12-02): a member restarted while the second
#   daemon with a live member's id ran took that one for the member; once it stopped, the
#   live member, which never asks to join (it is in a primary view), was dropped as stale
#   for good, and the restarted member was never taken in. Any datagram of an earlier
#   incarnation after the later one's silence now counts, not only a JOIN.
IMPOSTOR_COUNTEREXAMPLES = (
    ("arrow", 400511), ("arrow", 402048), ("arrow", 402283), ("arrow", 403564),
    ("combining", 410599), ("combining", 410780), ("combining", 411958),
    ("combining", 412124), ("combining", 412160),
    ("hybrid", 422065), ("hybrid", 422177),
    ("toto", 430632), ("toto", 432031), ("toto", 432316), ("toto", 433410),
    ("toto", 433821),
)
RESTART_COUNTEREXAMPLES = (530009, 540766)
"""Found by ``amcast simulate --preset membership --impostor-faults`` (36 messages per
node)."""


@pytest.mark.parametrize(("ordering", "seed"), IMPOSTOR_COUNTEREXAMPLES)
def test_impostor_sweep_counterexamples_hold_every_property(ordering: str, seed: int) -> None:
    outcome = seed_outcome(seed, n_range=(3, 8), messages_per_node=40, ordering=ordering,
                           impostor_faults=True)
    assert outcome.violations == ()


@pytest.mark.parametrize("seed", RESTART_COUNTEREXAMPLES)
def test_a_member_restarted_while_an_impostor_ran_is_taken_in_once_it_stops(
        seed: int) -> None:
    outcome = seed_outcome(seed, n_range=(3, 8), messages_per_node=36, impostor_faults=True)
    assert outcome.violations == ()


@pytest.mark.slow
@pytest.mark.parametrize("ordering", ["arrow", "combining", "hybrid"])
def test_ci_membership_sweep_with_an_impostor_holds_with_the_swap_orderings(
        ordering: str) -> None:
    jobs = min(2, os.cpu_count() or 1)
    report = run_membership_sweep(range(200, 220), n_range=(3, 6), messages_per_node=18,
                                  jobs=jobs, impostor_faults=True, ordering=ordering)
    assert report["ok"], report["notes"][:10]


def test_the_cli_runs_the_membership_sweep_with_an_impostor(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["simulate", "--preset", "membership", "--seeds", "2", "--impostor-faults",
                 "--json", "--n-max", "4", "--messages", "4"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "a second daemon with a member's id per seed" in out["title"]


def test_the_impostor_plan_leaves_a_majority_up() -> None:
    """The member crashed after the impostor stops stays down only where a majority is
    left with those the seed's plan leaves down: losing more is beyond the fault model
    (docs/membership.md: no primary view, the sends held, until one of them starts
    again), not a defect a seed may report. Seed 520593 (n=3) once drew node 0 crashed
    for good by the plan and node 2, paused through the view change, crashed for good
    by the impostor's: node 1's messages were held, and the sweep called them lost."""
    forced = 0
    for seed in range(3000):
        point = membership_point(seed, n_range=(3, 8), impostor_faults=True)
        members_down = down_at_end(point.plan) - {IMPOSTOR_ENDPOINT}
        assert len(members_down) <= (point.n - 1) // 2, (seed, point.plan)
        if point.plan[-1].kind == "start":  # the member crashed after the impostor
            # ... where staying down would have left no majority
            left = down_at_end(point.plan[:-1]) - {IMPOSTOR_ENDPOINT}
            forced += len(left) > (point.n - 1) // 2
    assert forced > 0
    point = membership_point(520593, n_range=(3, 8), impostor_faults=True)
    assert (point.n, point.plan[-1].kind, point.plan[-1].nodes) == (3, "start", (2,))
    outcome = seed_outcome(520593, n_range=(3, 8), messages_per_node=36, ordering="hybrid",
                           impostor_faults=True, cores=("native", "pure", "native"))
    assert outcome.violations == ()


@pytest.mark.parametrize(("seed", "ordering"), [(730509, "toto"), (711817, "combining")])
def test_a_new_state_with_a_members_id_never_decides_a_second_successor(
        seed: int, ordering: str) -> None:
    """Two seeds of the impostor sweep (n = 3) in which, before, two different views
    both succeeded one view: a partition cut every member off from the others, and the
    second daemon (started with the id of one of them, its state new) reached them all.
    With one other member it made a majority of ids and decided a successor; the member
    whose id it had, with the third one, later decided another. The second daemon's
    vote no longer counts for the successor of a view that lists its id at an earlier
    incarnation (``agreement.counted_acceptors``)."""
    point = membership_point(seed, n_range=(3, 8), impostor_faults=True)
    partition = next(f for f in point.plan if f.kind == "partition")
    assert point.claimed is not None and point.n == 3
    assert all((point.claimed, other) in partition.links(range(point.n))
               for other in range(point.n) if other != point.claimed)
    outcome = seed_outcome(seed, n_range=(3, 8), messages_per_node=12, ordering=ordering,
                           impostor_faults=True)
    assert outcome.violations == ()
