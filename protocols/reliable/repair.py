"""Repair: nacks for gaps, retransmission by any holder, randomized suppression.

Section 1 of the ToTo paper (Trans): a message carries ``nack(m_p)``, the messages p has
lost, and lost messages are retransmitted. On a multicast medium one loss is seen by
many receivers and the message is held by many members, so both sides use the
scalable-reliable-multicast trick of random back-off with suppression:

- ``NackTimers``: when a gap in a sender's sequence is noticed, a nack is scheduled after
  a uniform random wait in ``[0, nack_delay]``. Hearing another member's nack for the
  same gap postpones ours by ``nack_retry`` (its repair will reach us too). An unrepaired
  gap is nacked again every ``nack_retry`` (with jitter).
- Copies come late without being lost. Over unicast the origin sends N-1 copies one
  after another, and a daemon preempted in the middle of them (a waking receiver takes
  its core) delivers its last copies milliseconds after the first receivers acked; any
  network that reorders does the same. Two rules keep such copies from being
  "repaired":

  1. A nack timer that fires while the gap's origin went on being released here since
     the timer was set (copies arriving, if late) waits again instead of nacking. A
     lost vertex stops its origin's releases here (they are in sequence order), so a
     loss is nacked at the latest one wait later.
  2. A gap known only from another member's acks (we hear that a vertex exists before
     its own copy reached us) waits a *reorder allowance* more before its first nack:
     SRM's distance-scaled timers, applied to lateness. Every gap that a late copy
     closes (not a repair) is a sample of how late copies come; the allowance is their
     smoothed mean plus four mean deviations (the TCP retransmission-timer estimator),
     at most ``nack_reorder_max``, halving for each second without a sample
     (``REORDER_HALF_LIFE``). Where nothing comes late it stays 0. A gap below a
     sequence number the origin's own datagram carries is a loss: no allowance, and it
     cuts an allowance wait already running short.
- ``RepairTimers``: a nacked vertex is retransmitted by its origin after a wait in
  ``[0, repair_delay/4]`` and by any other holder after one in ``[repair_delay/4,
  repair_delay]``; hearing someone else's retransmission cancels ours, and for
  ``repair_holdoff`` after a retransmission further nacks for it are ignored (they
  crossed the repair on the wire).
"""

from __future__ import annotations

import random

VertexId = tuple[int, int]


REORDER_HALF_LIFE = 1.0
"""Seconds without a late copy that halve the reorder allowance."""


class Lateness:
    """How late copies come here (rule 2 of the module docstring): a smoothed mean and
    mean deviation of the samples, decaying with ``REORDER_HALF_LIFE``; the allowance is
    at most ``reorder_max`` (0: off)."""

    def __init__(self, reorder_max: float) -> None:
        self.reorder_max = reorder_max
        self._mean = 0.0
        self._dev = 0.0
        self._at = 0.0
        self.samples = 0
        """Gaps closed by a late copy (cumulative)."""
        self.waited_again = 0
        """Nack timers that found the origin still being released and waited again
        (rule 1; cumulative)."""

    def sample(self, late: float, now: float) -> None:
        decay = self._decay(now)
        mean, dev = self._mean * decay, self._dev * decay
        if self.samples:
            dev += (abs(late - mean) - dev) / 4
            mean += (late - mean) / 8
        else:
            mean, dev = late, late / 2
        self._mean, self._dev, self._at = mean, dev, now
        self.samples += 1

    def _decay(self, now: float) -> float:
        idle = now - self._at
        return 0.5 ** (idle / REORDER_HALF_LIFE) if idle > 0 else 1.0

    def allowance(self, now: float) -> float:
        """The extra first wait of a gap known only from others' acks (seconds)."""
        if not self.samples:
            return 0.0
        wait = (self._mean + 4 * self._dev) * self._decay(now)
        return wait if wait < self.reorder_max else self.reorder_max


