"""Arrow multicast, Figures 1 to 5 of *Ordered Multicast and Distributed Swap* (section
4), the single sender, and the joins and leaves of section 6.2."""

from __future__ import annotations

import pytest
from amcast.protocols.swap import arrow
from amcast.protocols.swap.delivery import DeliveryBuffer
from amcast.protocols.swap.messages import BOTTOM, ArrowSwap, Multicast, Ordered, Send, SwapReply
from amcast.protocols.swap.tree import SpanningTree

U, X, V, W = 0, 1, 2, 3
M1, M2 = (V, 0), (W, 0)


def figure_1() -> tuple[SpanningTree, dict[int, arrow.ArrowNode]]:
    """u is the sink holding ⊥; x sits between u, v and w."""
    tree = SpanningTree([U, X, V, W], [(U, X), (X, V), (X, W)])
    nodes = arrow.initial_nodes(tree, U)
    assert arrow.sinks(nodes) == [U] and nodes[U].value is BOTTOM
    assert (nodes[X].link, nodes[V].link, nodes[W].link) == (U, X, X)
    return tree, nodes


def test_figures_1_to_5() -> None:
    _, nodes = figure_1()
    # Figure 2: v sends m1, on its way to x; v becomes a sink holding id(m1)
    [s1] = nodes[V].swap(0.0, M1, b"m1")
    assert s1 == Send(V, X, ArrowSwap(V, M1, b"m1", 1))
    assert nodes[V].is_sink and nodes[V].value == M1
    # Figure 3: w sends m2, also on its way to x
    [s2] = nodes[W].swap(0.0, M2, b"m2")
    assert s2 == Send(W, X, ArrowSwap(W, M2, b"m2", 1))
    assert arrow.sinks(nodes) == [U, V, W]  # 1 + two requests in flight
    # Figure 4: m1 reaches x first and flips it toward v; m2 follows and is deflected to v
    [f1] = nodes[X].on_datagram(0.1, V, s1.datagram)
    assert f1.dst == U and nodes[X].link == V
    [f2] = nodes[X].on_datagram(0.2, W, s2.datagram)
    assert isinstance(f2, Send) and f2.dst == V and nodes[X].link == W
    # Figure 5: both find their predecessors concurrently and go out at once
    [out1] = nodes[U].on_datagram(0.3, X, f1.datagram)
    [out2] = nodes[V].on_datagram(0.3, X, f2.datagram)
    assert out1 == Multicast(U, Ordered(BOTTOM, M1, b"m1"), 2)
    assert out2 == Multicast(V, Ordered(M1, M2, b"m2"), 2)
    # w ends as the only sink, holding id(m2); the arrows lead to it
    assert arrow.sinks(nodes) == [W] and nodes[W].value == M2
    assert (nodes[U].link, nodes[X].link, nodes[V].link) == (X, W, X)
    # a receiver that gets m2 first holds it until m1
    r = DeliveryBuffer(9)
    assert r.receive(0.4, out2.ordered) == [] and r.waiting == [out2.ordered]
    got = r.receive(0.5, out1.ordered)
    assert [e.ordered.msg_id for e in got] == [M1, M2]  # type: ignore[union-attr]


def test_a_swap_crosses_at_most_the_diameter() -> None:
    tree = SpanningTree.shaped(list(range(9)), "path")
    nodes = arrow.initial_nodes(tree, 0)
    events = nodes[8].swap(0.0, (8, 0))
    while isinstance(events[0], Send):
        s = events[0]
        events = nodes[s.dst].on_datagram(0.0, s.src, s.datagram)  # type: ignore[arg-type]
    assert isinstance(events[0], Multicast) and events[0].hops == tree.diameter() == 8


def test_a_single_sender_needs_no_swap_traffic_after_its_first_message() -> None:
    _, nodes = figure_1()
    first = nodes[V].swap(0.0, (V, 0))
    assert isinstance(first[0], Send)  # travels once to the initial sink...
    # ... but v is a sink from now on: every later swap is local, in flight or not
    for k in range(1, 5):
        [ev] = nodes[V].swap(0.0, (V, k))
        assert ev == Multicast(V, Ordered((V, k - 1), (V, k)), 0)
    # the sender that starts as the sink needs no datagram at all
    _, nodes = figure_1()
    evs = [nodes[U].swap(0.0, (U, k))[0] for k in range(3)]
    assert all(isinstance(e, Multicast) for e in evs)
    assert [e.ordered.pred for e in evs] == [None, (U, 0), (U, 1)]  # type: ignore[union-attr]


