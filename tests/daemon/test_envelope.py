"""Envelopes: round trip, garbage rejected (fuzzed), splitting keeps order and the limit."""

from __future__ import annotations

from typing import Any

import msgpack
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amcast.socket_protocol import (
    MAX_CLIENT_ID,
    decode_envelope,
    encode_envelope,
    split_payloads,
)


def test_round_trip_and_garbage() -> None:
    data = encode_envelope(7, ["a", "b"], [b"x", b""])
    assert decode_envelope(data) == [7, ["a", "b"], [b"x", b""]]
    for bad in (b"", b"\xc1", encode_envelope(7, ["a"], [b"x"])[:-1], b"\x93\x01\x02\x03"):
        assert decode_envelope(bad) is None


@given(st.lists(st.binary(max_size=300), min_size=1, max_size=50), st.integers(64, 2000))
def test_split_keeps_order_and_bounds_parts(payloads: list[bytes], limit: int) -> None:
    parts = split_payloads(payloads, limit)
    assert [p for part in parts for p in part] == payloads
    for part in parts:
        assert part
        assert len(part) == 1 or sum(len(p) + 8 for p in part) <= limit


# ---- fuzzing the envelope decoder like the datagram decoder (tests/wire/test_fuzz.py):
# envelopes come from peers, so ``decode_envelope`` must never raise and must accept
# exactly the well-formed ones.

FUZZ = settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])

msgpack_value = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats()
    | st.text(max_size=8) | st.binary(max_size=8),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(max_size=4) | st.integers(0, 9), inner, max_size=3),
    max_leaves=12,
)


def well_formed(obj: Any) -> bool:
    if type(obj) is not list or len(obj) != 3:
        return False
    client, groups, payloads = obj
    return (
        type(client) is int and 0 <= client <= MAX_CLIENT_ID
        and type(groups) is list and len(groups) > 0
        and all(type(g) is str and g for g in groups)
        and type(payloads) is list and len(payloads) > 0
        and all(type(p) is bytes for p in payloads)
    )


def check(data: bytes) -> None:
    env = decode_envelope(data)  # must not raise
    if env is not None:
        assert well_formed(env), env


@FUZZ
@given(st.binary(max_size=200))
def test_fuzz_arbitrary_bytes(data: bytes) -> None:
    check(data)


@FUZZ
@given(msgpack_value | st.lists(msgpack_value, min_size=3, max_size=3))
def test_fuzz_msgpack_objects_decode_only_when_well_formed(obj: Any) -> None:
    data = msgpack.packb(obj, use_bin_type=True)
    env = decode_envelope(data)
    assert (env is not None) == well_formed(obj), obj
    if env is not None:
        assert env == obj


envelope_parts = st.tuples(
    st.integers(0, MAX_CLIENT_ID),
    st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=4),
    st.lists(st.binary(max_size=16), min_size=1, max_size=4),
)


@FUZZ
@given(envelope_parts, st.integers(0, 400), st.binary(min_size=1, max_size=3))
def test_fuzz_mutated_envelopes(parts: tuple[int, list[str], list[bytes]], at: int,
                                junk: bytes) -> None:
    good = encode_envelope(*parts)
    assert decode_envelope(good) == list(parts)
    i = at % (len(good) + 1)
    check(good[:i] + junk + good[i:])  # inserted
    check(good[:i] + junk + good[i + len(junk):])  # overwritten
    check(good[:i])  # truncated


def test_the_malformed_envelopes_of_issue_10_are_refused() -> None:
    for obj in ([1, [[1]], [b"x"]], [1, ["g"], [1, 2]], [1, [""], [b"x"]], [1, ["g"], []],
                [-1, ["g"], [b"x"]], [True, ["g"], [b"x"]], [1, ["g"], [b"x"], 4],
                [2**64 - 1, ["g"], [b"x"]], {"a": 1}, [1, "g", [b"x"]]):
        assert decode_envelope(msgpack.packb(obj, use_bin_type=True)) is None, obj
