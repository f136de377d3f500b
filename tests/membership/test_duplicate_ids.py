"""A second daemon started with a live member's node id never wedges the group.

The group refuses it (``duplicate_node_id``, or ``config_mismatch`` when its settings
differ too) and nothing of what the members know of the real daemon changes: its
incarnation is never adopted while the real one is live, so the view changes that
follow (a crash, here) complete as if the impostor had never existed. Both the refused
daemon (``JoinRefused``, local) and the real one (``NodeIdClaimed``) say so. Once the
real daemon is gone, the other one is a restart like any other and is taken in.
"""

from __future__ import annotations

import pytest
from amcast.protocols.events import JoinRefused, NodeIdClaimed
from amcast.protocols.node_config import NodeConfig
from amcast.protocols.simulation.cluster import Workload
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
