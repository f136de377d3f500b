"""The CI membership sweep: 200 seeds of full Nodes under process and network faults.

Every seed injects at least one membership event (crash, restart, pause, join, leave or
partition: ``faults.random_plan``), runs one of the four safe ordering rules (lex,
S-ToTo, G-ToTo, GL-ToTo) over a network losing 0 to 20% of the copies, and checks every
property of ``amcast.protocols.simulation.checkers`` (virtual synchrony, total and
causal order within and across views, primary component, nothing lost, liveness). The
long sweep is ``amcast simulate --preset membership --seeds 10000 --jobs N``.
"""

from __future__ import annotations

import dataclasses
import os

import pytest
from amcast.protocols.node_config import NodeConfig
from amcast.protocols.simulation.cluster import Cluster, Workload
from amcast.protocols.simulation.faults import Fault
from amcast.protocols.simulation.membership_sweep import (
    KEY,
    RULES,
    membership_point,
    run_membership_point,
    run_membership_sweep,
    seed_outcome,
)
from amcast.protocols.simulation.network import LinkFaults, NetworkConfig

SEEDS = range(200)
N_RANGE = (3, 6)


def test_the_ci_seeds_cover_every_rule_loss_and_kind_of_fault() -> None:
    points = [membership_point(seed, n_range=N_RANGE) for seed in SEEDS]
    assert {p.rule for p in points} == set(RULES)
    assert min(p.loss for p in points) == 0 and max(p.loss for p in points) == pytest.approx(0.2)
    assert all(p.plan for p in points)  # at least one membership event per seed
    kinds = {f.kind for p in points for f in p.plan}
    assert kinds == {"crash", "restart", "start", "pause", "leave", "partition"}
    assert sum(1 for p in points for f in p.plan if f.kind == "restart") >= 20
    shapes = {(len(f.groups), f.one_way) for p in points for f in p.plan if f.kind == "partition"}
    assert {(1, False), (2, False), (2, True)} <= shapes


@pytest.mark.slow
def test_ci_membership_sweep_200_seeds_every_property_holds() -> None:
    # seeds are independent: one process per core (CI has 2) halves the wall time
    jobs = min(2, os.cpu_count() or 1)
    report = run_membership_sweep(SEEDS, n_range=N_RANGE, messages_per_node=25, jobs=jobs)
    assert report["ok"], report["notes"][:10]
    figures = report["figures"]
    assert figures["seeds"] == 200 and figures["seeds with a crash-restart"] >= 20
    assert figures["distinct views"] > 400


# Seeds of the long sweep (n 3..7, --messages 10) that found defects, kept as tests:
# 10210: a member that missed the view change (and gave its view up) was the lowest node
#   of the new view; its JOINs were taken as stale and nobody answered them (liveness);
# 12613: a member that had released vertices past the decided cut (the deciding quorum
#   did not hear from it) closed its view at the cut and delivered another set than the
#   others (agreement, total order): it now leaves the view and is taken in again.
# 21448: a graceful leaver now closes its last view at the members' cut; its flush
#   delivered safe messages some member of the next view was still repairing, as the
#   members' flushes do, but the safe-stability check exempted only flushes followed by
#   an install (the leaver installs none): the check now knows a leaver's flush too.
# (The CI seeds themselves caught the last defect: before ``MessagesInDoubt`` named the
# own messages the primary component delivered inside the cut and this member never did,
# 19 of them failed ``own_accounting``, seeds 0, 7, 8 and 31 among them.)
LONG_SWEEP_COUNTEREXAMPLES = (10210, 12613, 21448)


@pytest.mark.parametrize("seed", LONG_SWEEP_COUNTEREXAMPLES)
def test_long_sweep_counterexamples_hold_every_property(seed: int) -> None:
    outcome = seed_outcome(seed, n_range=(3, 7), messages_per_node=30)
    assert outcome.violations == ()


# Seeds of the sweep of 2026-11-26 (n 3..8, --messages 12) that the check of own messages
# reported in doubt (``checkers.in_doubt_outcome``, added after real daemons on a one-way
# cut failed it, tests/e2e/test_lossy_links.py) found: a member of the new view that had
# missed the decision closing its own view (the INSTALL was lost, or it was cut off)
# installed the next one with a gap and reported every own message of its old view in
# doubt, though the primary component had delivered them. 310082 and 310257 failed on
# the code before; 310930 (the coordinator itself had missed it), 311086 (the decision
# sent to it was lost at 10% loss), 311174 and 311181 still failed once the coordinator
# sent the decisions it knew before each ACCEPT. Now every member that knows sends it,
# with every ACCEPT, and a member votes once it knows how its own view ended (or after
# a bounded wait).
IN_DOUBT_COUNTEREXAMPLES = (310082, 310257, 310930, 311086, 311174, 311181)


@pytest.mark.parametrize("seed", IN_DOUBT_COUNTEREXAMPLES)
def test_members_that_missed_a_decision_learn_how_their_view_ended(seed: int) -> None:
    outcome = seed_outcome(seed, n_range=(3, 8), messages_per_node=36)
    assert outcome.violations == ()
    # and report nothing of unknown outcome: they learned the cut (they reported these
    # messages as undelivered, of an outcome they did not know, before)
    assert dict(outcome.totals)["outcome unknown"] == 0


