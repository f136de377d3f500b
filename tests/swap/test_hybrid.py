"""The hybrid of section 6.1 of *Ordered Multicast and Distributed Swap*: a combining
tree under an arrow virtual root."""

from __future__ import annotations

from amcast.protocols.swap import hybrid
from amcast.protocols.swap.combining import CombiningConfig
from amcast.protocols.swap.hybrid import HybridConfig
from amcast.protocols.swap.messages import BOTTOM, ArrowSwap, CombineSwap, Multicast, Send
from amcast.protocols.swap.tree import SpanningTree


def build() -> dict[int, hybrid.HybridNode]:
    # R = {0, 1, 2} (a path, sink 0); 3 and 4 under 1, 5 under 2
    tree = SpanningTree(range(6), [(0, 1), (1, 2), (1, 3), (1, 4), (2, 5)])
    return hybrid.initial_nodes(tree, HybridConfig((0, 1, 2), 0, CombiningConfig(0.01)))


def test_a_combined_request_enters_the_arrow_at_the_virtual_root() -> None:
    nodes = build()
    assert nodes[3].combining is not None and nodes[3].combining.parent == 1
    assert nodes[2].arrow is not None and nodes[2].arrow.link == 1
    nodes[3].swap(0.0, (3, 0), b"a")
    [s] = nodes[3].tick(0.01)
    assert s == Send(3, 1, CombineSwap(3, (3, 0), b"a", (3, 0), 1))
    # at 1 (in R) the request becomes an arrow swap toward the sink 0
    [a] = nodes[1].on_datagram(0.1, 3, s.datagram)  # type: ignore[union-attr]
    assert a == Send(1, 0, ArrowSwap(3, (3, 0), b"a", 2))  # origin: the message's
    [m] = nodes[0].on_datagram(0.2, 1, a.datagram)  # type: ignore[union-attr]
    assert m == Multicast(0, m.ordered, 2, by_root=True) and m.ordered.pred is BOTTOM
    assert nodes[1].arrow is not None and nodes[1].arrow.is_sink
    assert nodes[1].arrow.value == (3, 0)


def test_the_virtual_root_swaps_in_the_tail_of_a_combined_request() -> None:
    nodes = build()
    nodes[5].swap(0.0, (5, 0))
    nodes[5].on_datagram(0.0, 99, CombineSwap(99, (99, 0), b"", (99, 0), 1))
    out, s = nodes[5].tick(0.01)
    assert isinstance(out, Multicast) and out.ordered.pred == (5, 0)
    nodes[2].on_datagram(0.1, 5, s.datagram)  # type: ignore[union-attr]
    assert nodes[2].arrow is not None and nodes[2].arrow.value == (99, 0)


def test_members_of_the_virtual_root_leave_by_the_arrow_rules() -> None:
    tree = SpanningTree(range(6), [(0, 1), (1, 2), (1, 3), (1, 4), (2, 5)])
    nodes = hybrid.initial_nodes(tree, HybridConfig((0, 1, 2), 0))
    nodes[0].swap(0.0, (0, 0))  # the sink 0 holds (0, 0)
    assert hybrid.leave(nodes, tree, 0) == 1  # the sink hands its role to 1
    assert nodes[1].arrow is not None and nodes[1].arrow.is_sink
    assert nodes[1].arrow.value == (0, 0)
    assert hybrid.leave(nodes, tree, 1) == 2  # 3 and 4 move under 2
    assert nodes[2].arrow is not None and nodes[2].arrow.value == (0, 0)
    assert {c for c in (3, 4) if nodes[c].combining.parent == 2} == {3, 4}  # type: ignore[union-attr]
    # the last member of R hands the virtual root to a child
    assert hybrid.leave(nodes, tree, 2) == 3
    assert nodes[3].arrow is not None and nodes[3].arrow.is_sink
    assert nodes[3].arrow.value == (0, 0)
    assert nodes[4].combining.parent == 3 and nodes[5].combining.parent == 3  # type: ignore[union-attr]
    [m] = nodes[3].swap(1.0, (3, 0))
    assert isinstance(m, Multicast) and m.ordered.pred == (0, 0)