class NackTimers:
    def __init__(self, rng: random.Random, *, nack_delay: float, nack_retry: float,
                 lateness: Lateness | None = None) -> None:
        self._rng = rng
        self._delay = nack_delay
        self._retry = nack_retry
        self.lateness = lateness or Lateness(0.0)
        """How late copies come (the Node's, shared by its views: a property of the
        network and the hosts, not of a view)."""
        self.deadlines: dict[int, float] = {}
        self._since: dict[int, int] = {}
        """Node -> how far its vertices were released here when its timer was set."""
        self._allowed: set[int] = set()
        """Nodes whose first wait includes the allowance (a gap known from acks only)."""
        self._retrying: set[int] = set()
        """Nodes whose timer is a retry: we nacked, or heard another member's nack."""
        self.noticed: dict[int, float] = {}
        """Node -> when its open gap was first noticed (the start of a lateness sample)."""

    def gap_noticed(self, node: int, now: float, direct: bool = True,
                    released: int = 0) -> None:
        """A gap in ``node``'s sequence: ``direct`` when it lies below a sequence number
        ``node``'s own datagram carries (or the agreed cut's), else it is known only from
        other members' acks; ``released``: how far ``node``'s vertices are released."""
        if node not in self.noticed:
            self.noticed[node] = now
        at = self.deadlines.get(node)
        if at is None:
            wait = self._rng.uniform(0.0, self._delay)
            if not direct:
                wait += self.allowance(now)
                self._allowed.add(node)
            self.deadlines[node] = now + wait
            self._since[node] = released
        elif direct and node in self._allowed:
            self._allowed.discard(node)  # a loss after all: no allowance
            soon = now + self._rng.uniform(0.0, self._delay)
            if soon < at:
                self.deadlines[node] = soon

    def gap_closed(self, node: int, now: float, *, late_copy: bool) -> None:
        """``node``'s gap closed: by a late copy (a lateness sample) or by a repair. A
        first wait is cancelled (the next gap waits its own); a retry timer runs on,
        so a gap opening next is not nacked before ``nack_retry`` (rule 1 lets it wait
        again if that gap is moving)."""
        since = self.noticed.pop(node, None)
        if node not in self._retrying:
            self.deadlines.pop(node, None)
            self._since.pop(node, None)
            self._allowed.discard(node)
        if late_copy and since is not None:
            self.lateness.sample(now - since, now)

    def allowance(self, now: float) -> float:
        return self.lateness.allowance(now)

    def heard_nack(self, node: int, now: float) -> None:
        """Another member nacked the gap we are about to nack: wait for its repair."""
        if node in self.deadlines:
            self.deadlines[node] = max(self.deadlines[node], now + self._retry)
            self._allowed.discard(node)
            self._retrying.add(node)

    def due(self, now: float) -> list[int]:
        return [node for node, at in self.deadlines.items() if at <= now]

    def still_arriving(self, node: int, released: int, now: float) -> bool:
        """A due timer of a gap still open: if ``node``'s vertices were released further
        since the timer was set, wait again (rule 1) and say True; else the caller
        nacks (and ``rearm``s)."""
        if released <= self._since.get(node, released):
            return False
        wait = self._rng.uniform(0.0, self._delay)
        if node in self._allowed:
            wait += self.allowance(now)
        self.deadlines[node] = now + wait
        self._since[node] = released
        self.lateness.waited_again += 1
        return True

    def rearm(self, node: int, now: float, released: int = 0) -> None:
        """We nacked ``node``'s gap: nack it again after ``nack_retry`` if still open."""
        self.deadlines[node] = now + self._retry * (1.0 + 0.5 * self._rng.random())
        self._since[node] = released
        self._allowed.discard(node)
        self._retrying.add(node)

    def clear(self, node: int) -> None:
        self.deadlines.pop(node, None)
        self.noticed.pop(node, None)
        self._since.pop(node, None)
        self._allowed.discard(node)
        self._retrying.discard(node)

    def cancel_all(self) -> None:
        """No more nacks (the view is closed); the lateness estimate stays."""
        self.deadlines.clear()
        self.noticed.clear()
        self._since.clear()
        self._allowed.clear()
        self._retrying.clear()

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
