"""Fuzz target ``federation``: the federation layer's records, datagrams and state.

Theory of operation: the input is read as what a federation member takes from outside:
a record its own cluster's order delivered (``decode_record``), a datagram from another
cluster (``decode_datagram``, a batch of them included) and a joiner's state
(``ClusterState.decode``). None may raise anything but ``DecodeError``; whatever they
accept survives its encoder unchanged. The same bytes then go to two
``FederationMember``s (one with state, one joining, so the state-record path runs too)
through ``on_ordered`` and ``on_remote``, which must never raise: a bad datagram is a
``DroppedRemote``, a bad record a counter.
"""

from __future__ import annotations

import msgpack
from amcast.protocols.errors import DecodeError
from amcast.protocols.federation import FederationConfig, FederationMember
from amcast.protocols.federation.state import ClusterState
from amcast.protocols.federation.wire import (
    DgAck,
    DgBatch,
    DgSubmit,
    DgTimestamp,
    RecState,
    RecStateRequest,
    RecSubmit,
    RecTimestamp,
    decode_datagram,
    decode_record,
    encode_datagram,
    encode_record,
)

INSTRUMENT = ("amcast",)
MAX_LEN = 4096
TIMEOUT_S = 10

CLUSTERS = {"a": ("a1", "a2"), "b": ("b1",), "c": ("c1", "c2")}
CONFIG = FederationConfig("a", CLUSTERS)
M = ("b", "b1", 7)


def _check_decoders(data: bytes) -> None:
    try:
        rec = decode_record(data)
    except DecodeError:
        pass
    else:
        if decode_record(encode_record(rec)) != rec:
            raise AssertionError(f"record does not survive its encoder: {rec!r:.200}")
    try:
        dg = decode_datagram(data)
    except DecodeError:
        pass
    else:
        if decode_datagram(encode_datagram(dg)) != dg:
            raise AssertionError(f"datagram does not survive its encoder: {dg!r:.200}")
    try:
        state = ClusterState.decode(data, "a", 100, 100)
    except DecodeError:
        pass
    else:
        again = ClusterState.decode(state.encode(), "a", 100, 100)
        if again.encode() != state.encode():
            raise AssertionError("state does not survive its encoder")


def test_one_input(data: bytes) -> None:
    _check_decoders(data)
    member = FederationMember(CONFIG, "a1")
    joiner = FederationMember(CONFIG, "a2", joining=True)
    joiner.on_view(0.0, ["a1", "a2"])
    nonce = joiner._nonce or 0
    joiner.on_ordered(0.1, encode_record(RecStateRequest("a2", nonce)))
    member.on_ordered(0.1, data)
    member.on_remote(0.2, "b", "b1", data)
    member.on_remote(0.2, "c", "c2", data)
    joiner.on_ordered(0.3, data)
    joiner.on_ordered(0.4, encode_record(RecState("a2", nonce, data)))
    member.tick(10.0)
    joiner.tick(10.0)
    member.in_flight()


# ----------------------------------------------------------------------------- seeds


def seeds() -> list[bytes]:
    state = FederationMember(CONFIG, "a1")
    state.on_ordered(0.0, encode_record(RecSubmit(M, ("a", "b"), "g", b"hello")))
    state.on_ordered(0.0, encode_record(RecTimestamp(("c", "c1", 1), "c", 4)))
    return [
        encode_record(RecSubmit(M, ("a", "b"), "g", b"hello")),
        encode_record(RecSubmit(("a", "a1", 1), ("a", "b", "c"), "grp", b"")),
        encode_record(RecTimestamp(M, "b", 3)),
        encode_record(RecStateRequest("a2", 5)),
        encode_record(RecState("a2", 5, state.snapshot())),
        encode_datagram(DgSubmit(M, ("a", "b"), "g", b"x" * 100)),
        encode_datagram(DgTimestamp(M, ("a", "b"), "b", 9)),
        encode_datagram(DgAck(M, True, ("a", "b"), False)),
        encode_datagram(DgAck(("a", "a1", 1), False, (), True)),
        encode_datagram(DgBatch((DgSubmit(M, ("a", "b"), "g", b"y"),
                                 DgTimestamp(M, ("a", "b"), "b", 9),
                                 DgAck(("a", "a1", 1), True, ("a",), False)))),
        b"\xc1f\x02\x92\x95\x02",
        state.snapshot(),
        b"\xc1F\x02\x90",
        b"\xc1f\x01\x95\x00",
        b"\xc1",
        b"",
        msgpack.packb([1, 0, 0, [], [], [], []]),
    ]


DICTIONARY = [b"\xc1F\x01", b"\xc1f\x01", b"\xc1f\x02", b"\x92", b"\x95", b"\x94",
              b"\x93", b"\xc4\x01a", b"\xc4\x02b1", b"\xc3", b"\xc2",
              b"\xcf\x7f\xff\xff\xff\xff\xff\xff\xff"]
