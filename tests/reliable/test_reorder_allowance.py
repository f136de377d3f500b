"""Late copies are not losses: the reorder allowance of gaps known only from other
members' acks (``reliable.repair.NackTimers``; the unicast artefact of issue 13)."""

from __future__ import annotations

import random

import pytest
from amcast.protocols.node_config import NodeConfig
from amcast.protocols.reliable.repair import REORDER_HALF_LIFE, Lateness, NackTimers
from amcast.protocols.simulation.cluster import Cluster, Workload
from amcast.protocols.simulation.network import LinkFaults, NetworkConfig
from amcast.protocols.vocabulary import ServiceLevel

KEY = b"simulation-group-key"


def timers(reorder_max: float = 0.02) -> NackTimers:
    return NackTimers(random.Random(1), nack_delay=0.004, nack_retry=0.05,
                      lateness=Lateness(reorder_max))


def late_copies(t: NackTimers, late: float, count: int, start: float = 1.0) -> float:
    """``count`` gaps of node 2 known from acks, each closed ``late`` later by its copy."""
    now = start
    for _ in range(count):
        t.gap_noticed(2, now, direct=False)
        now += late
        t.gap_closed(2, now, late_copy=True)
        now += 0.01
    return now


def test_no_late_copy_no_allowance_so_a_gap_is_nacked_as_before() -> None:
    t = timers()
    assert t.allowance(5.0) == 0.0
    t.gap_noticed(3, 1.0, direct=False)
    assert 1.0 <= t.deadlines[3] <= 1.004


def test_late_copies_raise_the_wait_of_a_gap_known_from_acks_only() -> None:
    t = timers()
    now = late_copies(t, 0.003, 20)
    assert t.lateness.samples == 20
    assert 0.003 <= t.allowance(now) < 0.006  # mean + 4 deviations, the deviation decays
    t.gap_noticed(3, now, direct=False)
    assert t.deadlines[3] >= now + 0.003
    # a gap the origin's own datagram shows is a loss: no allowance
    t.gap_noticed(4, now, direct=True)
    assert t.deadlines[4] <= now + 0.004


def test_the_allowance_is_capped_and_decays_without_late_copies() -> None:
    t = timers(reorder_max=0.005)
    now = late_copies(t, 0.05, 5)
    assert t.allowance(now) == pytest.approx(0.005)
    t2 = timers()
    now = late_copies(t2, 0.003, 10)
    before = t2.allowance(now)
    assert t2.allowance(now + REORDER_HALF_LIFE) == pytest.approx(before / 2)
    assert t2.allowance(now + 20 * REORDER_HALF_LIFE) < 1e-8
    assert timers(reorder_max=0.0).allowance(late_copies(timers(0.0), 0.003, 3)) == 0.0


def test_the_origin_showing_the_gap_cuts_the_allowance_short() -> None:
    t = timers()
    now = late_copies(t, 0.01, 10)
    t.gap_noticed(3, now, direct=False)
    assert t.deadlines[3] > now + 0.01
    t.gap_noticed(3, now + 0.001, direct=True)  # the origin's next datagram: a loss
    assert t.deadlines[3] <= now + 0.005


def test_a_repair_is_no_sample_and_a_closed_gap_cancels_only_a_first_wait() -> None:
    t = timers()
    t.gap_noticed(3, 1.0, direct=False)
    t.gap_closed(3, 1.002, late_copy=False)  # repaired: says nothing of lateness
    assert t.lateness.samples == 0 and 3 not in t.deadlines
    # after our nack, the retry timer survives the gap closing: a gap opening next is
    # not nacked again before nack_retry
    t.gap_noticed(3, 2.0)
    assert t.due(2.01) == [3]
    t.rearm(3, 2.01)
    retry = t.deadlines[3]
    t.gap_closed(3, 2.02, late_copy=True)
    assert t.deadlines[3] == retry and t.lateness.samples == 1
    t.gap_noticed(3, 2.03)
    assert t.deadlines[3] == retry
    # heard another's nack: the postponement stands even if the origin shows the gap
    t.clear(3)
    t.gap_noticed(5, 3.0, direct=False)
    t.heard_nack(5, 3.001)
    t.gap_noticed(5, 3.002, direct=True)
    assert t.deadlines[5] == pytest.approx(3.051)


def slow_link_run(reorder_max: float) -> tuple[int, int, int, bool]:
    """Node 0's copies reach node 3 4 ms late while nodes 1 and 2 ack them within a
    millisecond: node 3 hears of each vertex from their acks first. No datagram is
    lost. (Node 0's data vertices, node 3's nacks, retransmissions, the verdict.)"""
    cfg = NodeConfig(group_key=KEY, nack_reorder_max=reorder_max)
    net = NetworkConfig(default=LinkFaults(delay=0.0005, jitter=0.0001),
                        links={(0, 3): LinkFaults(delay=0.004, jitter=0.0001)})
    c = Cluster(4, seed=7, node_config=cfg, network=net)
    result = c.run(Workload(messages_per_node=300, senders=1, interval=0.005,
                            services=((ServiceLevel.AGREED, 1.0),)), max_time=30.0)
    data = c.nodes[0].stats.datagrams_sent["data"]
    nacks = c.nodes[3].stats.datagrams_sent["nack"]
    resent = sum(node.stats.retransmissions for node in c.nodes.values())
    return data, nacks, resent, result.ok


def test_late_copies_over_a_slow_link_draw_few_repairs_once_measured() -> None:
    # the code before the allowance: 23 nacks and 39 retransmissions for 351 vertices
    data, nacks_off, resent_off, ok = slow_link_run(0.0)
    assert ok and nacks_off >= 15 and resent_off > data // 15, (nacks_off, resent_off)
    data, nacks_on, resent_on, ok = slow_link_run(0.02)
    assert ok and nacks_on * 3 < nacks_off and resent_on * 3 < resent_off
    assert resent_on < data // 25, (resent_on, data)


def test_a_timer_waits_again_while_its_origin_is_still_being_released() -> None:
    t = timers()
    t.gap_noticed(3, 1.0, direct=False, released=10)
    assert t.due(1.01) == [3]
    assert t.still_arriving(3, 12, 1.01)  # 11 and 12 came meanwhile: late, not lost
    assert t.deadlines[3] > 1.01 and t.lateness.waited_again == 1
    assert not t.still_arriving(3, 12, 1.02)  # stuck at 12: nack 13
    t.rearm(3, 1.02, 12)
    assert not t.still_arriving(3, 12, 1.1)  # still stuck after the retry: nack again
