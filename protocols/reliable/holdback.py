"""Causal hold-back across service levels: a ``causal`` vertex never overtakes its past.

The causal layer releases vertices in causal order (section 1 of the ToTo paper), but
``agreed``/``safe`` vertices reach applications only when the total-order engine
(sections 3-5) and, for ``safe``, stability let them through, while ``causal`` ones could
go at once. A ``causal`` vertex whose causal past holds an ordered vertex not yet
delivered therefore waits here, so every application sees each message after everything
in its causal past that it receives too, whatever the service levels.

The causal past of a vertex ``v`` of origin ``o`` is, per member ``j``, every vertex of
``j`` up to ``v``'s full ack vector entry (``AckMatrix.vectors[o]`` right after ``v``
was applied; the vector is causally closed because ``o`` acknowledges only what it had
released), and ``o``'s own vertices before ``v``. Per member we keep the sequence
numbers of ordered vertices released but not yet delivered; the engine and the safe
hold-back deliver one member's vertices in sequence order, so only the lowest matters:
``v`` is blocked by ``j`` while that lowest pending seq is within ``v``'s past. Ordered
vertices released later have higher seqs than anything in ``v``'s past (their past was
released first), so the blockers found at release time are the only ones.

``ready()`` is called after every ordered delivery, before the next one, and releases
held vertices in causal-release order; a held vertex's successors are blocked by at
least the same members, so causal order among ``causal`` vertices is kept too.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence

from ..wire.codec import Vertex


class CausalHoldback:
    def __init__(self, members: Sequence[int]) -> None:
        self._pending: dict[int, deque[int]] = {m: deque() for m in members}
        self._busy: set[int] = set()
        self._held: deque[tuple[Vertex, tuple[tuple[int, int], ...]]] = deque()

    @property
    def held_count(self) -> int:
        return len(self._held)

    def ordered_released(self, origin: int, seq: int) -> None:
        """An ``agreed``/``safe`` vertex went up to the total-order engine."""
        self._pending[origin].append(seq)
        self._busy.add(origin)

    def ordered_delivered(self, origin: int, seq: int) -> None:
        """An ordered vertex reached applications (always the origin's lowest pending)."""
        pending = self._pending[origin]
        if pending and pending[0] == seq:
            pending.popleft()
        else:  # not expected: the engine delivers one origin's vertices in seq order
            pending.remove(seq)
        if not pending:
            self._busy.discard(origin)

    def offer(self, v: Vertex, vector: Mapping[int, int]) -> bool:
        """A ``causal`` vertex was released; True if it may be delivered now, else held."""
        if not self._busy:
            return True
        blockers = []
        for node in self._busy:
            limit = v.seq - 1 if node == v.origin else vector[node]
            if self._pending[node][0] <= limit:
                blockers.append((node, limit))
        if not blockers:
            return True
        self._held.append((v, tuple(blockers)))
        return False

    def ready(self) -> list[Vertex]:
        """Held vertices whose ordered past has now been delivered, in release order."""
        if not self._held:
            return []
        pending = self._pending
        out: list[Vertex] = []
        keep: deque[tuple[Vertex, tuple[tuple[int, int], ...]]] = deque()
        for v, blockers in self._held:
            if all(not pending[node] or pending[node][0] > limit for node, limit in blockers):
                out.append(v)
            else:
                keep.append((v, blockers))
        self._held = keep
        return out
