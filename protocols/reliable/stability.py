"""Stability: which vertices every member has acknowledged.

Section 1 of the ToTo paper: acks are cumulative per sender (acking ``(x, k)`` acks every
earlier vertex of ``x``) and a sender's vertices are causally chained, so the delta acks
of a vertex applied to its sender's previous full vector give its full ack vector.
``AckMatrix.apply`` does this for each vertex as it is released (in causal order);
``vectors[m][x]`` is then the highest seq of ``x`` that member ``m`` is known to hold
(for ``x == m``: m's latest vertex). Heartbeats also report what their sender holds
(``report``); those reports raise ``held``, never ``vectors`` (they are not DAG edges).
Vertex ``(x, k)`` is stable once ``min_m held[m][x] >= k``: every member holds it, so
nobody will ever nack it. Stable
vertices leave the retransmission buffers, open the sender's window and let ``safe``
deliveries through. A column is recomputed only when its minimum can have moved.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..wire.codec import Vertex


class AckMatrix:
    def __init__(self, members: Sequence[int]) -> None:
        self.members = tuple(members)
        self.vectors: dict[int, dict[int, int]] = {m: dict.fromkeys(members, 0) for m in members}
        """Full ack vector of each member's latest released vertex (the DAG's view)."""
        self.held: dict[int, dict[int, int]] = {m: dict.fromkeys(members, 0) for m in members}
        """What each member is known to hold: its vector, raised by its heartbeats."""
        self._stable: dict[int, int] = dict.fromkeys(members, 0)
        # members whose entry for a column equals the column's stable seq (its minimum)
        self._at_min: dict[int, int] = dict.fromkeys(members, len(self.members))
        self._dirty: set[int] = set()

    def apply(self, v: Vertex) -> None:
        vec = self.vectors[v.origin]
        held = self.held[v.origin]
        for node, seq in v.acks:
            if seq > vec[node]:
                vec[node] = seq
                if seq > held[node]:
                    self._raise(held, node, seq)
        if v.seq > vec[v.origin]:
            vec[v.origin] = v.seq
            if v.seq > held[v.origin]:
                self._raise(held, v.origin, v.seq)

    def report(self, member: int, holds: Iterable[tuple[int, int]]) -> None:
        """``member`` says (in a heartbeat) it holds every vertex up to these seqs."""
        held = self.held[member]
        for node, seq in holds:
            if node in held and seq > held[node]:
                self._raise(held, node, seq)

    def report_one(self, member: int, node: int, seq: int) -> None:
        """``report(member, ((node, seq),))`` without building the tuple."""
        held = self.held[member]
        if node in held and seq > held[node]:
            self._raise(held, node, seq)

    def _raise(self, vec: dict[int, int], node: int, seq: int) -> None:
        """Raise one entry; the column's minimum can only move once no entry sits on it."""
        old = vec[node]
        vec[node] = seq
        if old == self._stable[node]:
            left = self._at_min[node] - 1
            self._at_min[node] = left
            if left == 0:
                self._dirty.add(node)

    def stable(self, node: int) -> int:
        return self._stable[node]

    @property
    def dirty(self) -> bool:
        """A column's minimum may have moved since the last ``refresh``."""
        return bool(self._dirty)

    def refresh(self) -> Iterable[tuple[int, int]]:
        """Recompute the columns whose minimum moved; yield ``(node, stable seq)`` for them.

        A column is recomputed (O(members)) only when every entry that sat on its minimum
        has risen, so the cost is O(members) per advance of the stable seq, not per ack.
        """
        if not self._dirty:
            return ()
        advanced = []
        held, members = self.held, self.members
        for node in self._dirty:
            column = [held[m][node] for m in members]
            low = min(column)
            self._at_min[node] = column.count(low)
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