def test_a_member_that_could_not_deliver_a_cut_itself_does_not_count_it_delivered() -> None:
    # Seed 402274 (n=3, 10% loss, nodes 1 and 2 restarted): node 0 coordinated view 5
    # (prev 3) and was to deliver view 3 up to its cut, but lacked vertices that only
    # the processes restarted since had; nobody delivered that cut. A first version of
    # the fix above closed node 0's view at that cut anyway when it was taken into view
    # 7 with a gap, and counted its own messages inside it as delivered elsewhere: four
    # lost silently (validity). They are reported of unknown outcome.
    outcome = seed_outcome(402274, n_range=(3, 8), messages_per_node=36)
    assert outcome.violations == ()
    assert dict(outcome.totals)["outcome unknown"] == 4


# heartbeat_interval 0.2 s (instead of 0.1) would halve an idle daemon's CPU, but a
# 2,000-seed sweep with it (2026-11-24) found two seeds whose live processes never
# converged on one view at 10-20% loss (liveness); the default stayed 0.1 s and this one
# was kept as a strict xfail. Since the liveness fixes of 2026-11-26 (a member that gave
# its view up is no primary view to wait for; a member that cannot complete a cut a
# holder voted for votes all the same) it converges. The default stays 0.1 s until a
# full sweep with 0.2 s says otherwise.
def test_slower_heartbeats_converge_at_high_loss_on_a_seed_that_did_not() -> None:
    point = membership_point(31408, n_range=(3, 7), max_loss=0.2)
    result = run_membership_point(point, messages_per_node=30,
                                  settings={"heartbeat_interval": 0.2})
    assert result.ok


# A 2,000-seed sweep (seeds 310000-311999, n 3..8, --messages 12) on 2026-11-26 found
# seed 310001 (n = 3, S-ToTo, 20% loss; node 2 paused, node 1 leaving, then killed and
# restarted mid-flush). View 6 = {0, 1} was decided with a cut that held vertices only
# the killed node 1 had: the votes that decided it came from node 1's restart and the
# excluded node 2, neither of which holds the cut. Node 0, the only live member, could
# never complete the cut, so nobody installed view 6; node 2 still told its client that
# its message inside the cut was delivered (validity). A cut that is not empty now takes
# the vote of a holder (``agreement.needs_holder``): view 6 is dropped and view 8 =
# {0, 1} closes view 3 at node 0's cut.
def test_a_cut_only_acceptors_not_holding_it_voted_for_is_not_decided() -> None:
    outcome = seed_outcome(310001, n_range=(3, 8), messages_per_node=36)
    assert outcome.violations == ()


# The sweep of 2026-11-27 (seeds 35100000-35101999, n 3..8, --messages 12, a deaf node
# per seed) failed seed 35101317 (liveness, and validity: what the stalled members held
# was never delivered). Its plan fails without the deaf node too, on the code before
# this session's change as well: n = 3 at 20% loss; node 1 restarts at 0.50 s and node 2
# crashes for good at 0.74 s, during the view change that takes node 1's new life in.
# Node 2 promised (its promise put vertices into the proposed cut that node 0 lacks) and
# died before it voted; node 1's new life voted, not holding the cut. Node 0, the only
# live member of both views, cannot complete the cut and cannot know that node 2 never
# voted: that vote, with node 1's, would have decided the view, and node 2 may have
# installed it. So the proposal is kept (Paxos), and proposed again and again; nobody
# installs a view. This is the double failure docs/membership.md names: two of three
# members lost their state within one view change, where the fault model allows one.
# Node 0 says so (``ViewChangeBlocked``: view 5 awaits node 2, a health problem of the
# daemon). Once node 2 starts again from its disk, its promise says it never voted, and
# the group goes on.
DOUBLE_FAILURE = 35101317


def test_two_of_three_members_lost_in_one_view_change_stall_without_breaking_safety() -> None:
    point = membership_point(DOUBLE_FAILURE, n_range=(3, 8))
    assert point.n == 3 and [f.kind for f in point.plan[:2]] == ["restart", "crash"]
    stalled = run_membership_point(point, messages_per_node=36)
    assert {k for k, v in stalled.violations.items() if v} == {"liveness", "validity"}
    blocked = stalled.nodes[0].view_change_blocked
    assert blocked is not None and blocked["view"] == 5 and blocked["awaited"] == [2]
    assert blocked["rounds"] > 16 and blocked["blocked_s"] > 10
    node2_back = dataclasses.replace(point, plan=(*point.plan, Fault(10.0, "start", (2,))))
    recovered = run_membership_point(node2_back, messages_per_node=36)
    assert recovered.ok
    assert all(nd.view_change_blocked is None for nd in recovered.nodes.values())


def test_a_blocked_view_change_also_ends_when_the_awaited_member_starts_without_its_disk(
) -> None:
    # the operator's last resort when node 2's state directory is lost too: it starts
    # with an empty one, its promise says it never voted, and the others go on
    point = membership_point(DOUBLE_FAILURE, n_range=(3, 8))
    cluster = Cluster(point.n, seed=point.seed, bootstrap="join",
                      node_config=NodeConfig(group_key=KEY, rule=point.rule),
                      network=NetworkConfig(default=LinkFaults(loss=point.loss,
                                                               duplicate=0.05, reorder=0.1)))
    for fault in point.plan:
        cluster.schedule(fault)
    cluster.run(Workload(messages_per_node=36, interval=0.05), max_time=10.0, settle=0.0)
    assert cluster.nodes[0].view_change_blocked is not None
    del cluster.disk[2]
    cluster.apply(Fault(cluster.now, "start", (2,)))
    cluster.advance(cluster.now + 5.0)
    last = {proc: views[-1] for proc, views in cluster.views.items()
            if proc.life == 1 or proc.node == 0}
    assert {v.members for v in last.values()} == {(0, 1, 2)}
    assert len({v.view for v in last.values()}) == 1
    assert cluster.nodes[0].view_change_blocked is None
