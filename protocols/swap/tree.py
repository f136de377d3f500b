"""The spanning tree T of sections 4 and 5 of *Ordered Multicast and Distributed Swap*.

Both protocols run over a tree spanning the group: the arrow's links point along its
edges, the combining requests climb its edges toward the root. A tree comes from a
config (explicit edges) or is derived from the member list (``star``, ``path``,
``balanced`` with a fan-out). ``SpanningTree`` answers what the protocols and checkers
need: neighbours, paths, distances, the diameter, the parent map toward a root, and
the local changes of section 6.2 (attach a leaf; remove a node and hand its other
neighbours to one of them, an edge contraction that keeps T a tree).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Literal

Shape = Literal["star", "path", "balanced"]


@dataclass(frozen=True, slots=True)
class TreeConfig:
    """Either explicit ``edges`` or a ``shape`` over ``members`` (the first is the star's
    centre, the path's first node and the balanced tree's root)."""

    members: tuple[int, ...] = ()
    edges: tuple[tuple[int, int], ...] = ()
    shape: Shape = "balanced"
    fanout: int = 2


class SpanningTree:
    def __init__(self, nodes: Iterable[int], edges: Iterable[tuple[int, int]]) -> None:
        self._adj: dict[int, set[int]] = {n: set() for n in nodes}
        for a, b in edges:
            if a == b:
                raise ValueError(f"self-loop at {a}")
            self._adj.setdefault(a, set()).add(b)
            self._adj.setdefault(b, set()).add(a)
        if self._adj and (
            sum(len(s) for s in self._adj.values()) != 2 * (len(self._adj) - 1)
            or len(self._bfs(next(iter(self._adj)))) != len(self._adj)
        ):
            raise ValueError("the edges do not form a spanning tree")

    @classmethod
    def from_config(cls, config: TreeConfig) -> SpanningTree:
        if config.edges:
            nodes = set(config.members) | {n for e in config.edges for n in e}
            return cls(sorted(nodes), config.edges)
        return cls.shaped(config.members, config.shape, config.fanout)

    @classmethod
    def shaped(cls, members: Sequence[int], shape: Shape, fanout: int = 2) -> SpanningTree:
        m = list(members)
        if shape == "star":
            edges = [(m[0], x) for x in m[1:]]
        elif shape == "path":
            edges = list(pairwise(m))
        elif shape == "balanced":
            edges = [(m[(i - 1) // fanout], m[i]) for i in range(1, len(m))]
        else:
            raise ValueError(f"unknown shape {shape!r}")
        return cls(m, edges)

    @property
    def nodes(self) -> tuple[int, ...]:
        return tuple(sorted(self._adj))

    def edges(self) -> list[tuple[int, int]]:
        return sorted((a, b) for a, s in self._adj.items() for b in s if a < b)

    def neighbours(self, node: int) -> tuple[int, ...]:
        return tuple(sorted(self._adj[node]))

    def _bfs(self, start: int) -> dict[int, int | None]:
        parent: dict[int, int | None] = {start: None}
        queue = deque([start])
        while queue:
            u = queue.popleft()
            for v in sorted(self._adj[u]):
                if v not in parent:
                    parent[v] = u
                    queue.append(v)
        return parent

    def parents(self, root: int) -> dict[int, int | None]:
        """Each node's parent on its path to ``root`` (the root's is None)."""
        return self._bfs(root)

    def path(self, a: int, b: int) -> list[int]:
        parent = self._bfs(b)
        out = [a]
        while out[-1] != b:
            nxt = parent[out[-1]]
            assert nxt is not None
            out.append(nxt)
        return out

    def distance(self, a: int, b: int) -> int:
        return len(self.path(a, b)) - 1

    def diameter(self) -> int:
        if len(self._adj) <= 1:
            return 0
        far = max(self._depths(next(iter(self._adj))).items(), key=lambda kv: (kv[1], kv[0]))[0]
        return max(self._depths(far).values())

    def _depths(self, start: int) -> dict[int, int]:
        depth = {start: 0}
        queue = deque([start])
        while queue:
            u = queue.popleft()
            for v in self._adj[u]:
                if v not in depth:
                    depth[v] = depth[u] + 1
                    queue.append(v)
        return depth

    def center(self) -> int:
        """A node minimising the eccentricity (smallest id on ties)."""
        return min(self._adj, key=lambda n: (max(self._depths(n).values()), n))

    def add_leaf(self, node: int, attach_to: int) -> None:
        """Section 6.2's join: ``node`` links itself as a leaf next to ``attach_to``."""
        if node in self._adj:
            raise ValueError(f"{node} is already in the tree")
        if attach_to not in self._adj:
            raise ValueError(f"{attach_to} is not in the tree")
        self._adj[node] = {attach_to}
        self._adj[attach_to].add(node)

    def contract(self, node: int, into: int) -> None:
        """Remove ``node``; its other neighbours become neighbours of ``into`` (one of its
        neighbours): the tree stays a tree and only ``node``'s neighbourhood changes."""
        if into not in self._adj.get(node, ()):
            raise ValueError(f"{into} is not a neighbour of {node}")
        for w in self._adj.pop(node):
            self._adj[w].discard(node)
            if w != into:
                self._adj[w].add(into)
                self._adj[into].add(w)
