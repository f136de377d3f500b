"""The federation layer's bytes: records and datagrams round-trip, refuse garbage with
``DecodeError`` only, and carry a header that grows with |Dst(m)|, not with the nodes."""

from __future__ import annotations

import contextlib
import random

import msgpack
import pytest
from amcast.protocols.errors import DecodeError
from amcast.protocols.federation.wire import (
    MAGIC_DATAGRAM,
    MAGIC_RECORD,
    MAX_BATCH,
    DgAck,
    DgBatch,
    DgSubmit,
    DgTimestamp,
    RecState,
    RecStateRequest,
    RecSubmit,
    RecTimestamp,
    batch,
    decode_datagram,
    decode_record,
    encode_datagram,
    encode_record,
    is_record,
)

from amcast.socket_protocol import decode_control, decode_envelope

M = ("east", "east-3", 41)
RECORDS = [
    RecSubmit(M, ("east", "west"), "orders", b"payload"),
    RecSubmit(M, ("a", "b", "c"), "gr\u00fcn", b""),
    RecTimestamp(M, "west", 17),
    RecStateRequest("east-1", 2**40),
    RecState("east-1", 3, b"\x97state"),
]
DATAGRAMS = [
    DgSubmit(M, ("east", "west"), "orders", b"x" * 1000),
    DgTimestamp(M, ("east", "west"), "east", 2**62),
    DgAck(M, True, ("east",), False),
    DgAck(M, False, (), True),
]


@pytest.mark.parametrize("rec", RECORDS, ids=lambda r: type(r).__name__)
def test_records_round_trip_and_are_recognised(rec: object) -> None:
    data = encode_record(rec)  # type: ignore[arg-type]
    assert decode_record(data) == rec
    assert is_record(data) and data[:2] == MAGIC_RECORD
    # a record in the order is never taken for a client's envelope or control message
    assert decode_envelope(data) is None and decode_control(data) is None


@pytest.mark.parametrize("dg", DATAGRAMS, ids=lambda d: type(d).__name__)
def test_datagrams_round_trip(dg: object) -> None:
    data = encode_datagram(dg)  # type: ignore[arg-type]
    assert decode_datagram(data) == dg
    assert data[:2] == MAGIC_DATAGRAM and not is_record(data)
    with pytest.raises(DecodeError):
        decode_record(data)


def test_a_datagram_of_another_version_is_refused_by_reason() -> None:
    data = bytearray(encode_datagram(DATAGRAMS[1]))
    data[2] = 3
    with pytest.raises(DecodeError) as err:
        decode_datagram(bytes(data))
    assert err.value.reason == "version"


@pytest.mark.parametrize("body", [
    [0, ["east", "east-3", 1], [b"west", b"east"], b"g", b"p"],  # dst not sorted
    [0, [b"east", b"east-3", 1], [b"west", b"east"], b"g", b"p"],  # dst not sorted
    [0, [b"east", b"east-3", 1], [b"east", b"east"], b"g", b"p"],  # dst repeats
    [0, [b"east", b"east-3", 1], [], b"g", b"p"],  # empty dst
    [1, [b"east", b"east-3", -1], [b"east"], b"east", 3],  # negative seq
    [1, [b"east", b"east-3", 1], [b"east"], b"east", 0],  # lts 0
    [2, [b"east", b"east-3", 1], 1, [], False],  # submit not a bool
    [2, [b"east", b"east-3", 1], True, [], False, 9],  # extra field
    [7, [b"east", b"east-3", 1]],  # unknown type
    [1, [b"x" * 65, b"n", 1], [b"east"], b"east", 3],  # name too long
])
def test_malformed_datagrams_raise_decode_error(body: list[object]) -> None:
    with pytest.raises(DecodeError):
        decode_datagram(MAGIC_DATAGRAM + b"\x01" + msgpack.packb(body, use_bin_type=True))