def test_join_attaches_a_leaf_pointing_at_its_neighbour() -> None:
    tree, nodes = figure_1()
    j = arrow.join(nodes, tree, 7, W)
    assert j.link == W and tree.neighbours(7) == (W,)
    [s] = j.swap(0.0, (7, 0))
    assert s.dst == W  # type: ignore[union-attr]
    events = [s]
    while isinstance(events[0], Send):
        e = events[0]
        events = nodes[e.dst].on_datagram(0.0, e.src, e.datagram)  # type: ignore[arg-type]
    assert events[0].ordered.pred is BOTTOM and arrow.sinks(nodes) == [7]  # type: ignore[union-attr]


def test_the_sink_leaves_and_hands_its_role_and_value_to_a_neighbour() -> None:
    tree, nodes = figure_1()
    nodes[U].swap(0.0, (U, 0))  # u is the sink holding (0, 0)
    into = arrow.leave(nodes, tree, U)
    assert into == X and arrow.sinks(nodes) == [X] and nodes[X].value == (U, 0)
    assert U not in tree.nodes


def test_an_inner_node_leaves_and_its_neighbours_keep_pointing_at_the_sink() -> None:
    tree, nodes = figure_1()
    into = arrow.leave(nodes, tree, X)  # x points at u: contracted into u
    assert into == U
    assert nodes[V].link == U and nodes[W].link == U and arrow.sinks(nodes) == [U]
    assert set(tree.neighbours(U)) == {V, W}
    # contracted into a neighbour that pointed at it: that neighbour takes x's link
    tree, nodes = figure_1()
    arrow.leave(nodes, tree, X, into=V)
    assert nodes[V].link == U and nodes[W].link == V and arrow.sinks(nodes) == [U]


def test_leave_as_printed_would_leave_no_sink() -> None:
    """The printed rule (link(u) = v, link(v) = u) leaves two nodes pointing at each
    other; the implemented one keeps exactly one sink for every choice of neighbour."""
    for leaver in (U, X, V, W):
        for into in SpanningTree([U, X, V, W], [(U, X), (X, V), (X, W)]).neighbours(leaver):
            tree, nodes = figure_1()
            arrow.leave(nodes, tree, leaver, into=into)
            assert len(arrow.sinks(nodes)) == 1
            sink = arrow.sinks(nodes)[0]
            for n in nodes:  # every node's links lead to the sink
                seen, cur = set(), n
                while nodes[cur].link != cur:
                    assert cur not in seen
                    seen.add(cur)
                    cur = nodes[cur].link
                assert cur == sink


def test_the_last_member_cannot_leave() -> None:
    tree = SpanningTree([5], [])
    nodes = arrow.initial_nodes(tree, 5)
    with pytest.raises(ValueError):
        arrow.leave(nodes, tree, 5)


def test_figures_1_to_5_in_the_reply_variant() -> None:
    """The sink returns the predecessor to the origin, which multicasts <pred, m>."""
    tree = SpanningTree([U, X, V, W], [(U, X), (X, V), (X, W)])
    nodes = arrow.initial_nodes(tree, U, reply=True)
    [s1] = nodes[V].swap(0.0, M1, b"m1")
    [s2] = nodes[W].swap(0.0, M2, b"m2")
    [f1] = nodes[X].on_datagram(0.1, V, s1.datagram)  # type: ignore[union-attr,arg-type]
    [f2] = nodes[X].on_datagram(0.2, W, s2.datagram)  # type: ignore[union-attr,arg-type]
    [r1] = nodes[U].on_datagram(0.3, X, f1.datagram)  # type: ignore[union-attr,arg-type]
    [r2] = nodes[V].on_datagram(0.3, X, f2.datagram)  # type: ignore[union-attr,arg-type]
    assert r1 == Send(U, V, SwapReply(M1, BOTTOM, 2))  # u replies ⊥ to v
    assert r2 == Send(V, W, SwapReply(M2, M1, 2))  # v replies id(m1) to w
    [o1] = nodes[V].on_datagram(0.4, U, r1.datagram)  # type: ignore[union-attr,arg-type]
    [o2] = nodes[W].on_datagram(0.4, V, r2.datagram)  # type: ignore[union-attr,arg-type]
    assert o1 == Multicast(V, Ordered(BOTTOM, M1, b"m1"), 2)
    assert o2 == Multicast(W, Ordered(M1, M2, b"m2"), 2)
    assert arrow.sinks(nodes) == [W] and nodes[W].value == M2
    # the lone sender's own swaps stay local in the reply variant too
    [local] = nodes[W].swap(0.5, (W, 1), b"m3")
    assert local == Multicast(W, Ordered(M2, (W, 1), b"m3"), 0)
