"""Differential tests: the native data path (``amcast_native``) and the Python reference
(``protocols/wire/auth.py``, ``replay.py``) take the same inputs and must give the same
results: the same sealed bytes, the same accept/refuse decisions with the same
``DecodeError`` reason and detail, the same bodies, the same replay-guard state.

Skipped, with the reason, where the extension is not built (``make rust``)."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from amcast.protocols.errors import DecodeError
from amcast.protocols.wire.auth import Authenticator, derive
from amcast.protocols.wire.keys import Keyring
from amcast.protocols.wire.native import NativeSealer, make_sealer, native_module
from amcast.protocols.wire.replay import ReplayGuard

from fuzz.targets import native_sealed, sealed

NATIVE = native_module()
pytestmark = pytest.mark.skipif(
    NATIVE is None, reason="amcast_native is not built (make rust): only the Python core runs")

REGRESSIONS = Path(__file__).resolve().parents[2] / "fuzz" / "regressions" / "sealed"
WALL = 1_800_000_000_000
KEY_1, KEY_2, KEY_3 = bytes(range(32)), bytes(range(32, 64)), bytes(range(64, 96))
RING = Keyring(((1, KEY_1), (2, KEY_2)))
OWN = bytes([0xEE]) * 16


def pair(ring: Keyring | None = RING, max_sessions: int = 1024,
         window_s: float = 30.0) -> tuple[Authenticator, Any]:
    assert NATIVE is not None
    return (Authenticator(ring, OWN, replay_window_s=window_s, max_sessions=max_sessions),
            NATIVE.Authenticator(ring.keys if ring is not None else None, OWN,
                                 replay_window_s=window_s, max_sessions=max_sessions))


def test_the_fuzz_target_agrees_on_its_seeds_and_the_sealed_regressions() -> None:
    inputs = native_sealed.seeds() + [p.read_bytes() for p in sorted(REGRESSIONS.iterdir())]
    for data in inputs:
        native_sealed.test_one_input(data)


def test_the_fuzz_target_agrees_on_mutated_seeds() -> None:
    """Seeds with random bytes flipped, inserted, deleted (a seeded generator)."""
    rng = random.Random(20261127)
    seeds = native_sealed.seeds()
    for _ in range(400):
        data = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 8)):
            at = rng.randrange(len(data) + 1)
            action = rng.random()
            if action < 0.5 and at < len(data):
                data[at] ^= 1 << rng.randrange(8)
            elif action < 0.75:
                data[at:at] = bytes([rng.randrange(256)])
            elif at < len(data):
                del data[at]
        native_sealed.test_one_input(bytes(data))


def test_the_fuzz_target_catches_a_disagreement(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Python ``open`` that forgets the replay check accepts what native refuses."""
    talk = (bytes((0,)) + sealed._make(0, 0, b"body") + bytes((sealed.REPLAY,))
            + sealed.INDEX.pack(0))
    native_sealed.test_one_input(talk)

    def lax_open(self: Authenticator, data: bytes, wall_ms: int) -> bytes:
        header, body = self.unseal(data)
        assert header is not None
        self.guard.admit(header.session, header.counter, header.sent_ms, wall_ms,
                         header.key_id, header.newest_key)
        return bytes(body)

    monkeypatch.setattr(Authenticator, "open", lax_open)
    with pytest.raises(AssertionError, match="disagree"):
        native_sealed.test_one_input(talk)


@pytest.mark.parametrize("ring", [RING, Keyring.single(b"sixteen byte key", 7), None],
                         ids=["ring", "short-key", "insecure"])
def test_seal_is_byte_for_byte_the_same(ring: Keyring | None) -> None:
    rng = random.Random(1)
    pure, native = pair(ring)
    for i in range(300):
        body = rng.randbytes(rng.choice((0, 1, 15, 16, 17, 100, 1400, 5000)))
        wall = WALL + i * rng.randrange(0, 900)
        assert pure.seal(body, wall) == native.seal(body, wall)
    assert native.counter == (300 if ring is not None else 0)


class Sender:
    """A peer session sealing as a key holder does, with any header fields."""

    def __init__(self, session: bytes) -> None:
        self.session = session
        self.counter = 0

    def seal(self, key_id: int, key: bytes, counter: int, sent_ms: int, newest: int,
             body: bytes) -> bytes:
        return sealed.seal(key_id, key, self.session, counter, sent_ms, newest, body)


