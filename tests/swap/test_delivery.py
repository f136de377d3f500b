"""Deliver m after pred, and total order with gaps (sections 3 and 6.3 of *Ordered
Multicast and Distributed Swap*)."""

from __future__ import annotations

from amcast.protocols.swap.delivery import Delivered, DeliveryBuffer, DeliveryEvent, Gap
from amcast.protocols.swap.messages import BOTTOM, Ordered

M0, M1, M2, M3 = (1, 0), (2, 0), (3, 0), (4, 0)
P0, P1, P2, P3 = Ordered(BOTTOM, M0), Ordered(M0, M1), Ordered(M1, M2), Ordered(M2, M3)


def ids(events: list[DeliveryEvent]) -> list[object]:
    return [e.ordered.msg_id if isinstance(e, Delivered) else ("gap", e.missing)
            for e in events]


def test_every_arrival_order_gives_the_chain() -> None:
    import itertools

    for order in itertools.permutations([P0, P1, P2, P3]):
        b = DeliveryBuffer(0)
        got = [e for o in order for e in b.receive(0.0, o)]
        assert ids(got) == [M0, M1, M2, M3]


def test_duplicates_are_ignored() -> None:
    b = DeliveryBuffer(0)
    assert ids(b.receive(0.0, P0) + b.receive(0.0, P0) + b.receive(0.0, P1)) == [M0, M1]


def test_u_gets_m0_m1_m2_and_v_only_m0_m2_and_is_told_of_the_gap() -> None:
    u, v = DeliveryBuffer(0), DeliveryBuffer(1)
    at_u = [e for o in (P0, P1, P2) for e in u.receive(0.0, o)]
    at_v = v.receive(0.0, P0) + v.receive(0.0, P2)
    assert ids(at_v) == [M0] and v.waiting == [P2]
    # the header of m1 (from its multicaster): the gap is named where it was
    at_v += v.learn_header(1.0, M0, M1)
    assert ids(at_u) == [M0, M1, M2]
    assert ids(at_v) == [M0, ("gap", M1), M2]
    assert at_v[1] == Gap(1, M0, M1, 1.0)
    # m1 turning up after all is too late: its slot was reported as the gap
    assert v.receive(2.0, P1) == [] and ids(v.receive(2.0, P3)) == [M3]


def test_skip_when_nobody_knows_the_missing_header() -> None:
    v = DeliveryBuffer(1)
    v.receive(0.0, P0)
    assert v.receive(0.5, P2) == [] and v.receive(0.6, P3) == []
    assert v.stalled_since() == 0.5
    got = v.skip(3.0)
    assert ids(got) == [("gap", None), M2, M3]
    assert got[0] == Gap(1, M0, None, 3.0)  # "one or more messages missing after m0"
    assert v.skip(4.0) == [] and v.stalled_since() is None


def test_skip_takes_the_lowest_head_so_equal_fragments_give_equal_orders() -> None:
    a, b = DeliveryBuffer(0), DeliveryBuffer(1)
    x, y = Ordered((8, 8), (5, 0)), Ordered((9, 9), (4, 0))  # two fragments, both cut off
    for buffer, order in ((a, (x, y)), (b, (y, x))):
        for o in order:
            buffer.receive(0.0, o)
    got_a = a.skip(1.0) + a.skip(1.0)
    got_b = b.skip(1.0) + b.skip(1.0)
    assert ids(got_a) == ids(got_b) == [("gap", None), (4, 0), ("gap", None), (5, 0)]
    # the order goes on from either fragment's end: a successor of (5, 0) ...
    assert ids(a.receive(2.0, Ordered((5, 0), (6, 0)))) == [(6, 0)]
    # ... or of (4, 0), the end a skip left behind: behind another gap, at every member
    assert ids(b.receive(2.0, Ordered((4, 0), (6, 0)))) == [("gap", None), (6, 0)]


def test_a_late_message_drags_its_successors_out_too() -> None:
    v = DeliveryBuffer(1)
    for o in (P0, P1, P2, P3):
        v.receive(0.0, o)
    late = Ordered(M2, (9, 0))  # claims m2's slot, which m3 fills
    after_late = Ordered((9, 0), (9, 1))
    assert v.receive(2.0, late) == [] and v.receive(2.0, after_late) == []
    assert v.late == 2


def test_a_joiner_starts_where_its_neighbour_is() -> None:
    old = DeliveryBuffer(0)
    old.receive(0.0, P0)
    old.receive(0.0, P1)
    new = DeliveryBuffer(5)
    new.transfer_from(old)
    assert new.receive(0.0, P1) == []  # already behind it
    assert ids(new.receive(0.0, P2)) == [M2]


def test_fifo_skip_keeps_each_origins_ids_in_order() -> None:
    """The view-close skip of a member sending swaps in a row (membership sweep seed
    1360, hybrid): node 7's (7, 7) .. (7, 9) wait behind the lost (5, 6), its (7, 10)
    behind the lost (0, 9) in a fragment whose head (1, 10) is lower than (7, 7)."""
    first = [Ordered((5, 6), (7, 7)), Ordered((7, 7), (6, 10)), Ordered((6, 10), (7, 8))]
    second = [Ordered((0, 9), (1, 10)), Ordered((1, 10), (7, 10)), Ordered((7, 10), (3, 11))]
    lowest_head, fifo = DeliveryBuffer(0), DeliveryBuffer(1)
    for b in (lowest_head, fifo):
        for o in second + first:
            assert b.receive(0.0, o) == []
    got = lowest_head.skip(1.0) + lowest_head.skip(1.0)
    assert ids(got) == [("gap", None), (1, 10), (7, 10), (3, 11),
                        ("gap", None), (7, 7), (6, 10), (7, 8)]  # (7, 10) before (7, 7)
    got = fifo.skip(1.0, fifo=True) + fifo.skip(1.0, fifo=True)
    assert ids(got) == [("gap", None), (7, 7), (6, 10), (7, 8),
                        ("gap", None), (1, 10), (7, 10), (3, 11)]
    assert fifo.skip(1.0, fifo=True) == []


def test_fifo_skip_without_an_order_of_the_fragments_takes_the_lowest_head() -> None:
    b = DeliveryBuffer(0)
    for o in (Ordered((9, 9), (1, 1)), Ordered((1, 1), (2, 2)),
              Ordered((8, 8), (2, 1)), Ordered((2, 1), (1, 2))):
        b.receive(0.0, o)
    assert ids(b.skip(1.0, fifo=True)) == [("gap", None), (1, 1), (2, 2)]
