"""Fuzzing the decoder: arbitrary bytes never raise anything but ``DecodeError``.

Both modes are fuzzed: with a key (every input must fail the tag check or, for inputs
built with the key, decode or fail cleanly) and insecure (the parser itself is exposed).
"""

from __future__ import annotations

import msgpack
import pytest
from amcast.protocols.errors import DecodeError
from amcast.protocols.vocabulary import ServiceLevel
from amcast.protocols.wire.auth import Authenticator
from amcast.protocols.wire.codec import Datagram, Fragment, Kind, Vertex, encode
from amcast.protocols.wire.limits import WireLimits
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.wire.sealing import WALL_MS, authenticator, decode

KEYED = authenticator(b"f" * 32)
INSECURE = authenticator(None)
LIMITS = WireLimits(max_members=16)
FUZZ = settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def decodes_or_fails_cleanly(data: bytes, auth: Authenticator) -> None:
    try:
        result = decode(data, auth, LIMITS)
    except DecodeError as exc:
        assert exc.reason
        return
    assert isinstance(result, Datagram)


node = st.integers(0, 20)
seq = st.integers(1, 2**20)
item = st.one_of(
    st.binary(max_size=64),
    st.builds(lambda c: Fragment(len(c) + 5, 5, c), st.binary(min_size=1, max_size=32)),
)
vertex = st.builds(
    Vertex,
    node,
    seq,
    st.lists(st.tuples(node, seq), max_size=6).map(tuple),
    st.sampled_from(list(ServiceLevel)),
    st.floats(allow_nan=False, allow_infinity=False),
    st.lists(item, min_size=0, max_size=3).map(tuple),
)
datagram = st.builds(
    Datagram,
    st.sampled_from(list(Kind)),
    node,
    st.integers(0, 3),
    st.integers(0, 2**20),
    st.lists(st.tuples(node, st.just(1), st.integers(1, 9)), max_size=4).map(tuple),
    st.lists(vertex, max_size=3).map(tuple),
)


@pytest.mark.slow
@FUZZ
@given(st.binary(max_size=2048))
def test_random_bytes(data: bytes) -> None:
    decodes_or_fails_cleanly(data, KEYED)
    decodes_or_fails_cleanly(data, INSECURE)
    decodes_or_fails_cleanly(b"\x01\x00" + data, INSECURE)


@pytest.mark.slow
@FUZZ
@given(datagram, st.data())
def test_mutated_valid_datagrams(dg: Datagram, data: st.DataObject) -> None:
    for auth in (KEYED, INSECURE):
        raw = bytearray(encode(dg, auth, WALL_MS))
        for _ in range(data.draw(st.integers(1, 4))):
            i = data.draw(st.integers(0, len(raw) - 1))
            raw[i] = data.draw(st.integers(0, 255))
        decodes_or_fails_cleanly(bytes(raw), auth)
        if data.draw(st.booleans()):
            cut = data.draw(st.integers(0, len(raw)))
            decodes_or_fails_cleanly(bytes(raw[:cut]) + bytes(raw[cut + 1 :]), auth)


@settings(max_examples=300, deadline=None)
@given(datagram)
def test_truncated_at_every_offset(dg: Datagram) -> None:
    for auth in (KEYED, INSECURE):
        raw = encode(dg, auth, WALL_MS)
        for cut in range(len(raw)):
            try:
                decode(raw[:cut], auth, LIMITS)
            except DecodeError:
                continue
            raise AssertionError(f"truncation at {cut} of {len(raw)} decoded")


@pytest.mark.slow
@FUZZ
@given(st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.floats(),
              st.binary(max_size=16), st.text(max_size=4)),
    lambda children: st.lists(children, max_size=8)
    | st.dictionaries(st.integers(0, 2**32), children, max_size=3),
    max_leaves=40,
))
def test_arbitrary_msgpack_documents(obj: object) -> None:
    body = msgpack.packb(obj, use_bin_type=True)
    decodes_or_fails_cleanly(KEYED.seal(body, WALL_MS), KEYED)
    decodes_or_fails_cleanly(INSECURE.seal(body, WALL_MS), INSECURE)


def test_deep_nesting_and_huge_declared_lengths() -> None:
    deep = b"\x91" * 100_000 + b"\xc0"  # 100k nested one-element arrays
    huge_array = b"\xdd\xff\xff\xff\xff"  # array32 declaring 4 G elements, no content
    huge_bin = b"\xc6\xff\xff\xff\xff" + b"x" * 10  # bin32 declaring 4 GB
    huge_in_field = msgpack.packb([4, 1, 0, 0, [], []])[:-1] + b"\xdd\x7f\xff\xff\xff"
    for body in (deep, huge_array, huge_bin, huge_in_field, b"\xc1", b""):
        for auth in (KEYED, INSECURE):
            try:
                decode(auth.seal(body, WALL_MS), auth, LIMITS)
            except DecodeError:
                continue
            raise AssertionError(body[:16])
