"""Replayed datagrams in the simulator: captured traffic sent again seconds later (after
a view change), after its sender restarted, and days later, to live members. Each copy
is dropped at the wire layer and counted (``replayed``, ``stale``); nothing is delivered
twice or acted on, and every safety checker stays green."""

from __future__ import annotations

import pytest
from amcast.protocols.simulation.cluster import Cluster, Workload
from amcast.protocols.simulation.faults import Fault

from tests.membership.test_scenarios import cluster, ok

DAY = 86_400.0
LOAD = Workload(messages_per_node=30, interval=0.03)


def capture(c: Cluster, until: float, limit: int = 600) -> list[tuple[int, int, bytes]]:
    captured: list[tuple[int, int, bytes]] = []

    def spy(src: int, dst: int, data: bytes) -> bool:
        if c.now < until and len(captured) < limit:
            captured.append((src, dst, data))
        return True

    c.link_filter = spy
    return captured


def replay(c: Cluster, captured: list[tuple[int, int, bytes]], to: set[int]) -> dict[str, int]:
    """Inject every captured copy addressed to a live member of ``to``; the drops it
    caused, by reason; and check nothing more was delivered."""
    before = dict(c.drops)
    delivered = {i: len(c.logs[i]) for i in c.nodes}
    sent = 0
    for _src, dst, data in captured:
        if dst in to and dst in c.nodes:
            c.inject(dst, data, delay=0.001)
            sent += 1
    assert sent >= 50, sent
    c.advance(c.now + 0.5)
    ok(c.result())
    assert {i: len(c.logs[i]) for i in delivered} == delivered  # nothing delivered again
    caused = {k: c.drops.get(k, 0) - before.get(k, 0) for k in c.drops}
    assert sum(caused.values()) == sent, caused  # every copy dropped and counted
    return {k: v for k, v in caused.items() if v}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_copies_replayed_seconds_later_after_a_view_change_are_dropped_as_replayed(
    seed: int,
) -> None:
    c = cluster(4, seed=seed)
    captured = capture(c, until=1.2)
    c.schedule(Fault(1.5, "crash", (3,)))  # a view change between capture and replay
    c.run(LOAD, max_time=4.0)
    assert c.nodes[0].view is not None and 3 not in c.nodes[0].view.nodes
    caused = replay(c, captured, to={0, 1, 2})
    assert set(caused) == {"replayed"}, caused


def test_copies_of_a_restarted_senders_old_life_are_dropped_as_replayed() -> None:
    c = cluster(3, seed=11)
    captured = capture(c, until=1.0)
    c.schedule(Fault(1.5, "restart", (0,)))
    c.run(LOAD, max_time=4.0)
    assert c.nodes[0].incarnation > 1
    old_life = [(s, d, data) for s, d, data in captured if s == 0]
    assert old_life
    caused = replay(c, old_life, to={1, 2})
    assert set(caused) == {"replayed"}, caused


def test_copies_replayed_days_later_are_dropped_as_stale() -> None:
    c = cluster(3, seed=13)
    captured = capture(c, until=1.0)
    c.run(LOAD, max_time=3.0)
    for node in c.nodes.values():  # two days pass on every member's wall clock
        node.wall_offset += 2 * DAY
    c.advance(c.now + 1.0)  # the cluster goes on with the new time
    caused = replay(c, captured, to={0, 1, 2})
    assert set(caused) == {"stale"}, caused
