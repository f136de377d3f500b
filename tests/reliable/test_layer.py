"""One view's reliable causal multicast (``ReliableLayer``) on its own, without a Node.

Two or three layers of the same view exchange their ``Datagram`` objects by hand. The
caller's side of the contract is played by ``Peer``: every vertex the layer releases
(``receive``, ``handle_timer``, ``close_at``) or creates (``new_vertex``) is handed to
``on_release``, in order, as ``amcast.protocols.session`` does.
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from amcast.protocols.node_config import NodeConfig
from amcast.protocols.reliable.layer import (
    ReliableCounters,
    ReliableLayer,
    heartbeat_due,
    next_beat,
)
from amcast.protocols.vocabulary import ServiceLevel
from amcast.protocols.wire.codec import Datagram, Kind, Vertex
from amcast.protocols.wire.membership import Availability, HeldVertex

CFG = NodeConfig(insecure=True)
VIEW = 7
MEMBERS = (1, 2, 3)


class Peer:
    def __init__(self, node: int, cfg: NodeConfig = CFG, members: tuple[int, ...] = MEMBERS,
                 ) -> None:
        self.drops: list[tuple[str, str]] = []
        self.counters = ReliableCounters()
        self.layer = ReliableLayer(VIEW, node, members, config=cfg, rng=random.Random(node),
                                   now=0.0, drop=lambda r, d: self.drops.append((r, d)),
                                   counters=self.counters)
        self.released: list[tuple[int, int]] = []

    def _hand_up(self, vertices: list[Vertex], now: float) -> list[Vertex]:
        for v in vertices:
            self.layer.on_release(v, now)
            self.released.append(v.id)
        return vertices

    def send(self, now: float, payload: bytes = b"m",
             service: ServiceLevel = ServiceLevel.AGREED) -> Datagram:
        v = self.layer.new_vertex(service, (payload,), now)
        self._hand_up([v], now)
        (dg,) = self.take(now)
        return dg

    def receive(self, dg: Datagram, now: float) -> list[Vertex]:
        return self._hand_up(self.layer.receive(dg, now), now)

    def timer(self, now: float) -> list[Vertex]:
        return self._hand_up(self.layer.handle_timer(now), now)

    def close_at(self, cut: dict[int, int], now: float) -> list[Vertex]:
        return self._hand_up(self.layer.close_at(cut, now), now)

    def take(self, now: float) -> list[Datagram]:
        return self.layer.take_datagrams(now)


def kinds(dgs: list[Datagram]) -> list[Kind]:
    return [dg.kind for dg in dgs]


def repair(sender: int, *vertices: Vertex) -> Datagram:
    return Datagram(Kind.REPAIR, sender, VIEW, 0, (), vertices)


def test_datagrams_carry_the_view_and_sequence_numbers_start_at_one() -> None:
    a = Peer(1)
    dg = a.send(0.0)
    assert (dg.kind, dg.sender, dg.view, dg.hb_seq) == (Kind.DATA, 1, VIEW, 1)
    assert dg.vertices[0].id == (1, 1)


def test_release_is_causal_whatever_the_arrival_order() -> None:
    a, b, c = Peer(1), Peer(2), Peer(3)
    a1 = a.send(0.0, b"a1")
    assert b.receive(a1, 0.001) == list(a1.vertices)
    b1 = b.send(0.002, b"b1")
    assert b1.vertices[0].acks == ((1, 1),)
    assert c.receive(b1, 0.003) == []  # waits for (1, 1)
    assert c.layer.releaser.held_count == 1
    assert [v.id for v in c.receive(a1, 0.004)] == [(1, 1), (2, 1)]
    assert c.released == [(1, 1), (2, 1)]
    assert c.layer.releaser.held_count == 0


def test_the_caller_hands_released_vertices_to_on_release() -> None:
    a, b, c = Peer(1), Peer(2), Peer(3)
    a1 = a.send(0.0)
    b.receive(a1, 0.0)
    b1, b2 = b.send(0.0), b.send(0.0)
    assert b2.vertices[0].acks == ()  # delta acks: nothing new since b1
    layer = c.layer
    released = layer.receive(a1, 0.0)
    assert layer.store[1] == {}, "the layer stores a vertex only once it is handed up"
    layer.on_release(released[0], 0.0)
    assert layer.store[1] == {1: a1.vertices[0]}
    for dg in (b1, b2):
        (v,) = layer.receive(dg, 0.0)
        layer.on_release(v, 0.0)
        # right after on_release, vectors[origin] is v's full ack vector
        assert layer.acks.vectors[2] == {1: 1, 2: v.seq, 3: 0}
    assert layer.acks.held[3] == {1: 1, 2: 2, 3: 0}, "we hold what we released"
    assert c.counters.vertices_released == 3


def test_duplicates_are_counted_and_not_released_twice() -> None:
    a, c = Peer(1), Peer(3)
    a1 = a.send(0.0)
    assert len(c.receive(a1, 0.0)) == 1
    assert c.receive(a1, 0.0) == []
    a2 = a.send(0.0)
    c.receive(repair(2, a2.vertices[0], a1.vertices[0]), 0.0)
    assert c.counters.duplicates == 2
    assert c.released == [(1, 1), (1, 2)]


def test_a_duplicate_acking_a_non_member_is_only_a_duplicate() -> None:
    """Found by the datagram fuzz target (fuzz/regressions/datagram): a vertex received
    again with an ack naming a node outside the view raised KeyError in the gap check
    (``offer`` returns at the duplicate before it checks the acks)."""
    a, c = Peer(1), Peer(3)
    a1 = a.send(0.0)
    c.receive(a1, 0.0)
    (v,) = a1.vertices
    forged = replace(v, acks=((33, 8),))
    assert c.receive(Datagram(Kind.DATA, 1, VIEW, 1, (), (forged,)), 0.0) == []
    assert c.layer.receive(repair(2, forged), 0.0) == []
    assert c.counters.duplicates == 2
    assert c.released == [(1, 1)] and c.drops == []


def test_a_dropped_datagram_is_nacked_at_the_nack_deadline_and_repaired() -> None:
    a, b, c = Peer(1), Peer(2), Peer(3)
    d1, d2, d3 = (a.send(0.0, bytes([i])) for i in range(3))
    for dg in (d1, d2, d3):
        b.receive(dg, 0.0)
    c.receive(d1, 0.0)
    c.receive(d3, 0.0)  # d2 lost on the way to c
    assert c.released == [(1, 1)]
    deadline = c.layer.next_timer()
    assert deadline is not None and deadline <= CFG.nack_delay
    assert c.take(0.0) == []  # nothing before the nack deadline
    (ack,) = c.timer(CFG.nack_delay)  # c also acknowledges what it received by now
    assert ack.ack_only
    (nack,) = c.take(CFG.nack_delay)  # the nack rides on that datagram
    assert (nack.kind, nack.nacks) == (Kind.ACK_ONLY, ((1, 2, 2),))
    t = CFG.nack_delay
    for peer in (a, b):
        peer.receive(nack, t)
    # the origin answers first (within repair_delay / 4) ...
    a.timer(t + CFG.repair_delay / 4)
    (fix,) = a.take(t + CFG.repair_delay / 4)
    assert fix.kind == Kind.REPAIR and fix.vertices == d2.vertices
    assert a.counters.retransmissions == 1
    # ... and another holder that hears that repair cancels its own
    b.receive(fix, t + CFG.repair_delay / 4)
    b.timer(t + CFG.repair_delay)
    assert Kind.REPAIR not in kinds(b.take(t + CFG.repair_delay))
    assert b.counters.retransmissions == 0 and b.counters.duplicates == 1
    assert [v.id for v in c.receive(fix, t + CFG.repair_delay)] == [(1, 2), (1, 3)]
    assert c.released == [(1, 1), (3, 1), (1, 2), (1, 3)]
    c.timer(1.0)
    assert Kind.NACK not in kinds(c.take(1.0))


def test_an_unrepaired_gap_is_nacked_again_and_a_gap_seen_in_a_heartbeat_too() -> None:
    a, c = Peer(1), Peer(3)
    a.send(0.0)
    d2 = a.send(0.0)
    a.timer(1.0)
    (heartbeat,) = a.take(1.0)
    assert heartbeat.kind == Kind.HEARTBEAT and heartbeat.hb_seq == 2
    c.receive(heartbeat, 1.0)  # both of a's vertices lost: known from the heartbeat only
    c.timer(1.0 + CFG.nack_delay)
    assert [dg.nacks for dg in c.take(1.0 + CFG.nack_delay)] == [((1, 1, 2),)]
    t = 1.0 + CFG.nack_delay + 1.5 * CFG.nack_retry
    c.timer(t)
    assert [dg.nacks for dg in c.take(t) if dg.nacks] == [((1, 1, 2),)]
    c.receive(d2, t)  # the nack range shrinks to what is still missing
    c.timer(t + 1.5 * CFG.nack_retry)
    assert [dg.nacks for dg in c.take(t + 1.5 * CFG.nack_retry) if dg.nacks] == [((1, 1, 1),)]


def test_an_unfrozen_layer_acknowledges_data_with_an_ack_only_vertex() -> None:
    a, b = Peer(1), Peer(2)
    b.send(0.0)  # b sends data of its own: it waits ack_delay for more to ride on
    b.take(0.0)
    b.receive(a.send(0.0), 0.0)
    assert b.layer.next_timer() == CFG.ack_delay
    (v,) = b.timer(CFG.ack_delay)
    assert v.ack_only and v.acks == ((1, 1),)
    assert kinds(b.take(CFG.ack_delay)) == [Kind.ACK_ONLY]


def test_freeze_stops_ack_only_vertices_and_caps_releases() -> None:
    a, b = Peer(1), Peer(2)
    d1, d2 = a.send(0.0), a.send(0.0)
    b.receive(d1, 0.0)
    b.layer.freeze()
    assert b.layer.frozen
    assert b.layer.next_timer() != CFG.ack_delay
    assert b.timer(CFG.ack_delay) == []
    assert b.layer.seq == 0
    assert Kind.ACK_ONLY not in kinds(b.take(CFG.ack_delay))
    # what was released when the member promised is the limit: d2 stays held
    assert b.receive(d2, 0.01) == []
    assert b.released == [(1, 1)]
    assert b.layer.availability(10) == Availability(
        VIEW, ((1, 1), (2, 0), (3, 0)), (HeldVertex(1, 2, ()),))
    b.timer(1.0)  # a frozen member still sends heartbeats (it is alive)
    assert Kind.HEARTBEAT in kinds(b.take(1.0))


def test_close_at_releases_up_to_the_cut_nacks_the_rest_and_refuses_beyond() -> None:
    a, b, c = Peer(1), Peer(2), Peer(3)
    ds = [a.send(0.0, bytes([i])) for i in range(5)]  # (1, 1) .. (1, 5)
    b.receive(ds[0], 0.0)
    b1 = b.send(0.0)
    c.receive(ds[0], 0.0)
    c.receive(ds[2], 0.0)  # held: (1, 2) missing
    c.receive(ds[3], 0.0)  # held, and beyond the cut below
    c.layer.freeze()
    cut = {1: 3, 2: 1, 3: 0}
    assert c.close_at(cut, 0.0) == []
    assert c.layer.releaser.held_count == 1, "held vertices beyond the cut are forgotten"
    assert not c.layer.holds(cut)
    c.receive(ds[4], 0.001)
    assert c.drops == [("beyond_view_cut", "vertex (1, 5)")]
    assert c.layer.availability(10).held == (HeldVertex(1, 3, ()),)
    # what is missing up to the cut is nacked, and nothing beyond it
    c.timer(CFG.nack_delay + 0.001)
    nacks = sorted(r for dg in c.take(CFG.nack_delay + 0.001) for r in dg.nacks)
    assert nacks == [(1, 2, 2), (2, 1, 1)]
    released = c.receive(repair(1, ds[1].vertices[0], ds[3].vertices[0]), 0.01)
    assert [v.id for v in released] == [(1, 2), (1, 3)]
    assert c.drops[-1] == ("beyond_view_cut", "vertex (1, 4)")
    assert [v.id for v in c.receive(b1, 0.01)] == [(2, 1)]
    assert c.layer.holds(cut)
    assert c.released == [(1, 1), (1, 2), (1, 3), (2, 1)]


def test_close_at_releases_held_vertices_that_were_only_capped_by_freeze() -> None:
    a, b = Peer(1), Peer(2)
    d1, d2, d3 = a.send(0.0), a.send(0.0), a.send(0.0)
    b.layer.freeze()
    b.receive(d1, 0.0)
    b.receive(d2, 0.0)
    b.receive(d3, 0.0)
    assert b.released == []
    assert [v.id for v in b.close_at({1: 2, 2: 0, 3: 0}, 0.0)] == [(1, 1), (1, 2)]
    assert b.layer.holds({1: 2, 2: 0, 3: 0})
    assert b.layer.releaser.held_count == 0


def test_availability_lists_released_seqs_and_held_vertices_bounded() -> None:
    a, b, c = Peer(1), Peer(2), Peer(3)
    ds = [a.send(0.0) for _ in range(4)]
    b.receive(ds[0], 0.0)
    b.receive(ds[1], 0.0)
    b1 = b.send(0.0)
    c.receive(ds[0], 0.0)
    for dg in (b1, ds[2], ds[3]):
        c.receive(dg, 0.0)  # b1 waits for (1, 2); (1, 3), (1, 4) wait for (1, 2)
    full = c.layer.availability(10)
    assert full.view_id == VIEW
    assert full.released == ((1, 1), (2, 0), (3, 0))
    assert full.held == (HeldVertex(1, 3, ()), HeldVertex(1, 4, ()),
                         HeldVertex(2, 1, ((1, 2),)))
    assert c.layer.availability(2).held == full.held[:2]
    assert c.layer.availability(0).held == ()


def test_heartbeat_acks_advance_stability_without_touching_the_dag_vectors() -> None:
    cfg = replace(CFG, ack_delay=10.0, quiet_ack_delay=10.0)  # no ack-only vertex
    a, b, c = Peer(1, cfg), Peer(2, cfg), Peer(3, cfg)
    d1 = a.send(0.0)
    for peer in (b, c):
        peer.receive(d1, 0.0)
    heartbeats = {}
    for peer in (b, c):
        peer.timer(cfg.heartbeat_interval)
        (hb,) = peer.take(cfg.heartbeat_interval)
        assert hb.kind == Kind.HEARTBEAT and hb.vertices == ()
        assert hb.acks == ((1, 1), (2, 0), (3, 0))
        heartbeats[peer.layer.node_id] = hb
    acks = a.layer.acks
    assert a.layer.unstable() == 1
    a.receive(heartbeats[2], 0.2)
    assert acks.held[2][1] == 1
    assert acks.vectors[2] == {1: 0, 2: 0, 3: 0}, "a report is not a DAG edge"
    a.layer.collect_garbage()
    assert acks.stable(1) == 0 and a.layer.unstable() == 1
    a.receive(heartbeats[3], 0.2)
    a.layer.collect_garbage()
    assert acks.stable(1) == 1 and a.layer.unstable() == 0
    assert acks.vectors[3] == {1: 0, 2: 0, 3: 0}
    assert a.layer.store[1] == {}, "stable vertices leave the retransmission store"


def test_want_report_sends_a_heartbeat_soon_after_new_releases() -> None:
    cfg = replace(CFG, ack_delay=0.001)
    a, b = Peer(1, cfg), Peer(2, cfg)
    b.receive(a.send(0.0), 0.0)
    b.layer.freeze()  # no ack-only vertex: the report is the only way to say it
    b.layer.want_report(0.0)
    assert b.layer.next_timer() == cfg.ack_delay
    b.timer(cfg.ack_delay)
    (hb,) = b.take(cfg.ack_delay)
    assert hb.kind == Kind.HEARTBEAT and hb.acks == ((1, 1), (2, 0), (3, 0))
    b.layer.want_report(0.01)  # nothing new released since: no report due
    # the next heartbeat: at the first multiple of the interval after the report
    assert b.layer.next_timer() == pytest.approx(cfg.heartbeat_interval)


def test_retire_stops_heartbeats_and_nack_timers_but_still_repairs() -> None:
    a, c = Peer(1), Peer(3)
    d1, d2, d3 = a.send(0.0), a.send(0.0), a.send(0.0)
    c.receive(d3, 0.0)  # a gap: a nack timer is armed
    assert c.layer.next_timer() is not None
    c.layer.retire()
    assert c.layer.next_timer() is None
    c.timer(5.0)
    assert c.take(5.0) == []  # neither nack nor heartbeat
    assert c.receive(d1, 5.0) == [], "a retired layer releases nothing more"
    a.layer.retire()
    a.timer(5.0)
    assert a.take(5.0) == []
    a.receive(Datagram(Kind.NACK, 2, VIEW, 0, ((1, 2, 3),)), 5.01)
    assert a.layer.next_timer() is not None and a.layer.next_timer() <= 5.01 + CFG.repair_delay
    a.timer(5.02)
    fixes = a.take(5.02)
    assert [dg.kind for dg in fixes] == [Kind.REPAIR, Kind.REPAIR]
    assert [dg.vertices for dg in fixes] == [d2.vertices, d3.vertices]
    assert a.take(6.0) == [] and a.layer.next_timer() is None


def test_bad_vertices_and_foreign_datagrams() -> None:
    a, c = Peer(1), Peer(3)
    bad = Vertex(1, 1, ((1, 1),), ServiceLevel.AGREED, 0.0, (b"x",))
    c.receive(Datagram(Kind.DATA, 1, VIEW, 1, (), (bad,)), 0.0)
    assert c.drops == [("self_ack", "vertex (1, 1) acks its own sender")]
    assert c.released == []
    assert c.layer.foreign(Datagram(Kind.HEARTBEAT, 9, VIEW, 0)) == "unknown_sender"
    assert c.layer.foreign(Datagram(Kind.NACK, 1, VIEW, 0, ((9, 1, 1),))) == "unknown_member"
    stranger = Vertex(9, 1, (), ServiceLevel.AGREED, 0.0, (b"x",))
    assert c.layer.foreign(repair(1, stranger)) == "unknown_member"
    assert c.layer.foreign(a.send(0.0)) is None


def test_next_beat_is_the_next_grid_point_at_most_one_interval_on() -> None:
    assert next_beat(0.0, 0.1) == pytest.approx(0.1)
    assert next_beat(0.0377, 0.1) == pytest.approx(0.1)
    assert next_beat(0.3, 0.1) == pytest.approx(0.4)  # 0.3 is 0.30000000000000004 / 0.1
    assert next_beat(3 * 0.1, 0.1) == pytest.approx(0.4)
    assert next_beat(0.2999, 0.1) == pytest.approx(0.3)
    uptime = 2_000_000.3  # a monotonic clock after weeks
    assert next_beat(uptime, 0.1) == pytest.approx(2_000_000.4)
    for t in (0.0, 0.05, 0.099, 12.345, 1e6 + 0.0001):
        assert t < next_beat(t, 0.1) <= t + 0.1 + 1e-6


def test_a_heartbeat_is_due_on_the_grid_half_to_one_and_a_half_intervals_on() -> None:
    assert heartbeat_due(0.2, 0.1) == pytest.approx(0.3)  # idle: exactly one interval
    assert heartbeat_due(0.201, 0.1) == pytest.approx(0.3)  # a timer that fired late
    assert heartbeat_due(0.249, 0.1) == pytest.approx(0.3)
    assert heartbeat_due(0.251, 0.1) == pytest.approx(0.4)  # never within half an interval
    for t in (0.0, 0.05, 0.099, 12.345, 1e6 + 0.0001):
        assert t + 0.05 < heartbeat_due(t, 0.1) <= t + 0.15 + 1e-6


def test_a_member_sending_every_half_interval_sends_no_heartbeat() -> None:
    a, b = Peer(1), Peer(2)
    heartbeats = 0
    for k in range(40):
        now = k * 0.049
        b.receive(a.send(now), now)
        later = now + 0.045  # just before its next send, often past a grid point
        a.timer(later)
        heartbeats += sum(dg.kind == Kind.HEARTBEAT for dg in a.take(later))
    assert heartbeats == 0
    a.timer(39 * 0.049 + 0.15)  # then silent: a heartbeat within one and a half intervals
    assert [dg.kind for dg in a.take(39 * 0.049 + 0.15)] == [Kind.HEARTBEAT]
