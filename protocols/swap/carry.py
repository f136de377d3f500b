"""The swap tree carried from view to view: section 6.2's joins and leaves of *Ordered
Multicast and Distributed Swap* applied at a view change of the Node.

Theory of operation. Membership stays a view change (virtual synchrony: the old view
is flushed, the swap object starts the new view at ⊥ as before), but the new view's
*tree* is not built afresh: it is the previous view's tree changed locally.

- A ``CarriedTree`` is a rooted spanning tree (``parent`` per member; the root is the
  arrow's sink at the view's start, the combining root and the hybrid's first member of
  the virtual root) and the hybrid's virtual root R (a connected group holding the root;
  ``(root,)`` in the other modes).
- ``next_tree(prev, members, ...)``: first every member of ``prev`` missing from
  ``members`` (a leave or a crash) is removed, in id order, by section 6.2's leave, an
  edge contraction into a neighbour: a non-root leaver's children move to its parent
  (the arrow's ``link``, the combining parent); a leaving root hands the root (sink)
  role to a neighbour (inside R if it has one there, else its lowest-id child), which
  adopts the other children. Exactly one root remains (the paper's printed arrow leave
  leaves none; see docs/swap.md). A leaver of R is replaced in R by the neighbour that
  took its place when that one was outside R; R then grows back to ``root_group``
  members by the lowest-id nodes adjacent to it (a role change, no tree edge). Then
  every member of ``members`` missing from ``prev`` (a join) attaches, in id order, as a
  leaf (section 6.2's join) of a node chosen from the tree and the shape: the root
  (``star``), the deepest node (``path``), the shallowest node with fewer than
  ``fanout`` children (``balanced``), lowest id on ties. Only the leaver's or joiner's
  neighbours gain or lose a tree edge (``changed_members``).
- Agreement and joiners: the view's coordinator computes the new tree from the tree of
  the view it succeeds and puts it in the view record (``ViewRecord.tree``, ``encode``);
  every member, a joiner included, reads it from the ``Install`` (``decode``). A view
  record without a tree (the first view, ``ViewRecord.agreed``) means ``initial``: the
  configured shape over the sorted member ids, the rule of every view before.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .tree import Shape, SpanningTree


@dataclass(frozen=True, slots=True)
class CarriedTree:
    root: int
    parent: dict[int, int | None]
    """Each member's parent toward ``root`` (the root's is None)."""
    group: tuple[int, ...]
    """The hybrid's virtual root R, sorted (connected, holds ``root``)."""

    @property
    def members(self) -> tuple[int, ...]:
        return tuple(sorted(self.parent))

    def spanning(self) -> SpanningTree:
        return SpanningTree(self.members, [(p, c) for c, p in self.parent.items()
                                           if p is not None])

    def neighbours(self) -> dict[int, frozenset[int]]:
        adj: dict[int, set[int]] = {n: set() for n in self.parent}
        for c, p in self.parent.items():
            if p is not None:
                adj[c].add(p)
                adj[p].add(c)
        return {n: frozenset(s) for n, s in adj.items()}

    def children(self, node: int) -> list[int]:
        return sorted(c for c, p in self.parent.items() if p == node)


def initial(members: Iterable[int], shape: str, fanout: int, root_group: int) -> CarriedTree:
    """The configured shape over the sorted ids (lowest id the root, R its first
    ``root_group`` members): what every view built before the tree was carried."""
    ids = sorted(members)
    tree = SpanningTree.shaped(ids, _shape(shape), fanout)
    parent = tree.parents(ids[0])
    group = tuple(ids[: max(1, min(root_group, len(ids)))])
    return CarriedTree(ids[0], dict(parent), group)


def _shape(shape: str) -> Shape:
    if shape not in ("star", "path", "balanced"):
        raise ValueError(f"unknown shape {shape!r}")
    return shape  # type: ignore[return-value]


def _depths(parent: dict[int, int | None], root: int) -> dict[int, int]:
    kids: dict[int, list[int]] = {n: [] for n in parent}
    for c, p in parent.items():
        if p is not None:
            kids[p].append(c)
    depth = {root: 0}
    queue = deque([root])
    while queue:
        u = queue.popleft()
        for c in kids[u]:
            depth[c] = depth[u] + 1
            queue.append(c)
    return depth


def attach_point(tree: CarriedTree, shape: str, fanout: int) -> int:
    """Where a joiner attaches as a leaf (section 6.2's join), from the tree and shape."""
    if shape == "star":
        return tree.root
    depth = _depths(tree.parent, tree.root)
    if shape == "path":
        return min(depth, key=lambda n: (-depth[n], n))
    counts = {n: 0 for n in tree.parent}
    for p in tree.parent.values():
        if p is not None:
            counts[p] += 1
    open_ = [n for n in tree.parent if counts[n] < max(1, fanout)]
    return min(open_, key=lambda n: (depth[n], n))


