"""Differential tests of the datagram decoder: the native one (``amcast_native.Decoder``
through ``protocols/wire/native``) and the Python reference (``codec.decode_body``) take
the same bodies and must give equal datagrams (equal, same hash, same ``repr``) or the
same ``DecodeError`` reason and detail, under the default limits and small ones.

The bodies: real datagrams of every kind encoded by the Python encoder from seeded
random fields, the same mutated (bits flipped, bytes inserted, deleted, cut, spliced),
random msgpack trees of every msgpack type near the datagram's shape, and raw bytes.
Skipped, with the reason, where the extension is not built (``make rust``)."""

from __future__ import annotations

import random
import struct
from collections import Counter
from functools import partial
from typing import Any

import msgpack
import pytest
from amcast.protocols.errors import DecodeError
from amcast.protocols.vocabulary import ServiceLevel
from amcast.protocols.wire import native
from amcast.protocols.wire.codec import (
    Datagram,
    Fragment,
    Kind,
    Vertex,
    decode_body,
    encode_body,
)
from amcast.protocols.wire.limits import MAX_NODE_ID, MAX_SEQ, MAX_VIEW_ID, WireLimits
from amcast.protocols.wire.native import native_decoder, native_module

from fuzz.targets import datagram, native_decode

NATIVE = native_module()
pytestmark = pytest.mark.skipif(
    NATIVE is None, reason="amcast_native is not built (make rust): only the Python core runs")

LIMITS = (native_decode.DEFAULT, native_decode.SMALL)


def decoder(limits: WireLimits) -> Any:
    assert NATIVE is not None
    return native_decoder(NATIVE, limits)


def agree(bodies: list[bytes], limits: WireLimits = native_decode.DEFAULT) -> Counter[str]:
    """Every body decodes alike; the count of each outcome (kind name or reason)."""
    native = decoder(limits)
    seen: Counter[str] = Counter()
    for body in bodies:
        native_decode.check(body, limits, native)
        try:
            seen[decode_body(body, limits).kind.name] += 1
        except DecodeError as exc:
            seen[exc.reason] += 1
    return seen


# ------------------------------------------------------------------ real datagrams


def random_int(rng: random.Random, hi: int) -> int:
    return rng.choice((0, 1, 2, rng.randrange(300), rng.randrange(70000), hi, hi - 1,
                       rng.randrange(hi + 1)))


def random_vertex(rng: random.Random, origin: int | None = None, seq: int | None = None,
                  ack_only: bool = False) -> Vertex:
    items: tuple[bytes | Fragment, ...] = ()
    if not ack_only:
        if rng.random() < 0.2:
            total = rng.randint(2, 50)
            offset = rng.randrange(total - 1)
            items = (Fragment(total, offset, rng.randbytes(rng.randint(1, total - offset))),)
        else:
            items = tuple(rng.randbytes(rng.choice((0, 1, 5, 40, 300)))
                          for _ in range(rng.randint(1, 4)))
    ts: float = rng.choice((0.0, -0.0, 1.5, 1e16, 1e-7, rng.random() * 1e9, 3.0))
    return Vertex(
        origin if origin is not None else random_int(rng, MAX_NODE_ID),
        seq if seq is not None else max(1, random_int(rng, MAX_SEQ)),
        tuple((random_int(rng, MAX_NODE_ID), max(1, random_int(rng, MAX_SEQ)))
              for _ in range(rng.choice((0, 1, 3)))),
        rng.choice(list(ServiceLevel)), ts, items)


