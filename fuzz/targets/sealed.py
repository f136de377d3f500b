"""Fuzz target ``sealed``: the authentication gate every datagram passes first.

Theory of operation: the ``datagram`` target starts past authentication; this one feeds
the gate itself (``amcast.protocols.wire.auth`` and ``replay``: the 38-byte header, the
key ids, the replay window, AES-256-GCM) with datagrams the harness seals as a key holder
would, choosing every header field, and with damaged copies of them. The input is a
flags byte, then records, each an opcode byte (modulo 7) and its fields:

- MAKE ``session u8 | counter u16 | key u8 | skew i16 | length u16 | body``: a datagram
  of one of three peer sessions, or of node 1's own session (a reflection), sealed with
  key 1, key 2 (held only after a rollover) or key 9 (never held), advertising a newest
  key id the ``key`` byte also chooses, sent ``2 * skew`` ms from the receiver's wall
  clock (the replay window is 30 s). Session bit 7 puts the counter near 2^64. One
  (session, counter) always gives the same bytes: a second MAKE of it is a replay;
- REPLAY ``index u16``: an earlier sealed datagram again, byte for byte;
- TAMPER ``index u16 | position u16 | xor u8``: one with a byte changed;
- TRUNCATE ``index u16 | length u16``: a prefix of one;
- RAW ``length u16 | bytes``;
- CLOCK ``ms u16``: the clock moves on ``10 * ms`` milliseconds (due timers run);
- ROLL: every receiver's key ring becomes {1, 2}; the second ROLL retires key 1.

Every datagram goes to two bare ``Authenticator`` s, the daemon's ``open`` and the
simulator's ``unseal`` then ``admit``, which must agree: both accept it with the same
body, or both refuse it (with the same reason, except that ``open`` checks freshness and
the replay window before the tag, so a datagram that fails both may be refused as
``stale``, ``future``, ``too_old`` or ``replayed`` there and ``auth_failed`` or
``unknown_key`` here). What they accept must be a datagram the harness sealed, unchanged,
with a key the ring holds, fresh, not of node 1's own session, its body the one sealed,
and each (session, counter) accepted at most once while the guard has evicted no
session (flag bit 1 bounds the guards to 2 sessions, so eviction runs too). The replay
guard and the receive-cipher cache stay within their bounds.

It also goes to two real ``Node`` s, node 1 of {1, 2, 3} (flag bit 0: in view 1, else
joining), with the same keys, session and clock: one takes the bytes as the daemon hands
them over, the other as the simulator does (``Node.unseal`` once, then ``decoded=``;
the bytes alone when that fails, as ``Cluster._decoded`` does). Neither may
raise, and after every record they must be in the same state as far as anyone can see:
the same counters, the same datagrams sent (byte for byte: same session, same keys),
the same events, the same next timer, the same state to persist. The simulator's sweeps
are evidence about the daemons only as long as that holds.
"""

from __future__ import annotations

import dataclasses
import random
import struct

from amcast.protocols.errors import DecodeError
from amcast.protocols.node import Node
from amcast.protocols.node_config import NodeConfig
from amcast.protocols.wire.auth import _MAX_CIPHERS, Authenticator, derive
from amcast.protocols.wire.codec import decode_body
from amcast.protocols.wire.keys import Keyring
from amcast.protocols.wire.limits import SEAL_HEADER_BYTES, WIRE_VERSION, WireLimits
from amcast.protocols.wire.membership import ViewRecord
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from fuzz.targets import datagram
from fuzz.targets.datagram import FLAG_IN_VIEW, ME, MEMBERS

INSTRUMENT = ("amcast",)
MAX_LEN = 16384
TIMEOUT_S = 10
FLAG_SMALL_GUARD = 0x02
MAKE, REPLAY, TAMPER, TRUNCATE, RAW, CLOCK, ROLL = range(7)
OPS = 7
MAKE_FIELDS = struct.Struct(">BHBhH")
INDEX = struct.Struct(">H")
TAMPER_FIELDS = struct.Struct(">HHB")
TRUNCATE_FIELDS = struct.Struct(">HH")
HEADER = struct.Struct(">BBHH16sQQ")
"""The sealed header as a sender writes it (``auth``); ``test_fuzz_targets`` checks that
this harness seals byte for byte as ``Authenticator.seal`` does."""
assert HEADER.size == SEAL_HEADER_BYTES
FLAG_SEALED = 0x01

