"""Repair: nacks for gaps, retransmission by any holder, randomized suppression.

Section 1 of the ToTo paper (Trans): a message carries ``nack(m_p)``, the messages p has
lost, and lost messages are retransmitted. On a multicast medium one loss is seen by
many receivers and the message is held by many members, so both sides use the
scalable-reliable-multicast trick of random back-off with suppression:

- ``NackTimers``: when a gap in a sender's sequence is noticed, a nack is scheduled after
  a uniform random wait in ``[0, nack_delay]``. Hearing another member's nack for the
  same gap postpones ours by ``nack_retry`` (its repair will reach us too). An unrepaired
  gap is nacked again every ``nack_retry`` (with jitter).
- ``RepairTimers``: a nacked vertex is retransmitted by its origin after a wait in
  ``[0, repair_delay/4]`` and by any other holder after one in ``[repair_delay/4,
  repair_delay]``; hearing someone else's retransmission cancels ours, and for
  ``repair_holdoff`` after a retransmission further nacks for it are ignored (they
  crossed the repair on the wire).
"""

from __future__ import annotations

import random

VertexId = tuple[int, int]


class NackTimers:
    def __init__(self, rng: random.Random, *, nack_delay: float, nack_retry: float) -> None:
        self._rng = rng
        self._delay = nack_delay
        self._retry = nack_retry
        self.deadlines: dict[int, float] = {}

    def gap_noticed(self, node: int, now: float) -> None:
        if node not in self.deadlines:
            self.deadlines[node] = now + self._rng.uniform(0.0, self._delay)

    def heard_nack(self, node: int, now: float) -> None:
        """Another member nacked the gap we are about to nack: wait for its repair."""
        if node in self.deadlines:
            self.deadlines[node] = max(self.deadlines[node], now + self._retry)

    def due(self, now: float) -> list[int]:
        return [node for node, at in self.deadlines.items() if at <= now]

    def rearm(self, node: int, now: float) -> None:
        self.deadlines[node] = now + self._retry * (1.0 + 0.5 * self._rng.random())

    def clear(self, node: int) -> None:
        self.deadlines.pop(node, None)

    def next_deadline(self) -> float | None:
        # not ``min(..., default=None)``: a keyword argument sends ``min`` down CPython's
        # slow argument parsing (about 0.7 us even for an empty dict), on every next_timer
        deadlines = self.deadlines
        return min(deadlines.values()) if deadlines else None


class RepairTimers:
    PRUNE_AT = 4096

    def __init__(self, rng: random.Random, *, repair_delay: float, holdoff: float) -> None:
        self._rng = rng
        self._delay = repair_delay
        self._holdoff = holdoff
        self.pending: dict[VertexId, float] = {}
        self._recent: dict[VertexId, float] = {}

    def wants(self, vid: VertexId, now: float) -> bool:
        """A nack of ``vid`` would schedule a retransmission (none pending, none recent)."""
        return vid not in self.pending and now >= self._recent.get(vid, -1.0) + self._holdoff

    def nacked(self, vid: VertexId, now: float, *, origin: bool) -> None:
        if not self.wants(vid, now):
            return
        quarter = self._delay / 4
        low, high = (0.0, quarter) if origin else (quarter, self._delay)
        wait = self._rng.uniform(low, high)
        self.pending[vid] = now + wait

    def heard_repair(self, vid: VertexId, now: float) -> None:
        """Someone retransmitted ``vid``: our own retransmission is redundant."""
        self.pending.pop(vid, None)
        self._recent[vid] = now

    def due(self, now: float) -> list[VertexId]:
        ready = [vid for vid, at in self.pending.items() if at <= now]
        for vid in ready:
            del self.pending[vid]
            self._recent[vid] = now
        if len(self._recent) > self.PRUNE_AT:
            horizon = now - self._holdoff
            self._recent = {vid: at for vid, at in self._recent.items() if at >= horizon}
        return ready

    def forget(self, vid: VertexId) -> None:
        self.pending.pop(vid, None)

    def next_deadline(self) -> float | None:
        pending = self.pending
        return min(pending.values()) if pending else None