def random_datagram(rng: random.Random) -> Datagram:
    kind = rng.choice(list(Kind)[:5])
    sender, view = random_int(rng, MAX_NODE_ID), random_int(rng, MAX_VIEW_ID)
    hb_seq = max(1, random_int(rng, MAX_SEQ))
    nacks = []
    for _ in range(rng.choice((0, 0, 1, 2))):
        first = max(1, random_int(rng, MAX_SEQ))
        nacks.append((random_int(rng, MAX_NODE_ID), first, rng.choice((first, MAX_SEQ))))
    if kind is Kind.NACK and not nacks:
        nacks.append((1, 1, 1))
    if kind is Kind.HEARTBEAT:
        acks = tuple((random_int(rng, MAX_NODE_ID), random_int(rng, MAX_SEQ))
                     for _ in range(rng.randint(0, 3)))
        return Datagram(kind, sender, view, hb_seq, tuple(nacks), (), acks)
    vertices: tuple[Vertex, ...] = ()
    if kind in (Kind.DATA, Kind.ACK_ONLY):
        vertices = (random_vertex(rng, sender, hb_seq, kind is Kind.ACK_ONLY),)
    elif kind is Kind.REPAIR:
        vertices = tuple(random_vertex(rng, ack_only=rng.random() < 0.3)
                         for _ in range(rng.randint(1, 3)))
    return Datagram(kind, sender, view, hb_seq, tuple(nacks), vertices)


def real_bodies(seed: int, count: int) -> list[bytes]:
    rng = random.Random(seed)
    return [encode_body(random_datagram(rng)) for _ in range(count)]


def mutate(rng: random.Random, data: bytes, donors: list[bytes]) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(len(out) + 1)
        action = rng.random()
        if action < 0.4 and at < len(out):
            out[at] ^= 1 << rng.randrange(8)
        elif action < 0.55 and at < len(out):
            out[at] = rng.choice((0xC0, 0xC1, 0xC2, 0xC3, 0xCA, 0xCB, 0xA1, 0x80, 0xFF, 0x7F))
        elif action < 0.7:
            out[at:at] = bytes([rng.randrange(256)])
        elif action < 0.8:
            del out[at : at + rng.randint(1, 3)]
        elif action < 0.9:
            del out[at:]
        else:
            donor = rng.choice(donors)
            cut = rng.randrange(len(donor) + 1)
            out[at:] = donor[cut:]
    return bytes(out)


def test_real_datagrams_of_every_kind_decode_alike() -> None:
    for limits in LIMITS:
        seen = agree(real_bodies(1, 300), limits)
        assert set(seen) >= ({"DATA", "ACK_ONLY", "NACK", "REPAIR", "HEARTBEAT"}
                             if limits is native_decode.DEFAULT else {"bad_field"})


def test_the_fuzz_target_agrees_on_its_seeds() -> None:
    seeds = native_decode.seeds()
    for data in seeds:
        native_decode.test_one_input(data)
    seen = agree([data[1:] for data in seeds])
    assert {"DATA", "ACK_ONLY", "NACK", "REPAIR", "HEARTBEAT", "MEMBERSHIP"} <= set(seen)
    native = decoder(native_decode.DEFAULT)
    assert all(native.decode(data[1:]) is not None for data in seeds if data[2:3] == b"\x05")


def test_mutated_datagrams_decode_alike() -> None:
    rng = random.Random(20261127)
    bodies = real_bodies(2, 200) + [data[1:] for data in native_decode.seeds()]
    mutated = [mutate(rng, rng.choice(bodies), bodies) for _ in range(3000)]
    for limits in LIMITS:
        seen = agree(mutated, limits)
        assert seen["malformed"] and seen["bad_field"] and seen["DATA"]


# ------------------------------------------------------------- random msgpack trees


def leaf(rng: random.Random) -> Any:
    return rng.choice((
        None, True, False, 0, 1, -1, 2, 5, 6, 2**32 - 1, 2**32, 2**62, 2**62 + 1, 2**63 - 1,
        2**64 - 1, -(2**63), 1.0, -0.0, 0.5, float("inf"), float("nan"), 1e300, 1e16, 1e-5,
        b"", b"x", b"it's", rng.randbytes(rng.randint(0, 60)), "", "s", {}, {1: 2},
        msgpack.ExtType(5, b""), msgpack.ExtType(5, b"x"), [], rng.randrange(2**64),
        rng.uniform(-1e20, 1e20)))


def tree(rng: random.Random, depth: int) -> Any:
    if depth == 0 or rng.random() < 0.4:
        return leaf(rng)
    return [tree(rng, depth - 1) for _ in range(rng.choice((0, 1, 2, 3, 6, 6, 6, 7)))]