def random_datagram(rng: random.Random, senders: list[Sender], wall: int,
                    sent: list[bytes]) -> bytes:
    """One datagram: mostly genuine and fresh, else replayed, stale, future, forged,
    truncated, corrupted, under an unknown key, with a jumping counter or raw bytes."""
    kind = rng.random()
    if sent and kind < 0.12:
        return rng.choice(sent)  # replayed
    if sent and kind < 0.2:
        raw = bytearray(rng.choice(sent))
        raw[rng.randrange(len(raw))] ^= 1 << rng.randrange(8)  # corrupted anywhere
        return bytes(raw)
    if sent and kind < 0.26:
        raw = rng.choice(sent)
        return raw[: rng.randrange(len(raw))]  # truncated
    if kind < 0.29:
        return rng.randbytes(rng.randrange(0, 80))  # noise
    sender = rng.choice(senders)
    step = rng.random()
    if step < 0.7:
        counter = sender.counter
    elif step < 0.85:
        counter = max(0, sender.counter - rng.randrange(1, 5000))  # late, or below the window
    else:
        counter = sender.counter + rng.choice((2, 63, 64, 65, 4095, 4096, 4097, 100_000))
    sender.counter = max(sender.counter, counter + 1)
    skew = rng.choice((0, 0, 0, 5, -250, 29_999, -30_000, 30_001, -30_001, 10**6))
    key_id, key = rng.choice(((1, KEY_1), (1, KEY_1), (2, KEY_2), (3, KEY_3)))
    newest = rng.choice((1, 2, 2, 3))
    raw = sender.seal(key_id, key, counter, wall + skew, newest, rng.randbytes(rng.randrange(64)))
    sent.append(raw)
    return raw


@pytest.mark.parametrize("seed", range(6))
def test_random_datagrams_get_the_same_decisions(seed: int) -> None:
    rng = random.Random(seed)
    small = seed % 2 == 1
    pure, native = pair(max_sessions=3 if small else 1024)
    senders = [Sender(bytes([i + 1]) * 16) for i in range(5)] + [Sender(OWN)]
    wall = WALL
    sent: list[bytes] = []
    reasons: Counter[str] = Counter()
    for _ in range(1500):
        wall += rng.choice((0, 0, 1, 7, 300, 999, 1000, 2500))
        raw = random_datagram(rng, senders, wall, sent)
        got = native_sealed.outcome(lambda raw=raw, wall=wall: pure.open(raw, wall))
        assert got == native_sealed.outcome(lambda raw=raw, wall=wall: native.open(raw, wall))
        reasons[got[1][0] if got[1] else "accepted"] += 1
        if rng.random() < 0.05:
            body = rng.randbytes(rng.randrange(100))
            assert pure.seal(body, wall) == native.seal(body, wall)
    pairs = native_sealed.Pair.__new__(native_sealed.Pair)
    pairs.pure, pairs.native = pure, native
    pairs.same_guards()
    expected = {"accepted", "replayed", "auth_failed", "truncated", "stale", "future",
                "unknown_key", "too_old"}
    assert expected <= set(reasons), reasons
    if small:
        assert native.evicted > 0


def test_insecure_and_prefix_refusals_agree() -> None:
    cases = [b"", b"\x03", b"\x02\x00x", b"\x03\x02x", b"\x03\x01" + bytes(60), b"\x03\x00body",
             b"\x03\x01" + bytes(51), b"\x03\x81" + bytes(60)]
    for ring in (RING, None):
        pure, native = pair(ring)
        for raw in cases:
            assert native_sealed.outcome(lambda a=pure, r=raw: a.open(r, WALL)) == (
                native_sealed.outcome(lambda a=native, r=raw: a.open(r, WALL)))


def test_a_rollover_chooses_the_same_sending_keys() -> None:
    """The sending key follows the peers' newest ids: after set_keys, as they advertise."""
    pure, native = pair(Keyring.single(KEY_1))
    peer = Sender(bytes([5]) * 16)
    wall = WALL
    for ring, advertised in ((RING, 1), (RING, 2), (Keyring.single(KEY_2, 2), 2)):
        pure.set_keys(ring, wall)
        native.set_keys(ring.keys, wall)
        for _ in range(3):
            wall += 600
            raw = peer.seal(ring.ids[-1] if advertised == 2 else 1,
                            KEY_2 if advertised == 2 else KEY_1, peer.counter, wall, advertised,
                            b"x")
            peer.counter += 1
            assert native_sealed.outcome(lambda r=raw, w=wall: pure.open(r, w)) == (
                native_sealed.outcome(lambda r=raw, w=wall: native.open(r, w)))
            assert pure.seal(b"y", wall) == native.seal(b"y", wall)
            assert pure.send_key_id == native.send_key_id