def remove(tree: CarriedTree, node: int) -> CarriedTree:
    """Section 6.2's leave of ``node`` (an edge contraction into a neighbour)."""
    parent = dict(tree.parent)
    group = set(tree.group)
    kids = tree.children(node)
    if len(parent) <= 1:
        raise ValueError("the last member cannot leave")
    root = tree.root
    up = parent.pop(node)
    if up is not None:
        into = up
    else:
        inside = [c for c in kids if c in group]
        into = inside[0] if inside else kids[0]
        parent[into] = None
        root = into
    for c in kids:
        if c != into:
            parent[c] = into
    if node in group:
        group.discard(node)
        group.add(into)  # the node that took its place (already in R, or now)
    return CarriedTree(root, parent, tuple(sorted(group)))


def add_leaf(tree: CarriedTree, node: int, shape: str, fanout: int) -> CarriedTree:
    """Section 6.2's join: ``node`` becomes a leaf of ``attach_point``."""
    if node in tree.parent:
        raise ValueError(f"{node} is already in the tree")
    parent = dict(tree.parent)
    parent[node] = attach_point(tree, shape, fanout)
    return CarriedTree(tree.root, parent, tree.group)


def regrow(tree: CarriedTree, root_group: int) -> CarriedTree:
    """R back to ``root_group`` members (or all): the lowest-id nodes adjacent to R join
    it, one at a time (a role change; no tree edge changes)."""
    group = set(tree.group)
    adj = tree.neighbours()
    want = max(1, min(root_group, len(tree.parent)))
    while len(group) < want:
        group.add(min(n for g in group for n in adj[g] if n not in group))
    return CarriedTree(tree.root, tree.parent, tuple(sorted(group)))


def next_tree(prev: CarriedTree | None, members: Iterable[int], shape: str, fanout: int,
              root_group: int) -> CarriedTree:
    """The tree of the view of ``members`` that succeeds the view of ``prev``: leaves
    (in id order), then joins (in id order) as leaves; the initial tree when no member
    of ``prev`` stays."""
    ids = sorted(set(members))
    if prev is None or not set(ids) & set(prev.parent):
        return initial(ids, shape, fanout, root_group)
    tree = prev
    for gone in sorted(set(prev.parent) - set(ids)):
        tree = remove(tree, gone)
    for new in sorted(set(ids) - set(prev.parent)):
        tree = add_leaf(tree, new, shape, fanout)
    return regrow(tree, root_group)


def encode(tree: CarriedTree, members: Sequence[int]) -> tuple[int, ...]:
    """``ViewRecord.tree``: each member's parent in ``members`` order (the root: its own
    id), then R's members."""
    return tuple(n if (p := tree.parent[n]) is None else p for n in members) + tree.group


def decode(members: Sequence[int], ints: Sequence[int]) -> CarriedTree:
    """``encode`` undone; raises ``ValueError`` unless it is a rooted spanning tree of
    ``members`` with a connected R holding the root."""
    n = len(members)
    if len(ints) <= n or len(set(members)) != n:
        raise ValueError("tree: too short")
    parent: dict[int, int | None] = {}
    roots = []
    listed = set(members)
    for m, p in zip(members, ints[:n], strict=True):
        if p == m:
            parent[m] = None
            roots.append(m)
        elif p in listed:
            parent[m] = p
        else:
            raise ValueError(f"tree: parent {p} of {m} is not a member")
    if len(roots) != 1:
        raise ValueError("tree: not exactly one root")
    root = roots[0]
    if len(_depths(parent, root)) != n:
        raise ValueError("tree: not connected")
    group = tuple(ints[n:])
    if (list(group) != sorted(set(group)) or root not in group
            or not set(group) <= set(members)):
        raise ValueError("tree: bad virtual root")
    adj = CarriedTree(root, parent, group).neighbours()
    seen = {root}
    queue = deque([root])
    while queue:
        u = queue.popleft()
        for v in adj[u]:
            if v in group and v not in seen:
                seen.add(v)
                queue.append(v)
    if seen != set(group):
        raise ValueError("tree: virtual root not connected")
    return CarriedTree(root, parent, group)


def changed_members(old: CarriedTree, new: CarriedTree) -> set[int]:
    """Members of both trees whose tree neighbours differ, plus those only in one."""
    a, b = old.neighbours(), new.neighbours()
    return {n for n in set(a) | set(b) if a.get(n) != b.get(n)}


def allowed_changes(old: CarriedTree, new: CarriedTree) -> set[int]:
    """Who may change links at this view change: the leavers and their neighbours in the
    old tree, the joiners and their neighbours in the new one (section 6.2: a join or a
    leave costs in proportion to the node's degree)."""
    a, b = old.neighbours(), new.neighbours()
    out: set[int] = set()
    for gone in set(a) - set(b):
        out |= {gone, *a[gone]}
    for new_node in set(b) - set(a):
        out |= {new_node, *b[new_node]}
    return out


def locality_violations(old: CarriedTree, new: CarriedTree) -> list[str]:
    """Empty when only leavers, joiners and their tree neighbours changed links. (A leave
    contracted into a neighbour v gives v the leaver's other neighbours: all of them were
    the leaver's neighbours. Several leavers next to each other pass the same way.)"""
    extra = changed_members(old, new) - allowed_changes(old, new)
    return [f"member {n} changed tree links though no neighbour joined or left"
            for n in sorted(extra)]
