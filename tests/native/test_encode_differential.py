"""Differential tests of the data-plane encoder: the native one (``amcast_native.Encoder``
through ``protocols/wire/native``) and the Python reference (``encode_plain``, that is
``codec.encode_body`` for a ``Datagram``) take the same datagrams and must give the same
bytes, or, where the native side declines (a field of a type the protocol does not
build), hand the datagram to the reference, which then writes or raises as it always did.

The datagrams: seeded random datagrams of every data-plane kind (hundreds of seeds),
every integer, float, bytes and array length at msgpack's format boundaries in every
field, lists where the protocol builds tuples, and the unusual values the native side
leaves to Python (bools, int subclasses, ints msgpack cannot hold, other item types,
membership and swap datagrams). Skipped, with the reason, where the extension is not
built (``make rust``)."""

from __future__ import annotations

import dataclasses
import math
import random
from typing import Any

import pytest
from amcast.protocols.vocabulary import ServiceLevel
from amcast.protocols.wire.codec import (
    Datagram,
    Fragment,
    Kind,
    MembershipDatagram,
    SwapDatagram,
    Vertex,
    encode_body,
)
from amcast.protocols.wire.native import (
    encode_plain,
    encoder_name,
    make_encoder,
    native_encoder,
    native_module,
)

from .test_decode_differential import random_datagram

NATIVE = native_module()
pytestmark = pytest.mark.skipif(
    NATIVE is None, reason="amcast_native is not built (make rust): only the Python core runs")


def encoder() -> Any:
    assert NATIVE is not None
    return native_encoder(NATIVE)


def outcome(f: Any, dg: Any) -> tuple[str, Any]:
    try:
        return "bytes", f(dg)
    except Exception as exc:  # the reference's own error, whatever it is
        return type(exc).__name__, str(exc)


def same(dg: Any, *, native: bool = True) -> None:
    """``dg`` encodes alike; ``native``: the native side writes it itself."""
    enc = encoder()
    expected = outcome(encode_plain, dg)
    assert outcome(enc, dg) == expected, dg
    written = enc.encode(dg)
    if native:
        assert expected[0] == "bytes" and written == expected[1], dg
    else:
        assert written is None, dg


def test_the_native_core_gets_the_native_encoder() -> None:
    assert encoder_name(make_encoder("native")) == "native"
    assert make_encoder("pure") is encode_plain
    assert encoder_name(make_encoder("pure")) == "pure"


@pytest.mark.parametrize("seed", range(0, 400, 50))
def test_random_datagrams_of_every_kind_encode_alike(seed: int) -> None:
    kinds = set()
    for s in range(seed, seed + 50):
        rng = random.Random(s)
        for _ in range(10):
            dg = random_datagram(rng)
            kinds.add(dg.kind)
            same(dg)
    assert kinds == set(list(Kind)[:5])


INTS = [0, 1, 31, 127, 128, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**53 + 1, 2**63 - 1,
        2**63, 2**64 - 1, -1, -31, -32, -33, -127, -128, -129, -32768, -32769, -2**31,
        -2**31 - 1, -2**63]
FLOATS = [0.0, -0.0, 1.0, -1.5, math.inf, -math.inf, math.nan, 5e-324, 1.7976931348623157e308,
          1e-7, 12345.678]
LENGTHS = [0, 1, 15, 16, 31, 32, 255, 256, 65535, 65536]


def vertex(**fields: Any) -> Vertex:
    base = Vertex(1, 2, ((0, 1),), ServiceLevel.AGREED, 0.5, (b"x",))
    return dataclasses.replace(base, **fields)


def datagram(**fields: Any) -> Datagram:
    base = Datagram(Kind.DATA, 1, 3, 2, (), (vertex(),))
    return dataclasses.replace(base, **fields)


def test_every_int_format_in_every_field() -> None:
    for v in INTS:
        for name in ("sender", "view", "hb_seq"):
            same(datagram(**{name: v}))
        for name in ("origin", "seq"):
            same(datagram(vertices=(vertex(**{name: v}),)))
        same(datagram(nacks=((v, v, v),)))
        same(datagram(vertices=(vertex(acks=((v, v), (1, v))),)))
        same(datagram(kind=Kind.HEARTBEAT, vertices=(), acks=((v, v),)))
        same(datagram(vertices=(vertex(items=(Fragment(v, v, b"ab"),)),)))