def test_the_replay_guard_alone_decides_alike() -> None:
    """Random check/admit/sweep/newest_of_peers sequences on both guards, eviction ties
    included (several sessions heard at the same millisecond)."""
    assert NATIVE is not None
    rng = random.Random(7)
    for max_sessions in (1, 2, 5, 64):
        pure, native = ReplayGuard(2.5, max_sessions), NATIVE.ReplayGuard(2.5, max_sessions)
        assert pure.window_ms == native.window_ms
        sessions = [bytes([i]) * 16 for i in range(8)]
        highest = dict.fromkeys(sessions, 0)
        wall = WALL
        for _ in range(3000):
            wall += rng.choice((0, 0, 0, 1, 400, 1000, 1999, 2600))
            session = rng.choice(sessions)
            counter = max(0, highest[session] + rng.choice((-5000, -4096, -64, -1, 0, 1, 2, 64,
                                                            4095, 4096, 9000)))
            sent = wall + rng.choice((0, -2500, -2501, 2500, 2501, -30, 900))
            outcomes = []
            for guard in (pure, native):
                try:
                    guard.check(session, counter, sent, wall)
                except Exception as exc:
                    outcomes.append((type(exc).__name__, str(exc)))
                else:
                    outcomes.append(None)
            assert outcomes[0] == outcomes[1]
            if outcomes[0] is None:
                key, newest = rng.randrange(1, 4), rng.randrange(1, 4)
                state = pure.admit(session, counter, sent, wall, key, newest)
                native.admit(session, counter, sent, wall, key, newest)
                assert native_sealed.pure_state(state) == native.state(session)
                highest[session] = max(highest[session], counter)
            op = rng.random()
            if op < 0.05:
                pure.sweep(wall, force=op < 0.01)
                native.sweep(wall, force=op < 0.01)
            elif op < 0.2:
                pure.maybe_sweep(wall)
                native.maybe_sweep(wall)
            own = rng.choice(sessions)
            assert pure.newest_of_peers(wall, own) == native.newest_of_peers(wall, own)
            assert len(pure.sessions) == len(native) and pure.evicted == native.evicted
            for s in sessions:
                st = pure.sessions.get(s)
                assert (None if st is None else native_sealed.pure_state(st)) == native.state(s)


def test_derive_matches_the_reference_cipher() -> None:
    """A datagram the native side seals opens under the Python subkey derivation."""
    _, native = pair()
    raw = native.seal(b"payload", WALL)
    header = raw[:38]
    body = derive(KEY_2, OWN).decrypt(bytes(4) + header[22:30], raw[38:], header)
    assert body == b"payload"


# ---- the Node's sealer on the native core (``native.NativeSealer``) ------------------
def sealers(max_sessions: int = 1024, ring: Keyring | None = RING,
            session: bytes = OWN) -> tuple[Any, Any]:
    """The sealer the Node builds on each core (``native.make_sealer``)."""
    made = [make_sealer(ring, session, replay_window_s=30.0, max_sessions=max_sessions,
                        core=core, seal=core) for core in ("pure", "native")]
    assert type(made[0]) is Authenticator and type(made[1]) is NativeSealer
    return made[0], made[1]