KEY_1 = bytes(range(32))
KEY_2 = bytes(range(32, 64))
KEY_9 = bytes(range(64, 96))
KEYS = ((1, KEY_1), (2, KEY_2), (9, KEY_9))
"""What a MAKE may seal with: ``key % 3`` picks one; id 9 is never in a ring."""
RINGS = (Keyring.single(KEY_1), Keyring(((1, KEY_1), (2, KEY_2))), Keyring.single(KEY_2, 2))
"""The receivers' rings: at start, after one ROLL, after two (key 1 retired)."""
OWN = bytes([0xEE]) * 16
SESSIONS = (bytes([1]) * 16, bytes([2]) * 16, bytes([3]) * 16, OWN)
WALL_OFFSET = 1_800_000_000.0
"""The Nodes' clock starts at 0; their wall clock (send times) is this much later."""
WINDOW_S = 30.0
HIGH_COUNTER = (1 << 64) - (1 << 16)
REFUSED_BEFORE_TAG = frozenset({"stale", "future", "too_old", "replayed"})
REFUSED_AT_TAG = frozenset({"auth_failed", "unknown_key"})


def seal(
    key_id: int, key: bytes, session: bytes, counter: int, sent_ms: int, newest: int, body: bytes
) -> bytes:
    """``body`` sealed as the holder of ``key`` sending datagram ``counter`` of ``session``
    at ``sent_ms`` would seal it."""
    header = HEADER.pack(WIRE_VERSION, FLAG_SEALED, key_id, newest, session, counter, sent_ms)
    cipher = _CIPHERS.get((key, session))
    if cipher is None:  # HKDF per datagram would dominate the run
        cipher = _CIPHERS[(key, session)] = derive(key, session)
    return header + cipher.encrypt(bytes(4) + header[22:30], body, header)


_CIPHERS: dict[tuple[bytes, bytes], AESGCM] = {}


@dataclasses.dataclass(frozen=True)
class Made:
    """A datagram the harness sealed: who, which counter, with which key, what body."""

    session: bytes
    counter: int
    key_id: int
    sent_ms: int
    body: bytes


class Gate:
    """The two bare authenticators and what they have accepted."""

    def __init__(self, small: bool) -> None:
        sessions = 2 if small else 1024
        self.fast = Authenticator(RINGS[0], OWN, replay_window_s=WINDOW_S, max_sessions=sessions)
        self.slow = Authenticator(RINGS[0], OWN, replay_window_s=WINDOW_S, max_sessions=sessions)
        self.max_sessions = sessions
        self.accepted: set[tuple[bytes, int]] = set()

    def set_keys(self, ring: Keyring, wall_ms: int) -> None:
        self.fast.set_keys(ring, wall_ms)
        self.slow.set_keys(ring, wall_ms)

    def take(self, raw: bytes, wall_ms: int, made: dict[bytes, Made], ring: Keyring) -> None:
        fast_body, fast_reason = _outcome(lambda: self.fast.open(raw, wall_ms))

        def slow() -> bytes | memoryview:
            sealed, body = self.slow.unseal(raw)
            self.slow.admit(sealed, wall_ms)
            return body

        slow_body, slow_reason = _outcome(slow)
        if fast_body != slow_body:
            raise AssertionError(
                f"open and unseal+admit disagree: {fast_reason or 'accepted'}"
                f" / {slow_reason or 'accepted'}"
            )
        if fast_reason != slow_reason and not (
            fast_reason in REFUSED_BEFORE_TAG and slow_reason in REFUSED_AT_TAG
        ):
            raise AssertionError(f"refused as {fast_reason} by open, {slow_reason} by unseal")
        for auth in (self.fast, self.slow):
            if len(auth.guard.sessions) > self.max_sessions:
                raise AssertionError(f"{len(auth.guard.sessions)} replay sessions kept")
            if len(auth._recv_ciphers) > _MAX_CIPHERS:
                raise AssertionError(f"{len(auth._recv_ciphers)} receive ciphers cached")
        if fast_body is None:
            return
        origin = made.get(raw)
        if origin is None:
            raise AssertionError("accepted a datagram nobody with a key sealed")
        if fast_body != origin.body:
            raise AssertionError("accepted with a body other than the one sealed")
        if ring.get(origin.key_id) is None:
            raise AssertionError(f"accepted under key {origin.key_id}, which the ring lacks")
        if origin.session == OWN:
            raise AssertionError("accepted a datagram of its own session")
        if abs(origin.sent_ms - wall_ms) > WINDOW_S * 1000:
            raise AssertionError(f"accepted a datagram sent {wall_ms - origin.sent_ms} ms ago")
        pair = (origin.session, origin.counter)
        if pair in self.accepted and not (self.fast.guard.evicted or self.slow.guard.evicted):
            raise AssertionError(f"accepted counter {origin.counter} of a session twice")
        self.accepted.add(pair)


