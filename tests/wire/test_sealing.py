"""AES-256-GCM sealing, replay protection and key rollover (``auth``, ``replay``, ``keys``)."""

from __future__ import annotations

import os

import pytest
from amcast.protocols.errors import ConfigurationError, DecodeError
from amcast.protocols.wire.auth import Authenticator
from amcast.protocols.wire.keys import KEY_BYTES, Keyring
from amcast.protocols.wire.replay import ADVERT_HORIZON_MS, WINDOW
from hypothesis import given, settings
from hypothesis import strategies as st

KEY = bytes(range(32))
RING = Keyring.single(KEY)
T0 = 1_790_000_000_000  # ms


def node(ring: Keyring | None = RING, session: bytes | None = None,
         window_s: float = 30.0) -> Authenticator:
    return Authenticator(ring, session or os.urandom(16), replay_window_s=window_s)


def reason(auth: Authenticator, data: bytes, wall_ms: int) -> str | None:
    try:
        auth.open(data, wall_ms)
    except DecodeError as exc:
        return exc.reason
    return None


def test_a_sealed_datagram_hides_its_body_and_opens_once() -> None:
    payload = b"the secret payload " * 4
    a, b = node(), node()
    data = a.seal(payload, T0)
    assert payload not in data and b"secret" not in data
    assert bytes(b.open(data, T0 + 5)) == payload
    assert reason(b, data, T0 + 10) == "replayed"


def test_nonces_never_repeat_within_a_session_or_across_starts() -> None:
    a = node(session=b"s" * 16)
    first, second = a.seal(b"x", T0), a.seal(b"x", T0)
    assert first != second and first[22:30] != second[22:30]  # the counter is the nonce
    restarted = node()  # a new start draws a new session, hence a new subkey
    assert restarted.seal(b"x", T0)[6:22] != first[6:22]
    assert int.from_bytes(second[22:30], "big") == int.from_bytes(first[22:30], "big") + 1


def test_reordered_datagrams_within_the_window_are_admitted_each_once() -> None:
    a, b = node(), node()
    sent = [a.seal(bytes([i]), T0) for i in range(50)]
    for data in reversed(sent):
        assert reason(b, data, T0) is None
    assert {reason(b, d, T0) for d in sent} == {"replayed"}


def test_a_datagram_further_behind_than_the_window_is_refused() -> None:
    a, b = node(), node()
    old = a.seal(b"old", T0)
    for _ in range(WINDOW):
        a.seal(b"x", T0)
    assert reason(b, a.seal(b"newest", T0), T0) is None
    assert reason(b, old, T0) == "too_old"


def test_stale_and_future_send_times_are_refused_whatever_the_receiver_remembers() -> None:
    a = node()
    data = a.seal(b"x", T0)
    assert reason(node(), data, T0 + 30_001) == "stale"
    assert reason(node(), data, T0 + 2 * 86_400_000) == "stale"  # days later
    assert reason(node(), a.seal(b"x", T0 + 30_001), T0) == "future"
    assert reason(node(), data, T0 + 30_000) is None  # the edge of the window


def test_a_session_is_forgotten_only_once_its_datagrams_are_stale() -> None:
    a, b = node(), node()
    data = a.seal(b"x", T0)
    assert reason(b, data, T0) is None
    b.guard.sweep(T0 + 29_000)
    assert len(b.guard.sessions) == 1  # could still admit: kept
    b.guard.sweep(T0 + 31_000)
    assert not b.guard.sessions
    assert reason(b, data, T0 + 31_000) == "stale"


def test_replays_after_the_sender_restarted_are_refused() -> None:
    before = node(session=b"1" * 16)
    receiver = node()
    captured = [before.seal(bytes([i]), T0) for i in range(5)]
    for data in captured:
        receiver.open(data, T0)
    after = node(session=b"2" * 16)  # the sender restarted
    assert reason(receiver, after.seal(b"new", T0 + 1000), T0 + 1000) is None
    assert {reason(receiver, d, T0 + 2000) for d in captured} == {"replayed"}
    assert {reason(receiver, d, T0 + 40_000) for d in captured} == {"stale"}