def test_every_float() -> None:
    for ts in FLOATS + [random.Random(s).uniform(-1e12, 1e12) for s in range(200)]:
        same(datagram(vertices=(vertex(send_ts=ts),)))


def test_every_array_and_bin_length() -> None:
    rng = random.Random(7)
    for n in LENGTHS:
        same(datagram(vertices=(vertex(items=(rng.randbytes(n),)),)))
        same(datagram(vertices=(vertex(items=(Fragment(n + 1, 0, rng.randbytes(n)),)),)))
        same(datagram(vertices=(vertex(items=tuple(b"i" for _ in range(n))),)))
        same(datagram(vertices=(vertex(acks=tuple((i, i + 1) for i in range(n))),)))
        same(datagram(nacks=tuple((i, 1, 2) for i in range(n))))
        same(datagram(kind=Kind.HEARTBEAT, acks=tuple((i, i) for i in range(n))))
        same(datagram(kind=Kind.REPAIR, vertices=tuple(vertex(seq=i + 1) for i in range(n % 300))))
    same(datagram(vertices=(vertex(items=(rng.randbytes(70000), b"", b"y" * 300)),)))


def test_every_service_and_kind() -> None:
    for service in ServiceLevel:
        same(datagram(vertices=(vertex(service=service),)))
    for kind in list(Kind)[:5]:
        same(datagram(kind=kind))
    # a heartbeat's vertices are not written, whatever they are
    same(datagram(kind=Kind.HEARTBEAT, vertices=(object(),), acks=((1, 2),)))


def test_lists_where_the_protocol_builds_tuples() -> None:
    same(datagram(nacks=[(1, 2, 3), [4, 5, 6]]))
    same(datagram(nacks=((1, 2),)))  # flattened whatever the arity, as chain does
    same(datagram(vertices=[vertex(acks=[[1, 2], (3, 4)], items=[b"a", Fragment(3, 1, b"b")])]))
    same(datagram(kind=Kind.HEARTBEAT, acks=[[1, 2, 3]]))


class Int(int):
    pass


class Bytes(bytes):
    pass


def test_the_unusual_goes_to_python_which_writes_or_raises_as_ever() -> None:
    unusual = [
        datagram(sender=True), datagram(view=Int(3)), datagram(hb_seq=2**64),
        datagram(hb_seq=-2**63 - 1), datagram(hb_seq=1.0), datagram(kind=0), datagram(kind=4),
        datagram(kind=Kind.MEMBERSHIP), datagram(nacks=((1, 2, None),)),
        datagram(nacks=(b"ab",)), datagram(nacks=range(3)), datagram(vertices=(object(),)),
        datagram(vertices=(vertex(send_ts=3),)), datagram(vertices=(vertex(send_ts=True),)),
        datagram(vertices=(vertex(send_ts="x"),)), datagram(vertices=(vertex(service="agreed"),)),
        datagram(vertices=(vertex(service=None),)),
        datagram(vertices=(vertex(items=(Bytes(b"a"),)),)),
        datagram(vertices=(vertex(items=(bytearray(b"a"),)),)),
        datagram(vertices=(vertex(items=(memoryview(b"a"),)),)),
        datagram(vertices=(vertex(items=(Fragment(2, 0, bytearray(b"a")),)),)),
        datagram(vertices=(vertex(items=(Fragment(True, 0, b"a"),)),)),
        datagram(vertices=(vertex(items=(None,)),)),
        datagram(vertices=(vertex(acks=((1, 2**70),)),)),
        datagram(vertices=(vertex(origin=-2**64),)),
        datagram(vertices=iter([vertex()])),
        MembershipDatagram(1, 2, 3, None),  # type: ignore[arg-type]
        SwapDatagram(1, 2, 3, 4, 5, (6, 7)),
    ]
    for dg in unusual:
        same(dg, native=False)


def test_a_planted_difference_is_seen() -> None:
    """The comparison can fail: one field changed, the bytes differ."""
    enc = encoder()
    rng = random.Random(3)
    for _ in range(200):
        dg = random_datagram(rng)
        other = dataclasses.replace(dg, view=(dg.view + 1) % 2**31)
        assert enc(other) != encode_body(dg)
        assert enc(other) == encode_body(other)
