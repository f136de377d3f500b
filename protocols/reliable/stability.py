"""Stability: which vertices every member has acknowledged.

Section 1 of the ToTo paper: acks are cumulative per sender (acking ``(x, k)`` acks every
earlier vertex of ``x``) and a sender's vertices are causally chained, so the delta acks
of a vertex applied to its sender's previous full vector give its full ack vector.
``AckMatrix.apply`` does this for each vertex as it is released (in causal order);
``vectors[m][x]`` is then the highest seq of ``x`` that member ``m`` is known to hold
(for ``x == m``: m's latest vertex). Vertex ``(x, k)`` is stable once
``min_m vectors[m][x] >= k``: every member holds it, so nobody will ever nack it. Stable
vertices leave the retransmission buffers, open the sender's window and let ``safe``
deliveries through. Only origins whose column changed are recomputed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from protocols.wire.codec import Vertex


class AckMatrix:
    def __init__(self, members: Sequence[int]) -> None:
        self.members = tuple(members)
        self.vectors: dict[int, dict[int, int]] = {m: dict.fromkeys(members, 0) for m in members}
        self._stable: dict[int, int] = dict.fromkeys(members, 0)
        self._dirty: set[int] = set()

    def apply(self, v: Vertex) -> None:
        vec = self.vectors[v.origin]
        dirty = self._dirty
        for node, seq in v.acks:
            if seq > vec[node]:
                vec[node] = seq
                dirty.add(node)
        vec[v.origin] = v.seq
        dirty.add(v.origin)

    def stable(self, node: int) -> int:
        return self._stable[node]

    def refresh(self) -> Iterable[tuple[int, int]]:
        """Recompute changed columns; yield ``(node, stable seq)`` for those that advanced."""
        if not self._dirty:
            return ()
        advanced = []
        vectors, members = self.vectors, self.members
        for node in self._dirty:
            low = min(vectors[m][node] for m in members)
            if low > self._stable[node]:
                self._stable[node] = low
                advanced.append((node, low))
        self._dirty.clear()
        return advanced

    def delta_for(self, me: int, released: dict[int, int]) -> tuple[tuple[int, int], ...]:
        """Acks our next vertex must carry: what we released beyond our previous vertex."""
        mine = self.vectors[me]
        return tuple(
            (node, seq) for node, seq in released.items() if node != me and seq > mine[node]
        )
