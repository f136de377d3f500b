"""Round trips, authentication and hard limits of the datagram codec."""

from __future__ import annotations

import msgpack
import pytest
from amcast.protocols.errors import DecodeError
from amcast.protocols.vocabulary import ServiceLevel
from amcast.protocols.wire.codec import (
    Datagram,
    Fragment,
    Kind,
    Vertex,
    encode,
    encode_body,
)
from amcast.protocols.wire.limits import WireLimits, overhead_bound

from tests.wire.sealing import WALL_MS, authenticator, decode

KEY = b"k" * 32
AUTH = authenticator(KEY)
LIMITS = WireLimits()


def sample() -> Datagram:
    v = Vertex(3, 7, ((1, 4), (2, 9)), ServiceLevel.SAFE, 12.5, (b"a", b"", b"xyz" * 100))
    return Datagram(Kind.DATA, 3, 0, 7, ((1, 5, 6),), (v,))


def test_round_trip_all_kinds() -> None:
    frag = Vertex(1, 2, (), ServiceLevel.AGREED, 0.0, (Fragment(100, 40, b"x" * 20),))
    ack = Vertex(1, 3, ((0, 1),), ServiceLevel.AGREED, 1.0, ())
    cases = [
        sample(),
        Datagram(Kind.ACK_ONLY, 1, 0, 3, (), (ack,)),
        Datagram(Kind.REPAIR, 0, 0, 0, (), (frag, ack)),
        Datagram(Kind.NACK, 2, 5, 0, ((1, 1, 1), (3, 2, 10))),
        Datagram(Kind.HEARTBEAT, 2, 0, 99),
    ]
    for dg in cases:
        assert decode(encode(dg, AUTH, WALL_MS), AUTH, LIMITS) == dg


def test_insecure_round_trip_and_mode_mismatch_is_a_decode_error() -> None:
    insecure = authenticator(None)
    dg = sample()
    assert decode(encode(dg, insecure, WALL_MS), insecure, LIMITS) == dg
    with pytest.raises(DecodeError) as exc:
        decode(encode(dg, insecure, WALL_MS), AUTH, LIMITS)
    assert exc.value.reason == "auth_missing"
    with pytest.raises(DecodeError) as exc:
        decode(encode(dg, AUTH, WALL_MS), insecure, LIMITS)
    assert exc.value.reason == "auth_unexpected"


def test_wrong_key_and_any_flipped_bit_fail_authentication() -> None:
    data = encode(sample(), AUTH, WALL_MS)
    with pytest.raises(DecodeError) as exc:
        decode(data, authenticator(b"other key 16 bytes!"), LIMITS)
    assert exc.value.reason == "auth_failed"
    for i in range(2, len(data)):
        mutated = bytearray(data)
        mutated[i] ^= 0x10
        with pytest.raises(DecodeError) as exc:
            decode(bytes(mutated), AUTH, LIMITS)
        # bytes 2-3: the key id, which then names no key of the ring
        assert exc.value.reason == ("unknown_key" if i in (2, 3) else "auth_failed")


