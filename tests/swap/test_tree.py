"""The spanning tree T shared by the swap protocols."""

from __future__ import annotations

import pytest
from amcast.protocols.swap.tree import SpanningTree, TreeConfig


def test_shapes_from_the_member_list() -> None:
    star = SpanningTree.shaped(list(range(6)), "star")
    path = SpanningTree.shaped(list(range(6)), "path")
    bal = SpanningTree.shaped(list(range(7)), "balanced")
    assert (star.diameter(), path.diameter(), bal.diameter()) == (2, 5, 4)
    assert star.center() == 0 and path.center() == 2 and bal.center() == 0
    assert bal.parents(0)[6] == 2 and path.path(0, 3) == [0, 1, 2, 3]


def test_from_config_with_edges() -> None:
    t = SpanningTree.from_config(TreeConfig(edges=((10, 11), (11, 12))))
    assert t.nodes == (10, 11, 12) and t.distance(10, 12) == 2
    assert SpanningTree.from_config(TreeConfig(members=(3, 4, 5), shape="star")).edges() == [
        (3, 4), (3, 5)]


@pytest.mark.parametrize("edges", [[(0, 1), (1, 2), (2, 0)], [(0, 1)], [(0, 0)]])
def test_not_a_spanning_tree_is_refused(edges: list[tuple[int, int]]) -> None:
    with pytest.raises(ValueError):
        SpanningTree(range(3), edges)


def test_join_and_contract_keep_a_tree() -> None:
    t = SpanningTree.shaped(list(range(5)), "path")
    t.add_leaf(9, 2)
    t.contract(2, 1)
    assert set(t.neighbours(1)) == {0, 3, 9} and 2 not in t.nodes
    SpanningTree(t.nodes, t.edges())  # still a spanning tree
