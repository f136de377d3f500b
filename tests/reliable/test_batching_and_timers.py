"""Batching within the budget, fragmentation and reassembly, repair timer suppression."""

from __future__ import annotations

import random

import pytest
from amcast.protocols.errors import ProtocolViolation
from amcast.protocols.reliable.batching import Batcher, Reassembler
from amcast.protocols.reliable.repair import NackTimers, RepairTimers
from amcast.protocols.vocabulary import ServiceLevel
from amcast.protocols.wire.codec import Fragment


def test_batches_share_a_vertex_per_service_and_fragment_what_does_not_fit() -> None:
    b = Batcher()
    for k in range(5):
        b.add(b"a%d" % k, ServiceLevel.AGREED)
    b.add(b"s", ServiceLevel.SAFE)
    big = bytes(range(256)) * 10
    b.add(big, ServiceLevel.CAUSAL)
    assert b.next_vertex(1000) == (ServiceLevel.AGREED, tuple(b"a%d" % k for k in range(5)))
    assert b.next_vertex(1000) == (ServiceLevel.SAFE, (b"s",))
    reasm = Reassembler()
    whole = None
    fragments = 0
    while b:
        service, items = b.next_vertex(1000)
        assert service is ServiceLevel.CAUSAL and len(items) == 1
        assert isinstance(items[0], Fragment) and len(items[0].chunk) <= 1000
        fragments += 1
        whole = reasm.add(7, items[0])
    assert whole == big and fragments == 3 and b.pending_bytes == 0


def test_reassembly_rejects_out_of_order_fragments() -> None:
    reasm = Reassembler()
    assert reasm.add(1, Fragment(10, 0, b"01234")) is None
    with pytest.raises(ProtocolViolation):
        reasm.add(1, Fragment(10, 6, b"6789"))
    assert reasm.buffered_bytes == 0
    assert reasm.add(1, Fragment(3, 0, b"abc")) == b"abc"


def test_nack_suppression_postpones_and_rearms() -> None:
    t = NackTimers(random.Random(0), nack_delay=0.01, nack_retry=0.1)
    t.gap_noticed(3, 1.0)
    first = t.deadlines[3]
    assert 1.0 <= first <= 1.01
    t.gap_noticed(3, 1.005)
    assert t.deadlines[3] == first  # one timer per sender
    t.heard_nack(3, 1.002)
    assert t.deadlines[3] == pytest.approx(1.102)
    assert t.due(1.05) == [] and t.due(1.2) == [3]
    t.rearm(3, 1.2)
    assert 1.3 <= t.next_deadline() <= 1.35
    t.clear(3)
    assert t.next_deadline() is None


def test_repair_timers_prefer_the_origin_and_are_suppressed_by_repairs_heard() -> None:
    rng = random.Random(0)
    for _ in range(100):
        t = RepairTimers(rng, repair_delay=0.004, holdoff=0.02)
        t.nacked((0, 1), 0.0, origin=True)
        t.nacked((5, 1), 0.0, origin=False)
        assert t.pending[(0, 1)] <= 0.001 <= t.pending[(5, 1)] <= 0.004
    t.heard_repair((5, 1), 0.001)
    assert (5, 1) not in t.pending
    t.nacked((5, 1), 0.01, origin=False)  # within the holdoff: the repair is in flight
    assert (5, 1) not in t.pending
    assert t.due(0.01) == [(0, 1)]
    t.nacked((0, 1), 0.015, origin=True)
    assert t.pending == {}
    t.nacked((0, 1), 0.05, origin=True)
    assert (0, 1) in t.pending
