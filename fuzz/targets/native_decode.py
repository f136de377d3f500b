"""Fuzz target ``native_decode``: the native datagram decoder against the Python one.

Theory of operation: the input is a flags byte and an authentic *body* (what follows the
seal: the msgpack datagram of ``amcast.protocols.wire.codec``, section 1 of the ToTo
paper). Flag bit 0 picks small ``WireLimits`` (a few members, nack ranges, vertices,
items, a short message), so that every limit is within the fuzzer's reach; else the
defaults. The body goes to the Python decoder ``codec.decode_body`` and to the native
one (``amcast_native.Decoder`` through ``protocols/wire/native``), which must agree
exactly: both return equal datagrams (``==`` and the same ``repr``, so ``-0.0`` and
``0.0``, an int and a float, an enum member and its value are told apart), or both raise
``DecodeError`` with the same reason *and* detail. Neither may raise anything else.

The native decoder hands a body of a kind it does not know (one added to ``codec``
later) to the Python one; the target also checks that it does so only for such bodies:
its native-only answer (``Decoder.decode``) is ``None`` exactly when msgpack unpacks the
body to something other than a six-element array with a kind code from 0 to 5.

Without the extension (``make rust`` not run) every input is accepted as is: the
differential tests in ``tests/native`` say so by skipping.
"""

from __future__ import annotations

from typing import Any

import msgpack
from amcast.protocols.errors import DecodeError
from amcast.protocols.vocabulary import ServiceLevel
from amcast.protocols.wire import membership as m
from amcast.protocols.wire.codec import (
    Datagram,
    Fragment,
    Kind,
    MembershipDatagram,
    Vertex,
    decode_body,
    encode_body,
    encode_membership_body,
)
from amcast.protocols.wire.limits import WireLimits
from amcast.protocols.wire.native import NATIVE_KINDS, Decode, native_decoder, native_module

from fuzz.targets import datagram

INSTRUMENT = ("amcast",)
MAX_LEN = 16384
TIMEOUT_S = 10
FLAG_SMALL = 0x01
SMALL = WireLimits(max_datagram_bytes=512, max_members=3, max_nack_ranges=2,
                   max_vertices=2, max_items=3, max_message_size=40)
DEFAULT = WireLimits()
DICTIONARY = [b"\x96\x00", b"\x96\x01", b"\x96\x02", b"\x96\x03", b"\x96\x04", b"\x96\x05",
              b"\xcb", b"\xca", b"\xc4", b"\xcf", b"\xd3", b"\xdc", b"\xc7", b"\xc1"]

_decoders: dict[int, Decode] = {}


def decoder(limits: WireLimits) -> Decode | None:
    """The native decoder of ``limits`` (one per limits object), ``None`` if not built."""
    module = native_module()
    if module is None:
        return None
    found = _decoders.get(id(limits))
    if found is None:
        found = _decoders[id(limits)] = native_decoder(module, limits)
    return found


Outcome = tuple[str, str | None, tuple[str, str] | None]


def outcome(call: Any) -> Outcome:
    """``(type name, repr, None)`` of a result or ``("", None, (reason, detail))``."""
    try:
        dg = call()
    except DecodeError as exc:
        return "", None, (exc.reason, exc.detail)
    return type(dg).__name__, repr(dg), None


def native_kind(body: bytes, limits: WireLimits) -> bool:
    """Whether the native decoder decodes ``body`` itself (else the Python one does)."""
    try:
        obj = msgpack.unpackb(body, raw=True, max_str_len=0, max_map_len=0, max_ext_len=0,
                              max_bin_len=limits.max_datagram_bytes,
                              max_array_len=limits.max_array_len)
    except Exception:  # the native decoder refuses it itself ("malformed")
        return True
    return (type(obj) is list and len(obj) == 6 and type(obj[0]) is int
            and 0 <= obj[0] < NATIVE_KINDS)


def check(body: bytes, limits: WireLimits, native: Decode) -> None:
    """Both decoders agree on ``body`` (see the module's docstring)."""
    pure = outcome(lambda: decode_body(body, limits))
    got = outcome(lambda: native(body))
    if pure != got:
        raise AssertionError(f"pure and native decode differ:\n  {pure}\n  {got}")
    if pure[2] is None:
        mine, theirs = native(body), decode_body(body, limits)
        if mine != theirs or hash(mine) != hash(theirs):
            raise AssertionError("equal reprs, unequal datagrams")
    own = getattr(native, "decode", None)
    if own is not None:
        alone = outcome(lambda: own(body))
        handled = alone != ("NoneType", "None", None)
        if handled != native_kind(body, limits):
            raise AssertionError(f"the native decoder {'took' if handled else 'left'} {alone}")
        if handled and alone != pure:
            raise AssertionError(f"native alone: {alone}, pure: {pure}")


