"""Members' clocks that disagree, in the simulator (``amcast.protocols.wire.clock``).

Replay protection refuses datagrams whose send time is more than ``replay_window`` (30 s)
away from the receiver's wall clock. A member whose clock is off by more hears nobody
and is heard by nobody, and is excluded like a silent one; every node then names whose
clock is off and by how much (``Node.clock_offsets``, ``PeerClockRefused``). Within the
window nothing changes but the figure. When the clock is set right, the member is taken
in again and the figures follow.
"""

from __future__ import annotations

import pytest
from amcast.protocols.events import PeerClockRefused
from amcast.protocols.simulation.cluster import Cluster, Workload

from tests.membership.test_scenarios import cluster, events, ok

LOAD = Workload(messages_per_node=20, interval=0.02)


def settle(c: Cluster, seconds: float) -> None:
    c.run(LOAD, max_time=c.now + seconds)


def members(c: Cluster, node: int) -> tuple[int, ...]:
    view = c.nodes[node].view
    assert view is not None
    return tuple(view.nodes)


def offsets(c: Cluster, node: int) -> dict[int, tuple[float, bool]]:
    return {peer: (clock.offset_s, clock.refused)
            for peer, clock in c.nodes[node].clock_offsets().items()}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_an_offset_within_the_window_is_measured_and_changes_nothing(seed: int) -> None:
    c = cluster(3, seed=seed)
    settle(c, 2.0)
    assert members(c, 0) == (0, 1, 2)
    c.nodes[2].wall_offset = 5.0  # node 2's clock 5 s ahead
    settle(c, 3.0)
    views = {i: members(c, i) for i in c.nodes}
    assert views == dict.fromkeys(range(3), (0, 1, 2))
    for node in (0, 1):
        offset, refused = offsets(c, node)[2]
        assert not refused and 4.95 < offset <= 5.0, (node, offset)
        near, _ = offsets(c, node)[1 - node]
        assert -0.05 < near <= 0.0, near  # the delay only lowers a sample
    seen = offsets(c, 2)
    assert all(not refused and -5.05 < off <= -4.95 for off, refused in seen.values()), seen
    assert not any(events(c, i, PeerClockRefused) for i in c.nodes)
    assert c.nodes[0].peers()[2]["clock_offset_s"] == offsets(c, 0)[2][0]
    ok(c.result())


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_member_whose_clock_is_off_by_more_than_the_window_is_named(seed: int) -> None:
    c = cluster(3, seed=seed)
    settle(c, 2.0)
    c.nodes[2].wall_offset = 61.0  # beyond replay_window (30 s)
    settle(c, 5.0)
    assert members(c, 0) == members(c, 1) == (0, 1)
    assert not c.nodes[2].primary
    for node in (0, 1):
        offset, refused = offsets(c, node)[2]
        assert refused and 60.9 < offset <= 61.0, (node, offset)
        assert not offsets(c, node)[1 - node][1]
        raised = events(c, node, PeerClockRefused)
        assert [(e.peer, e.window_s) for e in raised] == [(2, 30.0)], raised  # once
        assert 60.9 < raised[0].offset_s <= 61.0
        peer = c.nodes[node].peers()[2]
        assert peer["clock_refused"] is True and not peer["alive"]
    seen = offsets(c, 2)
    assert set(seen) == {0, 1} and all(refused and -61.1 < off < -60.9
                                       for off, refused in seen.values()), seen
    assert sorted(e.peer for e in events(c, 2, PeerClockRefused)) == [0, 1]
    assert c.drops.get("future", 0) > 0 and c.drops.get("stale", 0) > 0

    c.nodes[2].wall_offset = 0.0  # the clock is set right: it is taken in again
    settle(c, 5.0)
    assert {i: members(c, i) for i in c.nodes} == dict.fromkeys(range(3), (0, 1, 2))
    for node in c.nodes:
        assert all(not refused and abs(off) < 0.05
                   for off, refused in offsets(c, node).values()), (node, offsets(c, node))
    ok(c.result())