def shaped(rng: random.Random) -> Any:
    """A datagram-shaped tree: ``[kind, sender, view, hb_seq, nacks, vertices]`` or a
    membership datagram's, with any field replaced by a random tree now and then."""
    body = (encode_body(random_datagram(rng)) if rng.random() < 0.7
            else rng.choice(native_decode.membership_bodies()))
    return replace(rng, msgpack.unpackb(body, raw=True), 0.15)


def replace(rng: random.Random, obj: Any, p: float) -> Any:
    if rng.random() < p:
        return tree(rng, 3)
    if type(obj) is list:
        return [replace(rng, item, p) for item in obj]
    return obj


def test_random_msgpack_trees_decode_alike() -> None:
    rng = random.Random(7)
    bodies = [msgpack.packb(shaped(rng) if rng.random() < 0.8 else tree(rng, 4),
                            use_bin_type=rng.random() < 0.9)
              for _ in range(3000)]
    for limits in LIMITS:
        seen = agree(bodies, limits)
        assert seen["bad_field"] > 100 and seen["malformed"] > 10 and seen["MEMBERSHIP"] > 10


def test_msgpack_edge_cases_decode_alike() -> None:
    """What Python's msgpack refuses and how: 0xc1, nesting deeper than its stack,
    trailing bytes, truncation anywhere, lengths past the limits, strings, maps and
    extension values (an empty one of code 0 to 127 is accepted; an empty timestamp or
    another negative code is not), float32."""
    deep = [b"\x91" * n + b"\x01" for n in (1023, 1024, 1025)]
    deep += [b"\x91" * 1024 + b"\x90", b"\x91" * 1025 + b"\x90", b"\x91" * 1024 + b"\x80",
             b"\x91" * 1025 + b"\x80"]
    edges = [b"", b"\xc1", b"\x91\xc1", b"\x01\x02", b"\xc0\xc1", b"\xa0", b"\xa1a", b"\x80",
             b"\x81\x01\x02", b"\xc7\x00\x05", b"\xc7\x00\xff", b"\xd4\x01\x02", b"\xc4\x65",
             b"\xdc\xff\xff", b"\xdd\xff\xff\xff\xff", b"\xc6\xff\xff\xff\xff",
             b"\xca\x7f\xc0\x00\x00", b"\xd9\x00", b"\xde\x00\x00", b"\xc8\x00\x00\x07",
             b"\xdf\x00\x00\x00\x01\xc1", b"\xc7\x00\x94\x01", b"\xc7\x00\x80",
             b"\xc7\x00\x7f"]
    body = encode_body(random_datagram(random.Random(3)))
    cuts = [body[:n] for n in range(len(body))]
    # send_ts as float32 and as every integer width
    for head, value in ((b"\xca", struct.pack(">f", 1.5)), (b"\xcc", b"\x07"),
                        (b"\xd0", b"\xf9"), (b"\xcf", b"\xff" * 8)):
        edges.append(b"\x96\x00\x01\x00\x01\x90\x91\x96\x01\x01\x90\x00" + head + value
                     + b"\x91\xc4\x01x")
    for limits in LIMITS:
        agree(deep + edges + cuts, limits)


def test_raw_bytes_decode_alike() -> None:
    rng = random.Random(11)
    agree([rng.randbytes(rng.randint(0, 40)) for _ in range(3000)])


def test_float_and_bytes_details_are_pythons() -> None:
    """The refusal detail quotes the value as ``repr`` does (cut to 40 characters)."""
    rng = random.Random(5)
    values: list[Any] = [rng.uniform(-1e30, 1e30) * 10.0 ** rng.randint(-30, 30)
                         for _ in range(500)]
    values += [float(2**n) for n in range(-60, 70)] + [0.1 * n for n in range(100)]
    values += [rng.randbytes(rng.randint(0, 50)) for _ in range(200)] + [b"'", b"\"'", b"\\"]
    bodies = [msgpack.packb([0, value, 0, 0, [], []], use_bin_type=True) for value in values]
    seen = agree(bodies)
    assert seen == Counter({"bad_field": len(values)})


# --------------------------------------------------------------------- the fallback


