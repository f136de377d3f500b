"""Fuzz target ``fedlink``: what a daemon reads of the federation from outside.

Theory of operation: the input is read three ways, as ``amcast.daemon.federation``
reads bytes it did not make: an engine payload its cluster's order delivered
(``decode_record``: a federation record or not), an application message handed back by
a ``Deliver`` (``decode_message``) and the opened body of a cross-cluster datagram
(``decode_link``). None may raise, except ``decode_link`` with ``DecodeError``;
whatever they accept survives its encoder unchanged. The same bytes then reach a
``FederationLink`` as a datagram off the wire (``open``): refused with ``DecodeError``,
never anything else.
"""

from __future__ import annotations

import contextlib

import msgpack
from amcast.daemon.fedframing import (
    decode_link,
    decode_message,
    decode_record,
    encode_link,
    encode_message,
    encode_record,
)
from amcast.daemon.fedlink import FederationLink
from amcast.protocols.errors import DecodeError
from amcast.protocols.wire.auth import Authenticator
from amcast.protocols.wire.keys import Keyring

INSTRUMENT = ("amcast",)
MAX_LEN = 4096
TIMEOUT_S = 10
KEY = Keyring.single(bytes(range(32)))


def _link() -> FederationLink:
    """A link that opens datagrams without a socket (``open`` uses none)."""
    link = FederationLink.__new__(FederationLink)
    link.cluster, link.node_id = "b", 0
    link.addresses = {("a", 0): ("127.0.0.1", 1), ("b", 0): ("127.0.0.1", 2)}
    link._wall_clock = lambda: 1_000_000.0
    link.auth = Authenticator(KEY, bytes(16))
    link.received, link.heard = 0, {}
    return link


LINK = _link()


def test_one_input(data: bytes) -> None:
    records = decode_record(data)
    if records is not None and decode_record(encode_record(records)) != records:
        raise AssertionError(f"records do not survive their encoder: {records!r}")
    message = decode_message(data)
    if message is not None and decode_message(encode_message(*message)) != message:
        raise AssertionError(f"message does not survive its encoder: {message!r}")
    try:
        body = decode_link(data)
    except DecodeError:
        pass
    else:
        if decode_link(encode_link(*body)) != body:
            raise AssertionError(f"link body does not survive its encoder: {body!r}")
    with contextlib.suppress(DecodeError):
        LINK.open(data)


def seeds() -> list[bytes]:
    sealer = Authenticator(KEY, bytes(range(16)))
    return [
        encode_record([b"\x01record"]),
        encode_record([b"", b"\x02two"]),
        msgpack.packb(["fed", []]),
        encode_message("a", 0, 7, 1.5, b"payload"),
        encode_message("a" * 64, 2**63 - 1, 0, 0, b""),
        encode_link("a", 0, "b", b"datagram"),
        encode_link("a", 0, "b", b""),
        sealer.seal(encode_link("a", 0, "b", b"dg"), 1_000_000_000),
        sealer.seal(b"\xc1", 1_000_000_000),
        msgpack.packb(["fed", "text"]),
        msgpack.packb(["amcast-fed", 2, "a", 0, "b", b"d"]),
        msgpack.packb([1, "a", -1, 0, 1.0, b"p"]),
        b"\xc1",
        b"",
    ]
