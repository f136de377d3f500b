"""Peers' clocks as their datagrams show them: how far ahead or behind this node's each
one is, and which ones are refused for it.

Theory of operation. Replay protection (``replay``; the wire layer's gate of section 1
of the ToTo paper: the LAN is not trusted) admits a sealed datagram only if its send
time, the sender's wall clock, is within ``replay_window`` of the receiver's. So the
members' clocks must agree to within that window, or they cannot hear each other: a
member whose clock is off by more drops every datagram of the others as ``stale`` or
``future``, they drop all of its datagrams, and it is excluded like a silent one. This
module turns that from a guess into a figure:

- Within the window, every admitted datagram is a sample of ``sent - received``: the
  sender's clock ahead of this one, less the datagram's delay. The session's replay
  state keeps the largest of the last one to two seconds (``SessionState``), the
  least delayed datagram's, the tightest bound.
- Beyond it, a refused datagram is authenticated anyway, at most one every
  ``PROBE_INTERVAL_MS`` (the tag check a fresh datagram would have cost, and a decode
  to learn its sender); if it is authentic, its sender and offset are recorded here.
  A forged one teaches nothing: it fails the tag. A captured datagram replayed later is
  authentic and reads as a clock off by its age, which is why what users see names
  both causes.

``ClockWatch.offsets`` gives per listed peer heard within ``HORIZON_MS`` its offset in
seconds and whether its datagrams are refused; the daemon turns that into a gauge, a
status column, a log warning and a health problem (docs/operations.md, *Sealed datagrams*).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .replay import SessionState

PROBE_INTERVAL_MS = 50
"""At most one refused (``stale``/``future``) datagram per this many ms is authenticated
to learn whose clock is off: bounded work, however many arrive."""
HORIZON_MS = 10_000
"""A peer's offset is reported while its newest datagram (admitted or refused) is at
most this old."""


@dataclass(frozen=True, slots=True)
class PeerClock:
    """One peer's clock as this node sees it."""

    offset_s: float
    """Its clock ahead of this node's, in seconds (negative: behind)."""
    refused: bool
    """Its newest datagrams are refused as ``stale``/``future``: the offset is beyond
    ``replay_window``."""


class ClockWatch:
    """Refused datagrams' offsets per sender, and the merged report. Its own times are
    the caller's clock ``now`` (monotonic in the daemon): this node's wall clock may be
    the one that steps."""

    __slots__ = ("_members", "_probed_ms", "_raised", "refusing")

    def __init__(self, members: Iterable[int]) -> None:
        self._members = frozenset(members)
        self.refusing: dict[int, tuple[int, float]] = {}
        """Per listed sender whose newest authentic datagram was refused: (offset ms,
        when, ``now``); ``admitted`` removes it."""
        self._raised: dict[int, float] = {}
        """When ``refused`` last started an episode, per sender."""
        self._probed_ms = -(1 << 62)

    def may_probe(self, wall_ms: int) -> bool:
        """Whether a refused datagram may be authenticated now (and count as the probe)."""
        if abs(wall_ms - self._probed_ms) < PROBE_INTERVAL_MS:
            return False
        self._probed_ms = wall_ms
        return True

    def refused(self, sender: int, sent_ms: int, wall_ms: int, now: float) -> bool:
        """Record an authentic datagram of ``sender`` refused for its send time. True
        when that starts an episode: no episode of it started within ``HORIZON_MS``
        (an offset at the window's edge, some datagrams admitted and some refused,
        raises one). A sender that is not a listed member is ignored."""
        if sender not in self._members:
            return False
        self.refusing[sender] = (sent_ms - wall_ms, now)
        raised = self._raised.get(sender)
        if raised is not None and now - raised <= HORIZON_MS / 1000:
            return False
        self._raised[sender] = now
        return True

    def admitted(self, sender: int) -> None:
        """A datagram of ``sender`` was admitted: its clock is within the window again."""
        self.refusing.pop(sender, None)

    def offsets(self, sessions: Mapping[bytes, SessionState], own: bytes, node_id: int,
                wall_ms: int, now: float) -> dict[int, PeerClock]:
        """Per listed peer heard within ``HORIZON_MS``: its clock offset from its newest
        datagrams, refused (``refusing``) or else admitted (``sessions``, the replay
        guard's)."""
        out: dict[int, tuple[int, int, bool]] = {}  # sender: (heard, offset, refused)
        for session, st in sessions.items():
            sender = st.sender
            if (session == own or sender is None or sender == node_id
                    or sender not in self._members
                    or abs(wall_ms - st.last_heard_ms) > HORIZON_MS):
                continue
            seen = out.get(sender)
            if seen is None or st.last_heard_ms > seen[0]:
                out[sender] = (st.last_heard_ms, st.clock_offset_ms(), False)
        for sender, (offset, at) in list(self.refusing.items()):
            if now - at > HORIZON_MS / 1000:
                del self.refusing[sender]
            else:
                out[sender] = (0, offset, True)
        return {sender: PeerClock(offset / 1000, refused)
                for sender, (_, offset, refused) in sorted(out.items())}
