"""Fuzz target ``native_sealed``: the native data path against the Python reference.

Theory of operation: the input language is the ``sealed`` target's (a flags byte, then
MAKE, REPLAY, TAMPER, TRUNCATE, RAW, CLOCK and ROLL records: datagrams sealed by key
holders of three peer sessions and of the receiver's own, replays, damaged and cut
copies, raw bytes, clock jumps and key rollovers), so its seeds and crash regressions
are this target's too. Every datagram goes to two receivers with the same keys,
session and clock, the Python ``Authenticator`` and the native one
(``amcast_native.Authenticator``, ``protocols/wire/native``), which must agree exactly:
both accept it with the same body, or both refuse it with the same reason *and*
detail; after it, their replay guards must hold the same sessions with the same state
(highest counter, the 4096-bit window, send and hearing times, key ids, clock-offset
samples) and the same eviction count. After each record both also seal the same body:
the datagrams must be equal byte for byte (the same sending key chosen from the peers'
advertisements, the same counter, the same AES-256-GCM output).

Without the extension (``make rust`` not run) every input is accepted as is: the
differential tests in ``tests/native`` say so by skipping.
"""

from __future__ import annotations

from typing import Any

from amcast.protocols.errors import DecodeError
from amcast.protocols.wire.auth import Authenticator
from amcast.protocols.wire.keys import Keyring
from amcast.protocols.wire.native import native_module
from amcast.protocols.wire.replay import SessionState

from fuzz.targets import sealed

INSTRUMENT = ("amcast",)
MAX_LEN = sealed.MAX_LEN
TIMEOUT_S = sealed.TIMEOUT_S
OWN = sealed.OWN
_OUTGOING = b"native and pure seal this alike"


def pure_state(state: SessionState) -> tuple[int, bytes, int, int, int, int, int, int, int]:
    """A Python ``SessionState`` as the native ``session_state`` tuple."""
    return (state.highest, state.bitmap.to_bytes(512, "little"), state.last_sent_ms,
            state.last_heard_ms, state.key_id, state.newest_key, state.offset_ms,
            state.offset_prev_ms, state.offset_since_ms)


def outcome(call: Any) -> tuple[bytes | None, tuple[str, str] | None]:
    """``(body, None)`` or ``(None, (reason, detail))``."""
    try:
        body = call()
    except DecodeError as exc:
        return None, (exc.reason, exc.detail)
    return bytes(body), None


class Pair:
    """The Python and the native receiver, fed alike and compared after every step."""

    def __init__(self, native: Any, ring: Keyring, max_sessions: int) -> None:
        self.pure = Authenticator(ring, OWN, replay_window_s=sealed.WINDOW_S,
                                  max_sessions=max_sessions)
        self.native = native.Authenticator(ring.keys, OWN, replay_window_s=sealed.WINDOW_S,
                                           max_sessions=max_sessions)

    def set_keys(self, ring: Keyring, wall_ms: int) -> None:
        self.pure.set_keys(ring, wall_ms)
        self.native.set_keys(ring.keys, wall_ms)

    def take(self, raw: bytes, wall_ms: int) -> bytes | None:
        """Both open ``raw``; the body both accepted, ``None`` if both refused it."""
        pure = outcome(lambda: self.pure.open(raw, wall_ms))
        native = outcome(lambda: self.native.open(raw, wall_ms))
        if pure != native:
            raise AssertionError(f"pure and native open disagree: {pure[1] or 'accepted'} / "
                                 f"{native[1] or 'accepted'}")
        self.same_guards()
        return pure[0]

    def same_guards(self) -> None:
        guard = self.pure.guard
        if len(guard.sessions) != self.native.sessions:
            raise AssertionError(f"{len(guard.sessions)} sessions kept in Python, "
                                 f"{self.native.sessions} natively")
        if guard.evicted != self.native.evicted:
            raise AssertionError(f"evicted {guard.evicted} / {self.native.evicted}")
        for session, state in guard.sessions.items():
            if pure_state(state) != self.native.session_state(session):
                raise AssertionError(f"replay state of session {session.hex()} differs")

    def seal_alike(self, wall_ms: int) -> None:
        pure, native = self.pure.seal(_OUTGOING, wall_ms), self.native.seal(_OUTGOING, wall_ms)
        if pure != native:
            raise AssertionError("pure and native seal differ")
        if self.pure.send_key_id != self.native.send_key_id:
            raise AssertionError("pure and native chose different sending keys")


def test_one_input(data: bytes) -> None:
    native = native_module()
    if native is None or not data:
        return
    flags = data[0]
    pair = Pair(native, sealed.RINGS[0], 2 if flags & sealed.FLAG_SMALL_GUARD else 1024)
    by_pair: dict[tuple[bytes, int], bytes] = {}
    made: list[bytes] = []
    rolls = 0
    now = 0.0
    pos = 1
    while pos < len(data):
        op = data[pos] % sealed.OPS
        pos += 1
        wall_ms = int((now + sealed.WALL_OFFSET) * 1000)
        raw: bytes | None = None
        if op == sealed.MAKE and pos + sealed.MAKE_FIELDS.size <= len(data):
            who, counter, key, skew, length = sealed.MAKE_FIELDS.unpack_from(data, pos)
            pos += sealed.MAKE_FIELDS.size
            body = data[pos : pos + length]
            pos += length
            session = sealed.SESSIONS[(who & 0x7F) % len(sealed.SESSIONS)]
            if who & 0x80:
                counter += sealed.HIGH_COUNTER
            raw = by_pair.get((session, counter))
            if raw is None:
                key_id, key_bytes = sealed.KEYS[key % len(sealed.KEYS)]
                raw = sealed.seal(key_id, key_bytes, session, counter, wall_ms + 2 * skew,
                                  (key >> 2) % 4, body)
                by_pair[(session, counter)] = raw
                made.append(raw)
        elif op in (sealed.REPLAY, sealed.TAMPER, sealed.TRUNCATE) and made:
            fields = {sealed.REPLAY: sealed.INDEX, sealed.TAMPER: sealed.TAMPER_FIELDS,
                      sealed.TRUNCATE: sealed.TRUNCATE_FIELDS}[op]
            if pos + fields.size > len(data):
                break
            values = fields.unpack_from(data, pos)
            pos += fields.size
            raw = made[values[0] % len(made)]
            if op == sealed.TAMPER and values[2]:
                at = values[1] % len(raw)
                raw = raw[:at] + bytes([raw[at] ^ values[2]]) + raw[at + 1 :]
            elif op == sealed.TRUNCATE:
                raw = raw[: values[1] % len(raw)]
        elif op == sealed.RAW and pos + sealed.INDEX.size <= len(data):
            (length,) = sealed.INDEX.unpack_from(data, pos)
            pos += sealed.INDEX.size
            raw = data[pos : pos + length]
            pos += length
        elif op == sealed.CLOCK and pos + sealed.INDEX.size <= len(data):
            (ms,) = sealed.INDEX.unpack_from(data, pos)
            pos += sealed.INDEX.size
            now += ms / 100
            wall_ms = int((now + sealed.WALL_OFFSET) * 1000)
        elif op == sealed.ROLL:
            if rolls < len(sealed.RINGS) - 1:
                rolls += 1
                pair.set_keys(sealed.RINGS[rolls], wall_ms)
        else:
            break  # the record is cut short: the input ends here
        if raw is not None:
            pair.take(raw, wall_ms)
        pair.seal_alike(wall_ms)


def seeds() -> list[bytes]:
    """The ``sealed`` target's seeds: the same input language."""
    return sealed.seeds()