def test_a_batch_round_trips_and_is_its_datagrams_side_by_side() -> None:
    encoded = [encode_datagram(d) for d in DATAGRAMS]
    data = batch(encoded)
    assert data == encode_datagram(DgBatch(tuple(DATAGRAMS)))  # type: ignore[arg-type]
    assert decode_datagram(data) == DgBatch(tuple(DATAGRAMS))  # type: ignore[arg-type]
    assert data[2] == 2 and len(data) == sum(len(d) - 3 for d in encoded) + 4
    many = [encoded[2]] * MAX_BATCH  # 3 bytes of array header
    assert decode_datagram(batch(many)) == DgBatch((DATAGRAMS[2],) * MAX_BATCH)
    assert batch(encoded[:1]) == encoded[0]
    with pytest.raises(ValueError):
        batch(many + many[:1])


@pytest.mark.parametrize("items", [
    [],  # empty
    [[2, [b"east", b"east-3", 1], True, [], False]],  # one: not a batch
    [[2, [b"east", b"east-3", 1], True, [], False]] * (MAX_BATCH + 1),  # too many
    [[2, [b"east", b"east-3", 1], True, [], False], [[2, [b"e", b"e-3", 1], True, [],
                                                      False]] * 2],  # nested
    [[2, [b"east", b"east-3", 1], True, [], False], [7, [b"east", b"east-3", 1]]],
])
def test_malformed_batches_raise_decode_error(items: list[object]) -> None:
    with pytest.raises(DecodeError):
        decode_datagram(MAGIC_DATAGRAM + b"\x02" + msgpack.packb(items, use_bin_type=True))


def test_random_bytes_raise_only_decode_error() -> None:
    rng = random.Random(7)
    samples = [encode_record(r) for r in RECORDS] + [encode_datagram(d) for d in DATAGRAMS]
    samples.append(encode_datagram(DgBatch(tuple(DATAGRAMS))))  # type: ignore[arg-type]
    for _ in range(3000):
        data = bytearray(rng.choice(samples))
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        for decode in (decode_record, decode_datagram):
            with contextlib.suppress(DecodeError):
                decode(bytes(data))


def test_oversized_payload_is_refused() -> None:
    data = encode_datagram(DgSubmit(M, ("east", "west"), "g", b"x" * 2000))
    assert decode_datagram(data, max_payload=2000).payload == b"x" * 2000
    with pytest.raises(DecodeError):
        decode_datagram(data, max_payload=1999)


def _header(dst: tuple[str, ...], nodes: int) -> int:
    """The largest header, bytes beyond the payload, of every record and datagram of one
    message to ``dst`` in a federation whose clusters have ``nodes`` members each (the
    origin is the cluster's last node; names of one width: only a field listing nodes
    could make the header grow)."""
    m = (dst[0], f"{dst[0]}-node-{nodes - 1:04d}", 10**12)
    payload = b"p" * 100
    sizes = [
        len(encode_record(RecSubmit(m, dst, "group", payload))) - len(payload),
        len(encode_record(RecTimestamp(m, dst[-1], 10**9))),
        len(encode_datagram(DgSubmit(m, dst, "group", payload))) - len(payload),
        len(encode_datagram(DgTimestamp(m, dst, dst[-1], 10**9))),
        len(encode_datagram(DgAck(m, True, dst, False))),
        len(encode_datagram(DgBatch((DgTimestamp(m, dst, dst[-1], 10**9),) * MAX_BATCH)))
        // MAX_BATCH + 1,  # a full batch: per datagram, and 3 bytes once
    ]
    return max(sizes)


def test_the_header_grows_with_dst_not_with_the_number_of_nodes() -> None:
    clusters = [f"cluster-{i:02d}" for i in range(8)]
    for d in (2, 4, 8):
        dst = tuple(clusters[:d])
        assert len({_header(dst, n) for n in (3, 9, 99, 999)}) == 1
    assert _header(tuple(clusters[:2]), 5) < _header(tuple(clusters[:4]), 5) < _header(
        tuple(clusters[:8]), 5)
