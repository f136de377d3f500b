"""Combining multicast, Figures 6 to 9 of *Ordered Multicast and Distributed Swap*
(section 5), root traffic, and the joins and leaves of section 6.2."""

from __future__ import annotations

import pytest
from amcast.protocols.swap import combining
from amcast.protocols.swap.combining import CombiningConfig
from amcast.protocols.swap.delivery import Delivered, DeliveryBuffer
from amcast.protocols.swap.messages import BOTTOM, CombineSwap, Multicast, Ordered, Send
from amcast.protocols.swap.tree import SpanningTree

R, Z, Y, A, B, C = 0, 1, 2, 3, 4, 5
M1, M2, M3 = (A, 0), (B, 0), (C, 0)


def figure_6() -> tuple[SpanningTree, dict[int, combining.CombiningNode]]:
    """Root r; z under r; y and c under z; a and b (sending m1 and m2) under y."""
    tree = SpanningTree(range(6), [(R, Z), (Z, Y), (Z, C), (Y, A), (Y, B)])
    return tree, combining.initial_nodes(tree, R, CombiningConfig(window=0.01))


def test_figures_6_to_9() -> None:
    _, nodes = figure_6()
    # Figure 6: m1, m2 and m3 start toward the root
    # (a node holds even its own request for the window, in case another one comes)
    [s1] = nodes[A].swap(0.0, M1, b"m1") or nodes[A].tick(0.01)
    [s2] = nodes[B].swap(0.0, M2, b"m2") or nodes[B].tick(0.01)
    [s3] = nodes[C].swap(0.0, M3, b"m3") or nodes[C].tick(0.01)
    assert s1 == Send(A, Y, CombineSwap(A, M1, b"m1", M1, 1))
    # Figure 7: m1 and m2 combine at y; m2 goes out at once as m1's successor
    assert nodes[Y].on_datagram(0.1, A, s1.datagram) == []  # type: ignore[union-attr,arg-type]
    assert nodes[Y].on_datagram(0.105, B, s2.datagram) == []  # type: ignore[union-attr,arg-type]
    out2, m1m2 = nodes[Y].tick(0.11)
    assert out2 == Multicast(Y, Ordered(M1, M2, b"m2"), 1, via=M1)
    assert m1m2 == Send(Y, Z, CombineSwap(A, M1, b"m1", M2, 2))  # swap(m1, id(m1), id(m2))
    # Figure 8: m1m2 meets m3 at z; m1 goes out as m3's successor
    nodes[Z].on_datagram(0.15, C, s3.datagram)  # type: ignore[union-attr,arg-type]
    nodes[Z].on_datagram(0.155, Y, m1m2.datagram)  # type: ignore[union-attr,arg-type]
    assert nodes[Z].tick(0.159) == []  # the window is not over
    out1, m3m1m2 = nodes[Z].tick(0.16)
    assert out1 == Multicast(Z, Ordered(M3, M1, b"m1"), 2, via=M3)
    assert m3m1m2 == Send(Z, R, CombineSwap(C, M3, b"m3", M2, 2))
    # Figure 9: at the root m3 follows ⊥, and id(m2) is swapped into value(r)
    [out3] = nodes[R].on_datagram(0.3, Z, m3m1m2.datagram)  # type: ignore[union-attr,arg-type]
    assert out3 == Multicast(R, Ordered(BOTTOM, M3, b"m3"), 2, by_root=True)
    assert nodes[R].value == M2
    # everyone delivers m3, m1, m2 whatever the arrival order
    for arrival in ([out2, out1, out3], [out3, out2, out1], [out1, out3, out2]):
        r = DeliveryBuffer(9)
        got = [e for o in arrival for e in r.receive(1.0, o.ordered)]
        assert [e.ordered.msg_id for e in got if isinstance(e, Delivered)] == [M3, M1, M2]


def test_a_single_sender_still_goes_through_the_root() -> None:
    _, nodes = figure_6()
    hops = []
    for k in range(3):
        events = nodes[A].swap(0.0, (A, k)) + nodes[A].tick(1.0)
        while isinstance(events[-1], Send):
            s = events[-1]
            events = nodes[s.dst].on_datagram(0.0, s.src, s.datagram)  # type: ignore[arg-type]
            events += nodes[s.dst].tick(1.0)
        assert isinstance(events[0], Multicast) and events[0].by_root
        hops.append(events[0].hops)
    assert hops == [3, 3, 3] and nodes[R].value == (A, 2)


def test_the_root_multicasts_its_own_messages_directly() -> None:
    _, nodes = figure_6()
    [ev] = nodes[R].swap(0.0, (R, 0))
    assert ev == Multicast(R, Ordered(BOTTOM, (R, 0)), 0, by_root=True)


def test_join_and_leave() -> None:
    tree, nodes = figure_6()
    j = combining.join(nodes, tree, 7, C)
    assert j.parent == C and j.config.window == 0.01
    assert combining.leave(nodes, tree, Y) == Z  # a and b move up to z
    assert nodes[A].parent == Z and nodes[B].parent == Z
    nodes[R].swap(0.0, (R, 0))
    assert combining.leave(nodes, tree, R) == Z  # the root hands value(r) over
    assert nodes[Z].is_root and nodes[Z].value == (R, 0)
    assert {n for n in nodes if nodes[n].parent == Z} == {A, B, C}


def test_a_node_holding_requests_cannot_leave() -> None:
    tree, nodes = figure_6()
    nodes[Y].on_datagram(0.0, A, CombineSwap(A, M1, b"", M1, 1))
    with pytest.raises(ValueError):
        combining.leave(nodes, tree, Y)