def _outcome(call: object) -> tuple[bytes | None, str | None]:
    try:
        body = call()  # type: ignore[operator]
    except DecodeError as exc:
        return None, exc.reason
    return bytes(body), None


def new_node(in_view: bool) -> Node:
    return Node(
        NodeConfig(keyring=RINGS[0], replay_window=WINDOW_S),
        node_id=ME,
        members=MEMBERS,
        rng=random.Random(0),
        now=0.0,
        initial_view=ViewRecord.agreed(MEMBERS) if in_view else None,
        session=OWN,
        wall_offset=WALL_OFFSET,
    )


def _simulated(node: Node, raw: bytes, now: float) -> None:
    """``raw`` handed over as ``Cluster._decoded`` does: decoded once, or left to the node."""
    try:
        decoded = node.unseal(raw)
    except DecodeError:
        node.receive_datagram(raw, now)
    else:
        node.receive_datagram(raw, now, decoded=decoded)


def _visible(node: Node) -> tuple[object, ...]:
    """Everything of ``node`` an observer sees after a step (pulling its output)."""
    state = node.state_to_persist()
    sent = node.datagrams_to_send()
    events = node.events()
    return dataclasses.asdict(node.stats), state, sent, events, node.next_timer()


def _same(daemon: Node, simulated: Node, what: str) -> None:
    seen, expected = _visible(daemon), _visible(simulated)
    if seen != expected:
        names = ("counters", "state to persist", "datagrams sent", "events", "next timer")
        differ = [n for n, a, b in zip(names, seen, expected, strict=True) if a != b]
        raise AssertionError(
            f"after {what}, the daemon's and the simulator's way of handing "
            f"over datagrams differ in: {', '.join(differ)}"
        )


def _run_timers(nodes: tuple[Node, Node], now: float) -> None:
    for node in nodes:
        for _ in range(64):  # bounded, in case a timer kept falling due at once
            due = node.next_timer()
            if due is None or due > now:
                break
            node.handle_timer(now)