def test_a_kind_the_native_decoder_does_not_know_goes_to_the_python_one() -> None:
    """A kind added to the Python core later reaches ``fallback``: here a stand-in that
    answers for kind 6, as a newer ``codec`` would; so does MEMBERSHIP for a decoder
    given no membership classes."""
    assert NATIVE is not None
    limits = native_decode.DEFAULT
    calls: list[bytes] = []

    def newer_codec(body: bytes) -> Any:
        calls.append(bytes(body))
        if msgpack.unpackb(body)[0] == 6:
            return "a kind-6 datagram"
        return decode_body(body, limits)

    native = decoder(limits)
    fallback = NATIVE.Decoder(
        (limits.max_datagram_bytes, limits.max_array_len, limits.max_members,
         limits.max_nack_ranges, limits.max_vertices, limits.max_items,
         limits.max_message_size, limits.max_held_report),
        [Kind(code) for code in range(5)], [ServiceLevel.CAUSAL, ServiceLevel.AGREED,
                                            ServiceLevel.SAFE],
        Vertex, Datagram, Fragment, newer_codec)  # the constructors, no slot stores
    kind6 = msgpack.packb([6, 1, 2, 3, [], [b"new"]])
    assert fallback(kind6) == "a kind-6 datagram"
    assert native.decode(kind6) is None
    with pytest.raises(DecodeError, match="swap"):
        native(kind6)  # the Python decoder's refusal: kind 6 (SWAP) with a malformed body
    membership = [data[1:] for data in native_decode.seeds() if data[2:3] == b"\x05"]
    assert membership
    for body in membership:
        assert fallback.decode(body) is None
        assert native.decode(body) is not None  # the shim's decoder has the classes
        assert repr(fallback(body)) == repr(native(body)) == repr(decode_body(body, limits))
    data = real_bodies(4, 20)
    assert [fallback(body) for body in data] == [decode_body(body, limits) for body in data]
    assert calls == [kind6, *membership]  # the data plane never reached the fallback


def test_a_memoryview_body_decodes_alike() -> None:
    native = decoder(native_decode.DEFAULT)
    for body in real_bodies(5, 20):
        assert native(memoryview(body)) == decode_body(memoryview(body), native_decode.DEFAULT)


# ------------------------------------------------------------ the checker itself


def test_the_checker_catches_a_decoder_that_disagrees() -> None:
    """Planted violations: a native decoder of other limits, one that returns another
    datagram, and one that takes a body of an unknown kind for its own."""
    body = encode_body(Datagram(Kind.NACK, 1, 2, 3, ((1, 1, 1), (2, 1, 1), (3, 1, 1))))
    with pytest.raises(AssertionError, match="differ"):
        native_decode.check(body, native_decode.DEFAULT, decoder(native_decode.SMALL))
    other = decode_body(real_bodies(6, 1)[0], native_decode.DEFAULT)
    with pytest.raises(AssertionError, match="differ"):
        native_decode.check(body, native_decode.DEFAULT, lambda body: other)
    kind6 = msgpack.packb([6, 1, 2, 3, [], []])

    class Greedy:
        def __call__(self, body: bytes) -> Any:
            return decode_body(body, native_decode.DEFAULT)

        decode = __call__

    with pytest.raises(AssertionError, match="took"):
        native_decode.check(kind6, native_decode.DEFAULT, Greedy())
    native_decode.check(body, native_decode.DEFAULT,
                        partial(decode_body, limits=native_decode.DEFAULT))


def test_the_node_decodes_with_the_native_decoder(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Node takes the native decoder when it is selected (``native.make_decoder``,
    once per node): ``peek`` and ``receive_datagram`` decode through it, alike."""
    assert NATIVE is not None
    monkeypatch.setenv(native.CORE_ENV, "native")
    node = datagram.new_node(in_view=True)
    body = encode_body(Datagram(Kind.NACK, 2, 1, 0, ((3, 1, 2),)))
    sealed = datagram.AUTH.seal(body, 0)
    assert node.peek(sealed) == decode_body(body, node._limits)
    assert type(node._decode) is NATIVE.Decoder and node.core["decode"] == "native"
    node.receive_datagram(sealed, 0.0)
    bad = datagram.AUTH.seal(encode_body(Datagram(Kind.NACK, 2, 1, 0)), 0)
    with pytest.raises(DecodeError, match="empty nack"):
        node.peek(bad)