def states(sealer: Any) -> dict[bytes, tuple[Any, ...]]:
    """Every session's replay state with the sender the Node bound to it."""
    return {s: (*native_sealed.pure_state(st), st.sender)
            for s, st in sealer.guard.sessions.items()}


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("path", ["open", "unseal"])
def test_the_nodes_native_sealer_decides_and_binds_sessions_as_the_python_one(
        seed: int, path: str) -> None:
    """The same stream to the Node's two sealers, by ``open`` (the daemon) or by
    ``unseal`` then ``admit`` (the simulator): the same bodies and refusals, the same
    state object handed back exactly when the Python guard hands back the same one (a
    session's state is new after an eviction), the same states, senders and evictions."""
    rng = random.Random(seed)
    pure, native = sealers(max_sessions=3 if seed % 2 else 1024)
    senders = [Sender(bytes([i + 1]) * 16) for i in range(5)] + [Sender(OWN)]
    wall, sent = WALL, []
    last: list[dict[bytes, Any]] = [{}, {}]
    for _ in range(1200):
        wall += rng.choice((0, 0, 1, 7, 300, 999, 1000, 2500))
        raw = random_datagram(rng, senders, wall, sent)
        got = []
        for k, sealer in enumerate((pure, native)):
            def one(sealer: Any = sealer, raw: bytes = raw, wall: int = wall) -> Any:
                if path == "open":
                    body = sealer.open(raw, wall)
                    return body, sealer.last_admitted
                sealed_header, body = sealer.unseal(raw)
                return body, sealer.admit(sealed_header, wall)
            try:
                body, state = one()
            except DecodeError as exc:
                got.append((None, exc.reason, exc.detail))
                continue
            session = raw[6:22]
            same = last[k].get(session) is state
            last[k][session] = state
            if state.sender is None:
                state.sender = seed  # the Node binds a session to its sender
            got.append((bytes(body), state.last_heard_ms, same))
        assert got[0] == got[1], raw.hex()
        if rng.random() < 0.05:
            body = rng.randbytes(rng.randrange(100))
            assert pure.seal(body, wall) == native.seal(body, wall)
    assert states(pure) == states(native)
    assert pure.guard.evicted == native.guard.evicted
    if seed % 2:
        assert native.guard.evicted > 0


@pytest.mark.parametrize("ring", [RING, None], ids=["sealed", "insecure"])
def test_a_native_sealers_datagrams_open_in_the_python_one_and_back(
        ring: Keyring | None) -> None:
    rng = random.Random(7)
    a = sealers(ring=ring, session=bytes([1]) * 16)
    b = sealers(ring=ring, session=bytes([2]) * 16)
    wall = WALL
    for _ in range(300):
        wall += rng.choice((0, 1, 600))
        body = rng.randbytes(rng.choice((0, 1, 64, 1400, 9000)))
        for sender, receiver in ((a[1], b[0]), (b[0], a[1]), (a[0], b[1]), (b[1], a[0])):
            assert bytes(receiver.open(sender.seal(body, wall), wall)) == body
    for sealer in (*a, *b):
        assert sealer.last_admitted is None or sealer.last_admitted.last_heard_ms == wall


def test_a_key_rollover_at_the_native_sealer_chooses_the_same_sending_keys() -> None:
    pure, native = sealers(ring=Keyring.single(KEY_1))
    peer = Sender(bytes([5]) * 16)
    wall = WALL
    for ring in (RING, RING, Keyring.single(KEY_2, 2)):
        pure.set_keys(ring, wall)
        native.set_keys(ring, wall)
        assert native.keys is ring and native.secure
        for _ in range(3):
            wall += 600
            raw = peer.seal(ring.ids[-1], KEY_2 if ring.ids[-1] == 2 else KEY_1,
                            peer.counter, wall, ring.ids[-1], b"x")
            peer.counter += 1
            assert native_sealed.outcome(lambda r=raw, w=wall: pure.open(r, w)) == (
                native_sealed.outcome(lambda r=raw, w=wall: native.open(r, w)))
            assert pure.seal(b"y", wall) == native.seal(b"y", wall)
            assert pure.send_key_id == native.send_key_id
    assert states(pure) == states(native)
    insecure = sealers(ring=None)[1]
    with pytest.raises(ValueError, match="insecure"):
        insecure.set_keys(RING, wall)


def test_the_sealer_checker_catches_a_disagreement() -> None:
    """``states`` sees a state the native guard does not hold as the Python one does."""
    pure, native = sealers()
    peer = Sender(bytes([5]) * 16)
    raw = peer.seal(1, KEY_1, 0, WALL, 1, b"x")
    pure.open(raw, WALL)
    native.open(raw, WALL)
    assert states(pure) == states(native)
    native.last_admitted.sender = 3  # a binding the Python side did not make
    assert states(pure) != states(native)
    later = peer.seal(1, KEY_1, 1, WALL + 5, 1, b"y")
    native.open(later, WALL + 5)
    assert states(pure) != states(native)
