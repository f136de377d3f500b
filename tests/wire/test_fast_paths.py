"""The codec's fast paths agree with the reference code, input by input.

``decode_body`` first tries ``_decode_fast`` (the common well-formed DATA / ACK_ONLY
datagram, checked inline) and falls back to ``_decode_obj`` (the reference decoder) on
anything it does not accept. The fast path must therefore never accept what the
reference refuses, never return something else, and never raise: then every malformed
datagram still gets the reference's ``DecodeError`` reason and detail. ``encode_body``
skips building lists where msgpack packs a tuple the same way; its bytes must be the
reference encoding's.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import msgpack
import pytest
from amcast.protocols.errors import DecodeError
from amcast.protocols.vocabulary import SERVICE_CODES, ServiceLevel
from amcast.protocols.wire.codec import (
    Datagram,
    Fragment,
    Kind,
    Vertex,
    _decode_fast,
    _decode_obj,
    decode_body,
    encode_body,
)
from amcast.protocols.wire.limits import MAX_NODE_ID, MAX_SEQ, MAX_VIEW_ID, WireLimits
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

FUZZ = settings(max_examples=4000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LIMITS = [
    WireLimits(),
    WireLimits(max_members=1, max_nack_ranges=1, max_vertices=1, max_items=1),
    WireLimits(max_members=0, max_nack_ranges=0, max_vertices=0, max_items=0),
]


def outcome(fn: Any, *args: Any) -> Any:
    try:
        return ("ok", fn(*args))
    except DecodeError as exc:
        return ("error", exc.reason, exc.detail)


def assert_same(obj: Any, limits: WireLimits) -> None:
    reference = outcome(_decode_obj, obj, limits)
    fast = _decode_fast(obj, limits)  # must not raise
    if fast is not None:
        assert reference == ("ok", fast)
        assert hash(fast) == hash(reference[1])
    try:
        body = msgpack.packb(obj, use_bin_type=True)
    except OverflowError:  # an int msgpack cannot carry: no datagram holds it
        return
    try:  # the unpacker's own limits come first (as before the fast path)
        msgpack.unpackb(body, use_list=True, raw=True, strict_map_key=True, max_str_len=0,
                        max_map_len=0, max_ext_len=0, max_bin_len=limits.max_datagram_bytes,
                        max_array_len=limits.max_array_len)
    except ValueError as exc:
        reference = ("error", "malformed", type(exc).__name__)
    assert outcome(decode_body, body, limits) == reference


# Values of every msgpack type, at and beyond the bounds the decoder checks. The empty
# list is built afresh for every draw: a shared one would be appended to by a later
# defect (into itself, even), so examples would change under hypothesis' feet.
odd = st.one_of(
    st.sampled_from([0, 1, 2, 3, -1, MAX_NODE_ID, MAX_NODE_ID + 1, MAX_SEQ, MAX_SEQ + 1,
                     MAX_VIEW_ID, 2**64 - 1, -(2**63), True, False, None, 1.0, 0.5,
                     float("inf"), float("nan"), b"", b"x"]),
    st.builds(list),
    st.integers(-(2**63), 2**64 - 1),
    st.binary(max_size=4),
    st.lists(st.integers(-2, 5), max_size=4),
    st.lists(st.integers(10, 20), min_size=3, max_size=3),  # a fragment, maybe
)


@st.composite
def valid_objs(draw: st.DrawFn) -> list[Any]:
    """A well-formed DATA or ACK_ONLY datagram as msgpack decodes it."""
    kind = draw(st.sampled_from([0, 1]))
    sender = draw(st.integers(0, 4))
    hb_seq = draw(st.integers(1, 9))
    acks = draw(st.lists(st.tuples(st.integers(0, 4), st.integers(1, 9)), max_size=8))
    nacks = draw(st.lists(st.integers(1, 9).map(lambda n: [n % 5, n, n + 1]), max_size=2))
    items: list[Any] = draw(st.lists(st.binary(max_size=8), min_size=1, max_size=3)) \
        if kind == 0 else []
    ts = draw(st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.integers(-5, 5)))
    vertex = [sender, hb_seq, [x for pair in acks for x in pair], draw(st.integers(0, 2)), ts,
              items]
    return [kind, sender, draw(st.integers(0, 3)), hb_seq, [x for t in nacks for x in t],
            [vertex]]


@st.composite
def datagram_objs(draw: st.DrawFn) -> Any:
    """A well-formed datagram with up to three defects: a value of any type or out of
    range anywhere in it, or an array one element shorter or longer."""
    obj = draw(valid_objs())
    for _ in range(draw(st.integers(0, 3))):
        parent, index = None, 0
        node: Any = obj
        while isinstance(node, list) and node and draw(st.integers(0, 3)):
            parent, index = node, draw(st.integers(0, len(node) - 1))
            node = node[index]
        how = draw(st.integers(0, 3))
        if parent is None:
            obj = draw(odd)
        elif how == 0 and isinstance(node, list):
            node.append(draw(odd))
        elif how == 1 and isinstance(node, list) and node:
            node.pop()
        elif how == 2 and isinstance(node, int) and not isinstance(node, bool):
            parent[index] = node + draw(st.sampled_from([-1, 1]))
        else:
            parent[index] = draw(odd)
    return obj


@pytest.mark.slow
@FUZZ
@given(datagram_objs(), st.sampled_from(LIMITS))
def test_fast_decoder_agrees_with_the_reference(obj: Any, limits: WireLimits) -> None:
    assert_same(obj, limits)


@pytest.mark.parametrize("limits", LIMITS)
@pytest.mark.parametrize(
    "obj",
    [
        [0, 1, 5, 3, [], [[1, 3, [0, 2, 2, 7], 1, 1.5, [b"m" * 100]]]],  # typical DATA
        [1, 1, 5, 3, [], [[1, 3, [0, 2, 2, 7], 2, 1.5, []]]],  # typical ACK_ONLY
        [0, 1, 5, 3, [2, 1, 4], [[1, 3, [], 0, 2, [b"", b"x"]]]],  # nacks, int send_ts
        [True, 1, 5, 3, [], [[1, 3, [], 1, 1.5, [b"m"]]]],  # bool kind
        [1, 1, 5, 3, [], [[True, 3, [], 1, 1.5, []]]],  # bool origin equal to the sender
        [1, 1, 5, 3, [], [[1, 3.0, [], 1, 1.5, []]]],  # float seq equal to hb_seq
        [1, 1, 5, 0, [], [[1, 0, [], 1, 1.5, []]]],  # seq 0
        [1, 1, 5, 3, [], [[1, 3, [0, 0], 1, 1.5, []]]],  # ack seq 0
        [1, 1, 5, 3, [], [[1, 3, [0], 1, 1.5, []]]],  # odd acks
        [1, 1, 5, 3, [2, 4, 3], [[1, 3, [], 1, 1.5, []]]],  # nack last < first
        [0, 1, 5, 3, [], [[1, 3, [], 1, float("inf"), [b"m"]]]],  # infinite send_ts
        [0, 1, 5, 3, [], [[1, 3, [], 1, 1.5, [[10, 2, b"abc"]]]]],  # a fragment
        [0, 1, 5, 3, [], [[1, 3, [], 1, 1.5, [[10, 9, b"abc"]]]]],  # fragment past its end
        [1, 1, 5, 3, [], [[1, 3, [], 1, 1.5, [b"m"]]]],  # ACK_ONLY with an item
        [0, 1, 5, 3, [], [[1, 3, [], 1, 1.5, []]]],  # DATA without one
        [0, 1, 5, 3, [], [[1, 4, [], 1, 1.5, [b"m"]]]],  # not the latest vertex
        [0, 1, 5, 3, [], [[1, 3, [], 7, 1.5, [b"m"]]]],  # unknown service
    ],
)
def test_explicit_cases(obj: Any, limits: WireLimits) -> None:
    assert_same(obj, limits)


def test_fast_built_records_are_ordinary_frozen_records() -> None:
    obj = [0, 1, 5, 3, [], [[1, 3, [0, 2], 1, 1.5, [b"m"]]]]
    dg = _decode_fast(obj, WireLimits())
    assert dg is not None
    v = Vertex(1, 3, ((0, 2),), ServiceLevel.AGREED, 1.5, (b"m",))
    assert dg == Datagram(Kind.DATA, 1, 5, 3, (), (v,))
    with pytest.raises(dataclasses.FrozenInstanceError):
        dg.vertices[0].seq = 4  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        dg.sender = 2  # type: ignore[misc]


# ----------------------------------------------------------------------------- encode


def reference_body(dg: Datagram) -> bytes:
    """``encode_body`` as it was before the fast path: lists everywhere, a new packer."""
    def vertex_obj(v: Vertex) -> list[Any]:
        acks: list[int] = []
        for node, seq in v.acks:
            acks.extend((node, seq))
        items = [it if isinstance(it, bytes) else [it.total_len, it.offset, it.chunk]
                 for it in v.items]
        return [v.origin, v.seq, acks, SERVICE_CODES[v.service], float(v.send_ts), items]

    nacks: list[int] = []
    for node, first, last in dg.nacks:
        nacks.extend((node, first, last))
    if dg.kind == Kind.HEARTBEAT:
        tail: list[Any] = []
        for node, seq in dg.acks:
            tail.extend((node, seq))
    else:
        tail = [vertex_obj(v) for v in dg.vertices]
    return msgpack.packb([int(dg.kind), dg.sender, dg.view, dg.hb_seq, nacks, tail],
                         use_bin_type=True)


node = st.integers(0, MAX_NODE_ID)
seq = st.integers(1, MAX_SEQ)
item = st.one_of(
    st.binary(max_size=300),
    st.builds(lambda c: Fragment(len(c) + 5, 5, c), st.binary(min_size=1, max_size=32)),
)
vertex = st.builds(
    Vertex, node, seq, st.lists(st.tuples(node, seq), max_size=9).map(tuple),
    st.sampled_from(list(ServiceLevel)), st.one_of(st.floats(allow_nan=False), st.integers(0, 9)),
    st.lists(item, max_size=3).map(tuple),
)
datagram = st.builds(
    Datagram, st.sampled_from(list(Kind)[:5]), node, st.integers(0, MAX_VIEW_ID), seq,
    st.lists(st.tuples(node, seq, seq), max_size=4).map(tuple),
    st.lists(vertex, max_size=3).map(tuple),
    st.lists(st.tuples(node, seq), max_size=4).map(tuple),
)


@pytest.mark.slow
@settings(max_examples=1000, deadline=None)
@given(datagram)
def test_encoding_is_byte_identical_to_the_reference(dg: Datagram) -> None:
    assert encode_body(dg) == reference_body(dg)


def test_a_failed_encoding_leaves_the_shared_packer_clean() -> None:
    v = Vertex(1, 3, ((object(), 1),), ServiceLevel.AGREED, 1.5, ())  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        encode_body(Datagram(Kind.DATA, 1, 0, 3, (), (v,)))
    dg = Datagram(Kind.ACK_ONLY, 1, 0, 3, (), (Vertex(1, 3, (), ServiceLevel.AGREED, 1.5, ()),))
    assert encode_body(dg) == reference_body(dg)