@pytest.mark.parametrize(
    ("obj", "reason"),
    [
        ([0, 1, 0, 1, [], []], "bad_field"),  # data without vertex
        ([2, 1, 0, 0, [], []], "bad_field"),  # empty nack
        ([9, 1, 0, 0, [], []], "bad_field"),  # unknown kind
        ([4, 1, 0, 0, [1, 2], []], "bad_field"),  # nacks not triples
        ([4, 1, 0, 0, [1, 5, 2], []], "bad_field"),  # nack last < first
        ([4, -1, 0, 0, [], []], "bad_field"),  # negative sender
        ([4, 2**40, 0, 0, [], []], "bad_field"),  # sender beyond 32 bits
        ([4, True, 0, 0, [], []], "bad_field"),  # bool is not an int
        ([4, 1, 0, 0, [], [], 0], "bad_field"),  # arity
        ({1: 2}, "malformed"),  # maps are refused by msgpack limits
        (["x"], "malformed"),  # strings too
        ([0, 1, 0, 1, [], [[1, 1, [], 1, float("nan"), [b"a"]]]], "bad_field"),
        ([0, 1, 0, 1, [], [[1, 1, [], 7, 0.0, [b"a"]]]], "bad_field"),  # bad service
        ([0, 1, 0, 1, [], [[1, 1, [2], 1, 0.0, [b"a"]]]], "bad_field"),  # odd acks
        ([0, 1, 0, 1, [], [[1, 1, [], 1, 0.0, [[10, 5, b"123456"]]]]], "bad_field"),
        ([0, 1, 0, 1, [], [[1, 1, [], 1, 0.0, [[10, 0, b""]]]]], "bad_field"),
        ([0, 1, 0, 1, [], [[1, 1, [], 1, 0.0, [[10, 0, b"1"], b"x"]]]], "bad_field"),
        ([0, 1, 0, 1, [], [[1, 1, [], 1, 0.0, [[2**30, 0, b"1"]]]]], "bad_field"),  # > max msg
        ([0, 1, 0, 2, [], [[1, 1, [], 1, 0.0, [b"a"]]]], "bad_field"),  # hb_seq != seq
        ([0, 2, 0, 1, [], [[1, 1, [], 1, 0.0, [b"a"]]]], "bad_field"),  # origin != sender
        ([1, 1, 0, 1, [], [[1, 1, [], 1, 0.0, [b"a"]]]], "bad_field"),  # ack-only with items
        ([3, 1, 0, 1, [], []], "bad_field"),  # empty repair
        ([4, 1, 0, 1, [], [[1, 1, [], 1, 0.0, []]]], "bad_field"),  # heartbeat with vertex
    ],
)
def test_structural_defects_are_decode_errors(obj: object, reason: str) -> None:
    data = AUTH.seal(msgpack.packb(obj, use_bin_type=True), WALL_MS)
    with pytest.raises(DecodeError) as exc:
        decode(data, AUTH, LIMITS)
    assert exc.value.reason == reason


def test_size_limits() -> None:
    with pytest.raises(DecodeError) as exc:
        decode(b"\x01\x01" + b"\0" * 70_000, AUTH, LIMITS)
    assert exc.value.reason == "too_large"
    small = WireLimits(max_members=2, max_nack_ranges=1, max_vertices=1)
    acks = [0, 1, 1, 1, 2, 1]
    obj = [0, 3, 0, 1, [], [[3, 1, acks, 1, 0.0, [b"a"]]]]
    with pytest.raises(DecodeError):
        decode(AUTH.seal(msgpack.packb(obj), WALL_MS), AUTH, small)
    obj = [2, 3, 0, 0, [1, 1, 1, 2, 1, 1], []]
    with pytest.raises(DecodeError):
        decode(AUTH.seal(msgpack.packb(obj), WALL_MS), AUTH, small)


def test_overhead_bound_is_an_upper_bound() -> None:
    for n_acks in (0, 1, 8, 64):
        for n_nacks in (0, 3):
            acks = tuple((2**32 - 1 - i, 2**62 - i) for i in range(n_acks))
            nacks = tuple((2**32 - 1, 2**62 - 1, 2**62) for _ in range(n_nacks))
            v = Vertex(2**32 - 1, 2**62, acks, ServiceLevel.AGREED, 1e300, (b"",))
            dg = Datagram(Kind.DATA, 2**32 - 1, 2**32 - 1, 2**62, nacks, (v,))
            size = len(encode(dg, AUTH, WALL_MS)) - 1  # minus the one-byte empty item
            assert size <= overhead_bound(n_acks, n_nacks)


def test_delta_acks_keep_the_header_small() -> None:
    v = Vertex(1, 10, ((2, 5),), ServiceLevel.AGREED, 1.0, (b"m",))
    body = encode_body(Datagram(Kind.DATA, 1, 0, 10, (), (v,)))
    assert len(body) <= 28  # 9 of which are the float64 send_ts
