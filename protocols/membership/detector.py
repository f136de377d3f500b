"""Failure detection from silence (section 2: the membership service must notice a
failed processor, "otherwise the first failure prevents all future messages from being
delivered").

Every authenticated datagram from a node counts as a sign of life (data, acks, nacks,
repairs, heartbeats, membership messages); idle members send heartbeats every
``heartbeat_interval``. A node not heard from for ``suspect_timeout`` is suspected.
The trade-off: a short timeout turns a crash into a new view quickly, and also excludes
a member that is merely slow (a long garbage-collection pause, an overloaded host, a
VM migration) for longer than the timeout; an excluded member rejoins by itself.

Local health (Lifeguard, as in hashicorp/memberlist): when this process itself runs
late (its own timers fire late: it is starved of CPU, or paused), silence it measures is
partly its own fault, so the timeout grows by twice its recent lateness (decaying, at
most three timeouts). A process slow enough to trust nobody does not exclude anybody;
the others exclude it instead, which is what should happen.
"""

from __future__ import annotations

import math
from collections.abc import Iterable


class FailureDetector:
    def __init__(self, me: int, *, suspect_timeout: float, now: float) -> None:
        self.me = me
        self.timeout = suspect_timeout
        self.last_heard: dict[int, float] = {}
        self.started = now
        self.lateness = 0.0
        """Recent lateness of this process's own timers, seconds (decaying); it changes
        only through ``ran_late``, which recomputes ``effective_timeout``."""
        self.effective_timeout = min(self.timeout + 2 * self.lateness, 3 * self.timeout)
        """The timeout in force: ``timeout`` plus twice the lateness, at most 3 timeouts
        (kept, not recomputed per ``alive``: the membership asks after every input)."""

    def ran_late(self, late: float) -> None:
        """A timer of ours fired ``late`` seconds after it was due (called every tick)."""
        self.lateness = max(late, self.lateness * 0.9)
        self.effective_timeout = min(self.timeout + 2 * self.lateness, 3 * self.timeout)

    def heard(self, node: int, now: float) -> None:
        self.last_heard[node] = now

    def forget(self, node: int) -> None:
        self.last_heard.pop(node, None)

    def alive(self, node: int, now: float) -> bool:
        if node == self.me:
            return True
        at = self.last_heard.get(node)
        return at is not None and now - at <= self.effective_timeout

    def alive_among(self, nodes: Iterable[int], now: float) -> set[int]:
        return {n for n in nodes if self.alive(n, now)}

    def silent_for(self, node: int, now: float) -> float:
        at = self.last_heard.get(node)
        return math.inf if at is None else now - at

    def next_change(self, now: float) -> float | None:
        """When the next currently-alive node becomes suspected (if it stays silent)."""
        timeout = self.effective_timeout
        upcoming = [at + timeout for at in self.last_heard.values() if at + timeout >= now]
        return min(upcoming) if upcoming else None