def test_forgeries_cost_no_memory() -> None:
    b = node()
    other = Keyring.single(b"k" * 32)
    for _ in range(2000):
        assert reason(b, node(other).seal(b"x", T0), T0) == "auth_failed"
    flipped = bytearray(node().seal(b"x", T0))
    flipped[3] ^= 0x40
    assert reason(b, bytes(flipped), T0) == "unknown_key"
    assert not b.guard.sessions and not b._recv_ciphers


def test_an_insecure_node_and_a_keyed_node_refuse_each_other() -> None:
    insecure, keyed = node(None), node()
    assert reason(keyed, insecure.seal(b"x", T0), T0) == "auth_missing"
    assert reason(insecure, keyed.seal(b"x", T0), T0) == "auth_unexpected"
    assert bytes(insecure.open(insecure.seal(b"x", T0), T0)) == b"x"


def test_rollover_sends_with_the_newest_key_every_live_peer_holds() -> None:
    k1, k2 = os.urandom(32), os.urandom(32)
    old, both = Keyring(((1, k1),)), Keyring(((1, k1), (2, k2)))
    a, b = node(old), node(both)
    t = T0
    # b alone knows key 2: it sends with it (nobody to wait for) ...
    assert b.seal(b"x", t)[2:4] == (2).to_bytes(2, "big")
    # ... until it hears a, whose newest key is 1: it falls back to 1 (within 500 ms)
    b.open(a.seal(b"hello", t), t)
    t += 600
    data = b.seal(b"to a", t)
    assert data[2:4] == (1).to_bytes(2, "big")
    assert reason(a, data, t) is None  # a can read everything b sends
    # a gets the new ring (SIGHUP): it still sends with key 1 while b is heard ...
    a.set_keys(both, t)
    assert a.send_key_id == 2  # b advertises 2 as well
    t += 600
    assert a.seal(b"x", t)[2:4] == (2).to_bytes(2, "big")
    b.open(a.seal(b"x", t), t)
    t += 600
    assert b.seal(b"x", t)[2:4] == (2).to_bytes(2, "big")
    # a peer not heard for the horizon no longer holds the choice back
    c = node(old)
    b.open(c.seal(b"x", t), t)
    t += 600
    assert b.seal(b"x", t)[2:4] == (1).to_bytes(2, "big")
    t += ADVERT_HORIZON_MS + 600
    b.seal(b"x", t)
    assert b.seal(b"x", t + 600)[2:4] == (2).to_bytes(2, "big")


def test_after_retiring_the_old_key_its_datagrams_are_refused() -> None:
    k1, k2 = os.urandom(32), os.urandom(32)
    sender = node(Keyring(((1, k1),)))
    receiver = node(Keyring(((2, k2),)))
    assert reason(receiver, sender.seal(b"x", T0), T0) == "unknown_key"


def test_key_file_text_round_trips_and_rejects_bad_rings() -> None:
    ring = Keyring.single(os.urandom(KEY_BYTES)).rotated(os.urandom(KEY_BYTES))
    assert Keyring.parse(ring.format()) == ring
    assert ring.retired().ids == (2,)
    for text, expected in [
        ("", "holds no key"), ("1 zz", "not hex"), ("1 abcd", "has 2 bytes"),
        (f"1 {KEY.hex()}\n1 {KEY.hex()}", "distinct"), (f"0 {KEY.hex()}", "outside"),
        ("x", "expected '<id> <hex key>'"),
    ]:
        with pytest.raises(ConfigurationError, match=expected):
            Keyring.parse(text)


@settings(max_examples=300, deadline=None)
@given(order=st.lists(st.integers(0, 39), min_size=1, max_size=200),
       gaps=st.lists(st.integers(0, 20_000), min_size=1, max_size=200))
def test_any_interleaving_of_copies_admits_each_datagram_exactly_once(
    order: list[int], gaps: list[int]
) -> None:
    """Property: whatever order and number of copies arrive within the window, every
    datagram is admitted once and every later copy is refused."""
    senders = [node(session=bytes([i]) * 16) for i in range(2)]
    sent = [senders[i % 2].seal(bytes([i]), T0) for i in range(40)]
    receiver = node()
    admitted: list[int] = []
    for k, i in enumerate(order):
        wall = T0 + gaps[k % len(gaps)]
        if reason(receiver, sent[i], wall) is None:
            admitted.append(i)
    assert sorted(admitted) == sorted(set(order))