def test_one_input(data: bytes) -> None:
    if not data:
        return
    limits = SMALL if data[0] & FLAG_SMALL else DEFAULT
    native = decoder(limits)
    if native is None:
        return
    check(data[1:], limits, native)


def sample_bodies() -> list[bytes]:
    """Bodies of every data-plane kind, by the Python encoder: a fragment, a repair of
    several vertices, nacks, a heartbeat, empty items, ``-0.0``."""
    agreed, safe = ServiceLevel.AGREED, ServiceLevel.SAFE
    v1 = Vertex(1, 5, ((2, 3), (3, 1)), agreed, 12.5, (b"hello", b""))
    v2 = Vertex(2, 1, (), safe, 0.0, (Fragment(30, 10, b"0123456789"),))
    v3 = Vertex(3, 2, ((1, 5),), ServiceLevel.CAUSAL, -0.0, ())
    datagrams = [
        Datagram(Kind.DATA, 1, 7, 5, ((2, 1, 4),), (v1,)),
        Datagram(Kind.ACK_ONLY, 3, 7, 2, (), (v3,)),
        Datagram(Kind.DATA, 2, 7, 1, (), (v2,)),
        Datagram(Kind.NACK, 1, 2**40, 0, ((2, 1, 1), (3, 2, 9))),
        Datagram(Kind.REPAIR, 3, 7, 9, (), (v1, v2, v3)),
        Datagram(Kind.HEARTBEAT, 2, 7, 3, ((1, 4, 4),), (), ((1, 5), (2, 0), (3, 1))),
    ]
    return [encode_body(dg) for dg in datagrams]


def seeds() -> list[bytes]:
    """The sample bodies, a membership body of every message type and every body of the
    ``datagram`` target's seeds, each under both limits."""
    bodies = sample_bodies() + membership_bodies()
    for data in datagram.seeds():
        bodies.extend(body for _, body in datagram.records(data))
    bodies = list(dict.fromkeys(bodies))
    return [bytes((flags,)) + body for body in bodies for flags in (0, FLAG_SMALL)]


def membership_bodies() -> list[bytes]:
    """A MEMBERSHIP body of every message type, by the Python encoder."""
    one = m.ViewRecord.agreed((1, 2, 3))
    two = m.ViewRecord(2, (m.Member(1, 1), m.Member(2, 1), m.Member(4, 2)), (1, 2, 3, 4), 1)
    proposal = m.Proposal(two, one, ((1, 5), (2, 3), (3, 0)))
    ballot, promised = m.Ballot(3, 1), m.Ballot(4, 2)
    settings = m.Settings("stoto", 0.5, None, 1024, (1, 2, 3))
    other = m.Settings("lex", None, 2, 2**40, ())
    availability = m.Availability(1, ((1, 5), (2, 3)), (m.HeldVertex(1, 6, ((2, 3),)),))
    messages = [
        m.Join(settings, 1, False, (1, 5)),
        m.Join(other, 0, True, None),
        m.Prepare(ballot, (m.Member(1, 1), m.Member(4, 2)), one),
        m.Prepare(ballot, (), None),
        m.Promise(ballot, one, 1, (promised, proposal), availability, settings, (1, 5), False),
        m.Promise(ballot, None, 0, None, None, other, None, True),
        m.Promise(ballot, one, 1, None, None, settings, None, True, 1_700_000_000_001),
        m.Reject(ballot, promised, "stale", "ballot 3.1 < 4.2"),
        m.Accept(ballot, proposal, True),
        m.Accept(ballot, m.Proposal(one, None, ()), False),
        m.Accepted(ballot, 2, True),
        m.Accepted(ballot, 2, None),
        m.Install(ballot, proposal),
        m.Refuse(m.Member(4, 2), "settings", "rule: 'lex' (coordinator), 'stoto'"),
    ]
    return [encode_membership_body(MembershipDatagram(1, 7, 3, msg)) for msg in messages]
