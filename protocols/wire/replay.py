"""Replay protection: every authentic datagram is accepted at most once, and only fresh.

Theory of operation. Every sealed datagram (``auth``) names its sender's *session* (16
random bytes drawn when the sender's node starts), a per-session counter that grows by
one per datagram, and the sender's wall clock in milliseconds. All three are covered by
the AEAD tag, so only a key holder can choose them. A receiver admits a datagram when

1. its send time is within ``window_s`` of the receiver's wall clock (older ones are
   ``stale``, newer ones ``future``): a datagram captured and replayed later than that
   (seconds or days later, after views changed, after its sender restarted) is dropped
   whatever the receiver remembers;
2. its counter was not seen before in its session: per session, the highest counter and
   a bitmap of the ``WINDOW`` counters below it (the anti-replay window of IPsec, RFC
   4303 section 3.4.3). A counter already seen is ``replayed``; one below the bitmap is
   ``too_old``.

A session's state is kept while it could still admit something: until its newest
admitted send time is older than the freshness window. Then it is forgotten, and every
datagram of it would be ``stale``. Memory is bounded by ``max_sessions``. Only
authentic datagrams create state (the caller checks the tag first), so an attacker
without a key cannot fill the table; if key holders do (more than ``max_sessions``
restarts within the window), the least recently heard session is evicted and counted.

What is not covered (docs/operations.md, *Replay protection*, says it too): a daemon that restarts
forgets what it admitted. For ``window_s`` after its start it may admit, once, a datagram
that was sent in the ``window_s`` before its start. Such a datagram is a genuine one
from a live or recent session, indistinguishable from a late network duplicate, which
the layers above tolerate (the reliable layer drops duplicate vertices, membership drops
stale ballots and incarnations).

Each session also carries its sender's newest key id; ``newest_of_peers`` feeds the key
rollover (``keys``), and how far its sender's clock is ahead of this one: the largest
``sent - received`` of its datagrams over the last one to two seconds. A datagram's
delay only lowers that difference, so the largest is the tightest bound (NTP's
minimum-delay filter); ``clock`` reads it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import DecodeError

WINDOW = 4096
"""Counters below a session's highest that the bitmap remembers."""
_MASK = (1 << WINDOW) - 1
ADVERT_HORIZON_MS = 3000
"""A session heard within this many milliseconds counts for the key rollover."""
OFFSET_PERIOD_MS = 1000
"""A session's clock offset is the largest sample of this period and the one before."""


@dataclass(slots=True)
class SessionState:
    highest: int
    bitmap: int  # bit i: counter ``highest - i`` was admitted
    last_sent_ms: int
    last_heard_ms: int
    key_id: int
    newest_key: int
    sender: int | None = None
    offset_ms: int = 0
    """The largest ``sent - received`` since ``offset_since_ms`` (its sender's clock
    ahead of this one, less the datagrams' delay)."""
    offset_prev_ms: int = 0
    """The same of the period before."""
    offset_since_ms: int = 0

    def clock_offset_ms(self) -> int:
        """Its sender's clock ahead of this one, in ms (negative: behind), from the
        least delayed of its datagrams of the last one to two seconds."""
        return max(self.offset_ms, self.offset_prev_ms)


class ReplayGuard:
    """Per-session anti-replay windows plus a freshness bound on send times."""

    __slots__ = ("_last_sweep_ms", "evicted", "max_sessions", "sessions", "window_ms")

    def __init__(self, window_s: float, max_sessions: int) -> None:
        self.window_ms = int(window_s * 1000)
        self.max_sessions = max_sessions
        self.sessions: dict[bytes, SessionState] = {}
        self.evicted = 0
        self._last_sweep_ms = 0

    def check(self, session: bytes, counter: int, sent_ms: int, wall_ms: int) -> None:
        """Raise ``DecodeError`` if the datagram is not fresh or was seen before. Cheap:
        runs before the tag is checked (the caller admits only after it)."""
        if sent_ms < wall_ms - self.window_ms:
            raise DecodeError("stale", f"sent {wall_ms - sent_ms} ms ago")
        if sent_ms > wall_ms + self.window_ms:
            raise DecodeError("future", f"sent {sent_ms - wall_ms} ms ahead of this clock")
        state = self.sessions.get(session)
        if state is None:
            return
        behind = state.highest - counter
        if behind >= WINDOW:
            raise DecodeError("too_old", f"counter {behind} behind the session's newest")
        if behind >= 0 and (state.bitmap >> behind) & 1:
            raise DecodeError("replayed", f"counter {counter} seen before")

    def admit(self, session: bytes, counter: int, sent_ms: int, wall_ms: int,
              key_id: int, newest_key: int) -> SessionState:
        """Record an authentic datagram that passed ``check``."""
        state = self.sessions.get(session)
        if state is None:
            if len(self.sessions) >= self.max_sessions:
                self.sweep(wall_ms, force=True)
            offset = sent_ms - wall_ms
            state = SessionState(counter, 1, sent_ms, wall_ms, key_id, newest_key, None,
                                 offset, offset, wall_ms)
            self.sessions[session] = state
            return state
        behind = state.highest - counter
        if behind < 0:
            shift = -behind
            state.bitmap = ((state.bitmap << shift) | 1) & _MASK if shift < WINDOW else 1
            state.highest = counter
        else:
            state.bitmap |= 1 << behind
        if sent_ms > state.last_sent_ms:
            state.last_sent_ms = sent_ms
        state.last_heard_ms = wall_ms
        offset = sent_ms - wall_ms
        if wall_ms - state.offset_since_ms >= OFFSET_PERIOD_MS:
            # the period before counts only if it was the last one
            state.offset_prev_ms = (state.offset_ms if wall_ms - state.offset_since_ms
                                    < 2 * OFFSET_PERIOD_MS else offset)
            state.offset_ms = offset
            state.offset_since_ms = wall_ms
        elif offset > state.offset_ms:
            state.offset_ms = offset
        state.key_id = key_id
        state.newest_key = newest_key
        return state

    def sweep(self, wall_ms: int, force: bool = False) -> None:
        """Forget sessions that can no longer admit anything; with ``force`` and a full
        table, also the least recently heard one (counted in ``evicted``)."""
        horizon = wall_ms - self.window_ms
        for session in [s for s, st in self.sessions.items() if st.last_sent_ms < horizon]:
            del self.sessions[session]
        self._last_sweep_ms = wall_ms
        if force and len(self.sessions) >= self.max_sessions:
            oldest = min(self.sessions, key=lambda s: self.sessions[s].last_heard_ms)
            del self.sessions[oldest]
            self.evicted += 1

    def maybe_sweep(self, wall_ms: int) -> None:
        if wall_ms - self._last_sweep_ms >= 1000:
            self.sweep(wall_ms)

    def newest_of_peers(self, wall_ms: int, own: bytes) -> int | None:
        """The lowest newest-key id advertised by sessions heard lately (own excluded)."""
        low: int | None = None
        for session, st in self.sessions.items():
            if session == own or wall_ms - st.last_heard_ms > ADVERT_HORIZON_MS:
                continue
            if low is None or st.newest_key < low:
                low = st.newest_key
        return low
