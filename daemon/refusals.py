"""Datagrams refused for a configuration that differs: say so, with the likely cause.

The engine drops a datagram it cannot accept and counts it by reason
(``amcast_drops_total{reason}``). Most reasons are weather: a copy seen twice, a view
that ended. A few mean that the sender and this daemon are not configured alike, and
then they never hear each other: a different group key, a key rollover step missed, one
side insecure, another wire version, a node id missing from ``node.members``, another
cluster on the same group and port. A daemon cut off that way used to say only that it
heard nobody, which sends the operator to the firewall.

``RefusalWatch`` reads the cumulative drop counters once a tick. For each such reason
with new drops it logs one warning a minute at most (``LOG_EVERY_S``: the count since
the last one and what to check, as Corosync logs invalid digests), and it keeps the
counts of the last ``RECENT_S`` seconds for the health problem that names the cause.
It decides nothing; the datagrams stay dropped.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

CAUSES: dict[str, str] = {
    "auth_failed": "fail authentication: a key file other than this host's "
                   "(security.key_file; the same file on every node), another cluster on "
                   "the same network.group and port, or forged traffic",
    "unknown_key": "are sealed with a key id this host does not hold: a key rollover step "
                   "missed on one side (amcast keygen --rotate, then copy the file to every "
                   "node; README, 'Keys and rotation')",
    "auth_missing": "are not sealed while this host is: protocol.insecure on the sender",
    "auth_unexpected": "are sealed while this host is insecure: protocol.insecure here",
    "bad_version": "speak another wire version: an amcast release this one cannot talk to",
    "unknown_sender": "come from a node id not in this host's node.members: the member "
                      "lists differ, or another cluster shares network.group and port",
}
"""Drop reasons that mean a configuration differs, and what to check for each."""
LOG_EVERY_S = 60.0
"""At most one warning per reason this often."""
RECENT_S = 10.0
"""The health problem counts the refusals of this many seconds."""


@dataclass(frozen=True, slots=True)
class RefusalNotice:
    """A log line to write: ``count`` datagrams refused for ``reason`` since the last."""

    reason: str
    count: int
    cause: str


class RefusalWatch:
    """Reads cumulative drop counters; yields warnings and the recent counts."""

    __slots__ = ("_history", "_logged", "_seen", "_unlogged")

    def __init__(self) -> None:
        self._seen: dict[str, int] = {}
        self._unlogged: dict[str, int] = {}
        self._logged: dict[str, float] = {}
        self._history: deque[tuple[float, str, int]] = deque()

    def update(self, drops: Mapping[str, int], now: float) -> list[RefusalNotice]:
        """Take the cumulative ``drops`` at ``now`` (seconds, monotonic); the warnings
        due."""
        out: list[RefusalNotice] = []
        for reason, cause in CAUSES.items():
            total = int(drops.get(reason, 0))
            new = total - self._seen.get(reason, 0)
            self._seen[reason] = total
            if new > 0:
                self._history.append((now, reason, new))
                self._unlogged[reason] = self._unlogged.get(reason, 0) + new
            pending = self._unlogged.get(reason, 0)
            last = self._logged.get(reason)
            if pending and (last is None or now - last >= LOG_EVERY_S):
                out.append(RefusalNotice(reason, pending, cause))
                self._unlogged[reason] = 0
                self._logged[reason] = now
        history = self._history
        while history and now - history[0][0] > RECENT_S:
            history.popleft()
        return out

    def recent(self) -> dict[str, int]:
        """Refusals per reason in the last ``RECENT_S`` seconds (as of the last update)."""
        counts: dict[str, int] = {}
        for _, reason, n in self._history:
            counts[reason] = counts.get(reason, 0) + n
        return counts

    @staticmethod
    def describe(counts: Mapping[str, int]) -> str:
        """``512 auth_failed (they fail authentication: ...)``, joined by ``; ``."""
        return "; ".join(f"{n} {reason} (they {CAUSES[reason]})"
                         for reason, n in sorted(counts.items(), key=lambda kv: -kv[1]))
