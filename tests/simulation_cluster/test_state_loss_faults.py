"""The membership sweep with a member that loses its state directory
(``--state-loss-faults``).

On top of each seed's plan, a member the plan does not leave down stops and starts
again with no state file, where the others the plan leaves up still make a majority.
Its vote does not count toward the next view until a view lists it in its new life
(``agreement.counted_acceptors``); every property holds, liveness included, and the
scripted cases show both sides: no view while the others are no majority without it,
and its vote counting once a view lists it (docs/membership.md, 'Whose vote counts').
"""

from __future__ import annotations

import os

import pytest
from amcast.protocols.simulation.cluster import Workload
from amcast.protocols.simulation.faults import Fault, down_at_end
from amcast.protocols.simulation.membership_sweep import (
    membership_point,
    run_membership_sweep,
    seed_outcome,
)

from amcast.cli import main
from tests.membership.test_scenarios import cluster, installs, ok
from tests.simulation_cluster.test_impostor_faults import SEEDS

LOAD = Workload(messages_per_node=150, interval=0.05)


def test_state_loss_faults_draw_from_their_own_stream_and_keep_a_counted_majority() -> None:
    """The rest of a seed's plan is the same with ``--state-loss-faults``; the member
    that loses its state is one the plan brings back, and the others left up (without
    the id a second daemon may have taken) are a majority."""
    lost = 0
    for seed in range(3000):
        plain = membership_point(seed, n_range=(3, 8), impostor_faults=True)
        point = membership_point(seed, n_range=(3, 8), impostor_faults=True,
                                 state_loss_faults=True)
        assert point.plan[:len(plain.plan)] == plain.plan
        extra = point.plan[len(plain.plan):]
        assert len(extra) <= 1
        if not extra:
            continue
        lost += 1
        (fault,) = extra
        assert fault.kind == "lose_state" and len(fault.nodes) == 1
        down = down_at_end(plain.plan) | ({plain.claimed} if plain.claimed is not None
                                           else set())
        assert fault.nodes[0] not in down
        assert len(down | set(fault.nodes)) <= (point.n - 1) // 2
    assert 1000 <= lost <= 2900, lost


def test_a_member_without_its_state_file_does_not_count_until_a_view_lists_it() -> None:
    """Three members; node 2 is down when node 1 loses its state directory. Node 1 is
    taken in again, but its vote cannot decide the successor of a view that lists its
    earlier life: nodes 0 and 1 form no view until node 2 is back. In a group of five,
    the others decide without it, and once a view lists it its vote counts: with two
    of them crashed it makes the majority."""
    c = cluster(3, seed=71, wall_clock=1000.0)
    c.schedule(Fault(1.0, "crash", (2,)))
    c.schedule(Fault(1.2, "lose_state", (1,)))
    c.schedule(Fault(6.0, "start", (2,)))
    ok(c.run(LOAD, max_time=25))
    later = [v for v in installs(c, 0) if v[0] > 1.2]
    assert later and all(t >= 6.0 for t, _, _ in later), later
    assert later[-1][2] == (0, 1, 2)
    assert installs(c, 1, life=1)[-1][2] == (0, 1, 2)

    c = cluster(5, seed=72, wall_clock=1000.0)
    c.schedule(Fault(1.0, "lose_state", (4,)))
    c.schedule(Fault(4.0, "crash", (0,)))
    c.schedule(Fault(4.0, "crash", (1,)))
    ok(c.run(LOAD, max_time=25))
    assert installs(c, 4, life=1)[-1][2] == (2, 3, 4)
    assert all(installs(c, i)[-1][2] == (2, 3, 4) for i in (2, 3))


@pytest.mark.slow
@pytest.mark.parametrize("ordering", ["toto", "arrow", "combining", "hybrid"])
def test_ci_membership_sweep_with_a_lost_state_directory_every_property_holds(
        ordering: str) -> None:
    jobs = min(2, os.cpu_count() or 1)
    report = run_membership_sweep(SEEDS if ordering == "toto" else range(300, 320),
                                  n_range=(3, 6), messages_per_node=18, jobs=jobs,
                                  state_loss_faults=True, ordering=ordering)
    assert report["ok"], report["notes"][:10]
    assert "a member that loses its state directory per seed" in report["title"]
    assert report["figures"]["faults: lose_state"] > 0


def test_the_cli_runs_the_membership_sweep_with_a_lost_state_directory(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["simulate", "--preset", "membership", "--seeds", "2",
                 "--state-loss-faults", "--json", "--n-min", "3", "--n-max", "4",
                 "--messages", "4"]) == 0
    assert "loses its state directory" in capsys.readouterr().out


def test_a_state_begun_after_the_view_never_counts_even_for_an_unlisted_id() -> None:
    """Membership sweep seed 860576 (n = 3, every fault option): view 8 listed nodes 0
    and 2; node 1, outside it, voted with node 2 for its successor, then lost its state
    directory while node 2 was cut off. Its new record, begun after view 8 was decided,
    promised node 0 for view 8's successor and counted (view 8 does not list node 1):
    two views succeeded view 8. Such a record no longer counts, listed or not."""
    outcome = seed_outcome(860576, n_range=(3, 8), messages_per_node=36, disk_faults=True,
                           deaf_faults=True, clock_faults=True, impostor_faults=True,
                           state_loss_faults=True)
    assert outcome.violations == ()
