"""A second daemon started with a live member's node id never wedges the group.

The group refuses it (``duplicate_node_id``, or ``config_mismatch`` when its settings
differ too) and nothing of what the members know of the real daemon changes: its
incarnation is never adopted while the real one is live, so the view changes that
follow (a crash, here) complete as if the impostor had never existed. Both the refused
daemon (``JoinRefused``, local) and the real one (``NodeIdClaimed``) say so. Once the
real daemon is gone, the other one is a restart like any other and is taken in.
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from amcast.protocols.events import JoinRefused, NodeIdClaimed
from amcast.protocols.node_config import NodeConfig
from amcast.protocols.simulation.cluster import Cluster, Workload
from amcast.protocols.simulation.faults import Fault

from tests.membership.test_scenarios import KEY, cluster, events, installs, ok

LOAD = Workload(messages_per_node=150, interval=0.05)
IMPOSTOR = 100


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("claimed", [0, 1, 2])
def test_a_stopped_impostor_leaves_the_next_view_change_unblocked(seed: int,
                                                                   claimed: int) -> None:
    """The sequence an operator met: impostor refused, stopped, then a member killed.
    (Before, its incarnation replaced the real one's: the real member's promises were
    dropped as ``stale_incarnation`` and the view change never completed.)"""
    c = cluster(4, seed=300 + seed, impostors={IMPOSTOR: claimed}, wall_clock=1000.0)
    c.schedule(Fault(1.0, "start", (IMPOSTOR,)))
    c.schedule(Fault(2.5, "crash", (IMPOSTOR,)))
    c.schedule(Fault(4.0, "crash", (3,)))
    ok(c.run(LOAD, max_time=20))
    assert all(installs(c, i)[-1][2] == (0, 1, 2) for i in range(3))
    assert all(c.nodes[i].stats.drops.get("stale_incarnation", 0) == 0 for i in range(3))
    assert any(e.reason == "duplicate_node_id" and e.local
               for e in events(c, IMPOSTOR, JoinRefused))
    claims = events(c, claimed, NodeIdClaimed)
    assert len(claims) == 1 and claims[0].incarnation > claims[0].mine


@pytest.mark.parametrize("seed", range(3))
def test_a_running_impostor_stays_out_while_members_change(seed: int) -> None:
    c = cluster(4, seed=310 + seed, impostors={IMPOSTOR: 1}, wall_clock=1000.0)
    c.schedule(Fault(1.0, "start", (IMPOSTOR,)))
    c.schedule(Fault(3.0, "crash", (3,)))
    c.schedule(Fault(6.0, "restart", (3,)))
    ok(c.run(LOAD, max_time=25))
    assert all(installs(c, i)[-1][2] == (0, 1, 2, 3) for i in range(3))
    assert c.nodes[IMPOSTOR].view is None
    assert all(c.nodes[i].stats.drops.get("refused_incarnation", 0) > 0 for i in (0, 2))


def test_an_impostor_with_other_settings_changes_nothing_either() -> None:
    odd = NodeConfig(group_key=KEY, rule="lex")
    c = cluster(4, seed=321, impostors={IMPOSTOR: 2}, wall_clock=1000.0,
                node_configs={IMPOSTOR: odd})
    c.schedule(Fault(1.0, "start", (IMPOSTOR,)))
    c.schedule(Fault(2.5, "crash", (IMPOSTOR,)))
    c.schedule(Fault(4.0, "crash", (3,)))
    ok(c.run(LOAD, max_time=20))
    assert all(installs(c, i)[-1][2] == (0, 1, 2) for i in range(3))
    assert any(e.reason == "config_mismatch" for e in events(c, IMPOSTOR, JoinRefused))


def test_once_the_real_member_is_gone_the_other_daemon_is_a_restart() -> None:
    c = cluster(4, seed=331, impostors={IMPOSTOR: 2}, wall_clock=1000.0)
    c.schedule(Fault(1.0, "start", (IMPOSTOR,)))
    c.schedule(Fault(3.0, "crash", (2,)))
    c.run(LOAD, max_time=3.0)
    assert c.nodes[IMPOSTOR].view is None
    c.advance(15.0)
    assert all(installs(c, i)[-1][2] == (0, 1, 2, 3) for i in (0, 1, 3))
    assert c.nodes[IMPOSTOR].view is not None and c.nodes[IMPOSTOR].view.nodes == (0, 1, 2, 3)


def _member_incarnations(c: Cluster, nodes: Iterable[int]) -> set[tuple[tuple[int, int], ...]]:
    """The (node, incarnation) pairs of the view each of ``nodes`` holds."""
    return {tuple((m.node, m.incarnation) for m in c.nodes[i].view.members) for i in nodes}


@pytest.mark.parametrize("seed", range(4))
def test_a_member_outside_a_primary_view_is_not_replaced_by_an_impostor(seed: int) -> None:
    """Two of four members away (one crashed, one paused): the live ones hold a view
    without a quorum, and a second daemon with a live member's id starts. The live
    member refuses it (``NodeIdClaimed`` and a ``Refuse``, not only from a primary
    view), so the others never take it for a restart. (Before, they adopted it, formed
    the next view with it once the paused member was back, and refused the live member
    as a duplicate of it for good: live processes ended in different views.)"""
    c = cluster(4, seed=340 + seed, impostors={IMPOSTOR: 1}, wall_clock=1000.0)
    c.schedule(Fault(0.9, "crash", (0,)))
    c.schedule(Fault(1.4, "pause", (2,), duration=1.6))
    c.schedule(Fault(2.6, "start", (IMPOSTOR,)))
    c.schedule(Fault(4.4, "crash", (IMPOSTOR,)))
    ok(c.run(LOAD, max_time=20))
    assert all(installs(c, i)[-1][2] == (1, 2, 3) for i in (1, 2, 3))
    real = c.nodes[1].incarnation
    assert _member_incarnations(c, (1, 2, 3)) == {
        tuple((i, c.nodes[i].incarnation) for i in (1, 2, 3))}
    assert all((1, real) in [(m.node, m.incarnation) for m in v.members]
               for i in (2, 3) for v in [c.nodes[i].view])
    assert any(e.reason == "duplicate_node_id" and e.local
               for e in events(c, IMPOSTOR, JoinRefused))


@pytest.mark.parametrize("seed", range(4))
def test_a_member_cut_off_while_an_impostor_was_taken_in_rejoins_once_it_stops(
        seed: int) -> None:
    """Nodes 0 and 2 are cut off from node 1 (not from the second daemon with node 1's
    id, that reaches both sides); they take that daemon for node 1's restart and form a
    view with it (their two votes decide it). Once that daemon stops and the partition
    heals, the live node 1, an *earlier* incarnation than the one in their view, is
    taken in again. (Before, its JOINs were dropped as stale for good, the later
    incarnation being a member of their view: live processes ended in different
    views.)"""
    c = cluster(3, seed=350 + seed, impostors={IMPOSTOR: 1}, wall_clock=1000.0)
    c.schedule(Fault(2.7, "partition", (), duration=1.4, groups=((0, 2),)))
    c.schedule(Fault(2.95, "start", (IMPOSTOR,)))
    c.schedule(Fault(3.9, "crash", (IMPOSTOR,)))
    ok(c.run(LOAD, max_time=20))
    assert installs(c, IMPOSTOR), "nodes 0 and 2 never took the second daemon in"
    assert all(installs(c, i)[-1][2] == (0, 1, 2) for i in range(3))
    assert _member_incarnations(c, range(3)) == {
        tuple((i, c.nodes[i].incarnation) for i in range(3))}


@pytest.mark.parametrize("seed", range(4))
def test_an_impostors_new_state_never_counts_as_the_members_vote(seed: int) -> None:
    """Node 0 is cut off from node 1, and a second daemon with node 1's id (its state
    new) reaches node 0. Node 0 takes it for node 1's restart, but that daemon's vote
    does not count for the successor of a view that lists node 1 (its state began after
    that view listed the id: it is not the acceptor that node 1 was), and node 0's alone
    is no majority: no view forms with it. (Before, node 0 and that daemon formed one,
    and with node 2 crashed a majority of ids had decided it: had node 1 and node 2 then
    met, they would have formed a second successor of the same view, as membership
    sweep seeds 730509 and 711817 did.) Once it stops and the partition heals, nodes 0
    and 1 go on in a view of their own."""
    c = cluster(3, seed=350 + seed, impostors={IMPOSTOR: 1}, wall_clock=1000.0)
    c.schedule(Fault(0.5, "crash", (2,)))
    c.schedule(Fault(2.7, "partition", (), duration=1.4, groups=((0,),)))
    c.schedule(Fault(2.95, "start", (IMPOSTOR,)))
    c.schedule(Fault(3.9, "crash", (IMPOSTOR,)))
    c.run(LOAD, max_time=3.85)
    # node 0 coordinates rounds with the impostor's promise, and says it did not count
    assert c.nodes[0].quorum.get("not_counted") == [1]
    c.advance(20.0)
    ok(c.result())
    assert not installs(c, IMPOSTOR), "a view formed with the impostor's vote"
    assert "not_counted" not in c.nodes[0].quorum
    assert all(installs(c, i)[-1][2] == (0, 1) for i in (0, 1))
    assert _member_incarnations(c, (0, 1)) == {
        tuple((i, c.nodes[i].incarnation) for i in (0, 1))}


def test_the_real_member_restarted_while_an_impostor_holds_its_id_does_not_count() -> None:
    """Nodes 0 and 2, cut off from node 1, take a second daemon with node 1's id for its
    restart (their view lists that daemon). The real node 1 then restarts from its state
    file, with a later incarnation than that daemon's, and the network splits: node 0
    and the second daemon on one side, node 1 and node 2 on the other. Node 0's side
    decides the next view. Node 2 takes node 1 for the listed member's restart, but
    node 1's state is not that member's (the listed incarnation is none of its lives):
    its vote does not count, and its side decides nothing until the split heals.
    (Counting it, the two sides decided two successors of one view.)"""
    c = cluster(3, seed=361, impostors={IMPOSTOR: 1}, wall_clock=1000.0)
    c.schedule(Fault(2.7, "partition", (), duration=1.4, groups=((0, 2),)))
    c.schedule(Fault(2.95, "start", (IMPOSTOR,)))
    c.schedule(Fault(5.0, "restart", (1,)))
    split = (5.2, 11.2)
    c.schedule(Fault(split[0], "partition", (), duration=split[1] - split[0],
                     groups=((0,), (1, 2))))

    def keep(src: int, dst: int, data: bytes) -> bool:  # the second daemon with node 0
        return not (split[0] <= c.now < split[1]
                    and {src, dst} & {IMPOSTOR} and {src, dst} & {1, 2})

    c.link_filter = keep
    c.schedule(Fault(12.0, "crash", (IMPOSTOR,)))
    ok(c.run(LOAD, max_time=30))
    assert installs(c, IMPOSTOR), "nodes 0 and 2 never took the second daemon in"
    during = [v for v in installs(c, 2) if split[0] < v[0] < split[1]]
    assert all(1 not in members for _, _, members in during), during
    assert all(installs(c, i)[-1][2] == (0, 1, 2) for i in (0, 2))
    assert _member_incarnations(c, (0, 2)) == {
        tuple((i, c.nodes[i].incarnation) for i in range(3))}