def test_one_input(data: bytes) -> None:
    if not data:
        return
    flags = data[0]
    gate = Gate(bool(flags & FLAG_SMALL_GUARD))
    nodes = (new_node(bool(flags & FLAG_IN_VIEW)), new_node(bool(flags & FLAG_IN_VIEW)))
    _same(*nodes, "start")
    made: dict[bytes, Made] = {}
    by_pair: dict[tuple[bytes, int], bytes] = {}
    sealed: list[bytes] = []
    rolls = 0
    now = 0.0
    pos = 1
    while pos < len(data):
        op = data[pos] % OPS
        pos += 1
        wall_ms = int((now + WALL_OFFSET) * 1000)
        raw: bytes | None = None
        if op == MAKE and pos + MAKE_FIELDS.size <= len(data):
            who, counter, key, skew, length = MAKE_FIELDS.unpack_from(data, pos)
            pos += MAKE_FIELDS.size
            body = data[pos : pos + length]
            pos += length
            session = SESSIONS[(who & 0x7F) % len(SESSIONS)]
            if who & 0x80:
                counter += HIGH_COUNTER
            raw = by_pair.get((session, counter))
            if raw is None:
                key_id, key_bytes = KEYS[key % len(KEYS)]
                newest = (key >> 2) % 4
                sent_ms = wall_ms + 2 * skew
                raw = seal(key_id, key_bytes, session, counter, sent_ms, newest, body)
                made[raw] = Made(session, counter, key_id, sent_ms, body)
                by_pair[(session, counter)] = raw
                sealed.append(raw)
        elif op in (REPLAY, TAMPER, TRUNCATE) and sealed:
            fields = {REPLAY: INDEX, TAMPER: TAMPER_FIELDS, TRUNCATE: TRUNCATE_FIELDS}[op]
            if pos + fields.size > len(data):
                break
            values = fields.unpack_from(data, pos)
            pos += fields.size
            raw = sealed[values[0] % len(sealed)]
            if op == TAMPER and values[2]:
                at = values[1] % len(raw)
                raw = raw[:at] + bytes([raw[at] ^ values[2]]) + raw[at + 1 :]
            elif op == TRUNCATE:
                raw = raw[: values[1] % len(raw)]
        elif op == RAW and pos + INDEX.size <= len(data):
            (length,) = INDEX.unpack_from(data, pos)
            pos += INDEX.size
            raw = data[pos : pos + length]
            pos += length
        elif op == CLOCK and pos + INDEX.size <= len(data):
            (ms,) = INDEX.unpack_from(data, pos)
            pos += INDEX.size
            now += ms / 100
            _run_timers(nodes, now)
            _same(*nodes, "the clock moved")
            continue
        elif op == ROLL:
            if rolls < len(RINGS) - 1:
                rolls += 1
                gate.set_keys(RINGS[rolls], wall_ms)
                for node in nodes:
                    node.set_keyring(RINGS[rolls], now)
            continue
        else:
            break  # the record is cut short: the input ends here
        gate.take(raw, wall_ms, made, RINGS[rolls])
        nodes[0].receive_datagram(raw, now)
        _simulated(nodes[1], raw, now)
        _same(*nodes, "a datagram")


# ----------------------------------------------------------------------------- seeds


def _make(who: int, counter: int, body: bytes, *, key: int = 0, skew: int = 0) -> bytes:
    return bytes((MAKE,)) + MAKE_FIELDS.pack(who, counter, key, skew, len(body)) + body


def seeds() -> list[bytes]:
    """Real conversations sealed by their senders' sessions, with replays, damage,
    clock jumps and a key rollover mixed in; and single datagrams of every kind."""
    out: list[bytes] = []
    for in_view in (True, False):
        flags = FLAG_IN_VIEW if in_view else 0
        talk = datagram._conversation(in_view, 120, 0)
        counters = {2: 0, 3: 0}
        records: list[bytes] = []
        for step, body in talk:
            sender = decode_body(body, WireLimits()).sender
            records.append(bytes((CLOCK,)) + INDEX.pack(step // 10))
            records.append(_make(sender - 2, counters[sender], body))
            counters[sender] += 1
        out.append(bytes((flags,)) + b"".join(records))
        for i in range(0, len(records), 30):
            part = records[i : i + 30]
            out.append(bytes((flags,)) + b"".join(part))
            out.append(
                bytes((flags | FLAG_SMALL_GUARD,))
                + b"".join(part)
                + b"".join(
                    (
                        bytes((REPLAY,)) + INDEX.pack(0),
                        bytes((TAMPER,)) + TAMPER_FIELDS.pack(1, 40, 0x01),
                        bytes((TRUNCATE,)) + TRUNCATE_FIELDS.pack(2, 50),
                        bytes((ROLL,)),
                        _make(2, 0, b"x", key=1),
                        _make(3, 1, b"x"),
                        bytes((CLOCK,)) + INDEX.pack(4000),
                        bytes((REPLAY,)) + INDEX.pack(1),
                        bytes((ROLL,)),
                        _make(0, 9, b"y", key=1 | (2 << 2)),
                        _make(0x80, 3, b"z", key=2, skew=-16000),
                        bytes((RAW,)) + INDEX.pack(3) + b"\x03\x01\x00",
                    )
                )
            )
        for _, body in talk[:40]:
            out.append(bytes((flags,)) + _make(0, 0, body))
    return list(dict.fromkeys(data for data in out if len(data) <= MAX_LEN))
