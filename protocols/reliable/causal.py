"""Causal release: hand a vertex upward only when its causal past went up first.

Section 1 of the ToTo paper (Transis): "if i is in ack(m_p) then p has received i and all
j in ack*(i)". A vertex ``(s, k)`` is released once ``(s, k-1)`` and every ``(node, seq)``
it acknowledges were released; since acks are deltas against the sender's previous
vertex, those are the only conditions to check. Released vertices leave in causal order,
which is what the total-order engine needs (section 2, "Causality DAG").

Arrivals that cannot be released yet wait in a hold buffer bounded per sender
(``receive_window`` ahead of the last released vertex) and in total (``max_held``);
beyond the bounds a vertex is refused (the caller counts the drop; the gap is nacked
and repaired later), except a sender's next vertex, which is always taken so that a
buffer full of later vertices cannot block the one they wait for (so at most
``max_held + n`` vertices are held). Duplicates are recognised and refused. ``known`` records the
highest sequence number heard of per sender (from vertices, acks and heartbeats), so
the gaps ``released < seq <= known`` not held are what the repair layer nacks.

View changes (section 2, virtual synchrony) freeze the DAG: ``limit`` caps, per sender,
what may be released (vertices beyond it stay held); the flush first sets it to what was
released when the member promised, then to the agreed cut, and the gaps up to the limit
are what is nacked.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import ProtocolViolation
from ..wire.codec import Vertex

HELD = "held"
DUPLICATE = "duplicate"
BEYOND_WINDOW = "beyond_receive_window"
BUFFER_FULL = "receive_buffer_full"
BEYOND_LIMIT = "beyond_view_cut"


class CausalReleaser:
    def __init__(self, members: Iterable[int], *, receive_window: int, max_held: int) -> None:
        self.released: dict[int, int] = {m: 0 for m in members}
        self.known: dict[int, int] = dict(self.released)
        self._held: dict[int, dict[int, Vertex]] = {m: {} for m in self.released}
        self._blocked_on: dict[int, set[int]] = {}
        self._receive_window = receive_window
        self._max_held = max_held
        self.held_count = 0
        self.limit: dict[int, int] | None = None
        """Per sender, the highest seq that may be released (``None``: no limit)."""
        self.final = False
        """The limit is the view's final cut: vertices beyond it are refused, not held."""

    def note_known(self, node: int, seq: int) -> None:
        if seq > self.known[node]:
            self.known[node] = seq

    def offer(self, v: Vertex, out: list[Vertex]) -> str:
        """Take a received vertex; append whatever becomes releasable to ``out``."""
        origin, seq = v.origin, v.seq
        released = self.released
        if seq <= released[origin] or seq in self._held[origin]:
            return DUPLICATE
        for node, _ in v.acks:
            if node == origin:
                raise ProtocolViolation("self_ack", f"vertex {v.id} acks its own sender")
            if node not in released:
                raise ProtocolViolation("unknown_member", f"vertex {v.id} acks node {node}")
        limit = self.limit
        if self.final and limit is not None and seq > limit[origin]:
            return BEYOND_LIMIT  # the view is closed: nothing past the cut
        if seq > self.known[origin]:
            self.known[origin] = seq
        for node, ack in v.acks:
            if ack > self.known[node]:
                self.known[node] = ack
        if seq > released[origin] + self._receive_window:
            return BEYOND_WINDOW
        if self.held_count >= self._max_held and seq != released[origin] + 1:
            return BUFFER_FULL  # the next vertex of a sender is always taken: no deadlock
        self._held[origin][seq] = v
        self.held_count += 1
        if seq == released[origin] + 1:
            self._release_from(origin, out)
        return HELD

    def release_own(self, v: Vertex) -> None:
        """Our own new vertex: its causal past is everything we released already."""
        self.released[v.origin] = v.seq
        if v.seq > self.known[v.origin]:
            self.known[v.origin] = v.seq

    def _release_from(self, start: int, out: list[Vertex]) -> None:
        released, held, blocked_on = self.released, self._held, self._blocked_on
        todo = [start]
        while todo:
            origin = todo.pop()
            v = held[origin].get(released[origin] + 1)
            if v is None or (self.limit is not None and v.seq > self.limit[origin]):
                continue
            blocker = None  # the first ack not yet released (a loop: no generator)
            for n, s in v.acks:
                if released[n] < s:
                    blocker = n
                    break
            if blocker is not None:
                blocked_on.setdefault(blocker, set()).add(origin)
                continue
            del held[origin][v.seq]
            self.held_count -= 1
            released[origin] = v.seq
            out.append(v)
            todo.append(origin)
            waiting = blocked_on.pop(origin, None)
            if waiting:
                todo.extend(waiting)

    def set_limit(self, limit: dict[int, int], out: list[Vertex], *, final: bool) -> None:
        """Cap releases at ``limit`` and append whatever it lets go to ``out``. A
        ``final`` limit is the view's cut: held vertices beyond it are forgotten (they can
        never be released in this view) and later ones are refused."""
        self.limit = limit
        self.final = final
        if final:
            for origin, held in self._held.items():
                top = limit[origin]
                for seq in [s for s in held if s > top]:
                    del held[seq]
                    self.held_count -= 1
                if self.known[origin] > max(top, self.released[origin]):
                    self.known[origin] = max(top, self.released[origin])
        for origin in list(self._held):
            self._release_from(origin, out)

    def set_limit_off(self, out: list[Vertex]) -> None:
        """No limit any more (flow control let go): release what waited for it."""
        self.limit = None
        self.final = False
        for origin in list(self._held):
            self._release_from(origin, out)

    def held_vertices(self) -> list[Vertex]:
        """Vertices held (received, not released), in sender then sequence order."""
        return [held[seq] for _, held in sorted(self._held.items()) for seq in sorted(held)]

    def holds(self, cut: dict[int, int]) -> bool:
        """True when every sender's vertices up to ``cut`` are released."""
        released = self.released
        return all(released[node] >= seq for node, seq in cut.items())

    def has_gap(self, node: int) -> bool:
        return self.known[node] > self.released[node] + len(self._held[node])

    def missing(self, node: int, limit: int) -> list[tuple[int, int]]:
        """Up to ``limit`` ranges ``(first, last)`` of ``node``'s seqs neither released nor held."""
        ranges: list[tuple[int, int]] = []
        held = self._held[node]
        top = min(self.known[node], self.released[node] + self._receive_window)
        if self.limit is not None:
            top = min(top, self.limit[node])
        seq = self.released[node] + 1
        while seq <= top and len(ranges) < limit:
            if seq in held:
                seq += 1
                continue
            first = seq
            while seq <= top and seq not in held:
                seq += 1
            ranges.append((first, seq - 1))
        return ranges

    def first_missing(self, node: int) -> int | None:
        ranges = self.missing(node, 1)
        return ranges[0][0] if ranges else None
