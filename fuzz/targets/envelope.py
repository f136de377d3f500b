"""Fuzz target ``envelope``: the engine payloads a peer daemon multicasts.

Theory of operation: the input is one engine payload as delivered by the total order,
read as the daemon reads it (``amcast.socket_protocol``): ``decode_envelope`` (a
client's messages), ``decode_control`` (group membership changes) and ``is_control``
(which of the two a refused one was meant to be). None may raise; a payload is never
both an envelope and a control envelope; what they accept survives their encoders
(``encode_envelope``, ``encode_join`` ...) unchanged; a decoded control envelope is
recognised by ``is_control`` and a decoded envelope is not.
"""

from __future__ import annotations

from typing import Any

import msgpack

from amcast.socket_protocol import (
    Control,
    SnapEntry,
    decode_control,
    decode_envelope,
    encode_envelope,
    encode_gone,
    encode_join,
    encode_leave,
    encode_snapshot,
    is_control,
)

INSTRUMENT = ("amcast",)
MAX_LEN = 4096
TIMEOUT_S = 10


def reencode(c: Control) -> bytes:
    """``c`` through the encoder of its kind."""
    if c.kind == "join":
        return encode_join(c.view, c.client, c.req, c.name, list(c.groups))
    if c.kind == "leave":
        return encode_leave(c.view, c.client, c.req, list(c.groups))
    if c.kind == "gone":
        return encode_gone(c.view, c.client)
    if c.kind == "snap":
        return encode_snapshot(c.view, c.part, c.final, list(c.entries))
    raise AssertionError(f"decode_control returned an unknown kind {c.kind!r}")


def test_one_input(data: bytes) -> None:
    env = decode_envelope(data)
    control = decode_control(data)
    looks_control = is_control(data)
    if env is not None and control is not None:
        raise AssertionError("both an envelope and a control envelope")
    if env is not None:
        if looks_control:
            raise AssertionError("an envelope taken for a control envelope")
        client, groups, payloads = env
        if decode_envelope(encode_envelope(client, groups, payloads)) != env:
            raise AssertionError(f"envelope does not survive its encoder: {env!r}")
    if control is not None:
        if not looks_control:
            raise AssertionError("a control envelope not recognised by is_control")
        if decode_control(reencode(control)) != control:
            raise AssertionError(f"control envelope does not survive its encoder: {control!r}")


# ----------------------------------------------------------------------------- seeds


def seeds() -> list[bytes]:
    entries = [SnapEntry(7, 3, "client-7", ("g1", "g2")), SnapEntry(8, 0, "", ())]
    values: list[Any] = [
        [0, ["g"], [b""]],
        [2**63 - 1, ["g", "h"], [b"x", b"y" * 50]],
        [1, [], [b"x"]],
        [-1, ["g"], [b"x"]],
        [1, ["g"], []],
        {"t": 1},
        "join",
        None,
    ]
    out = [
        encode_envelope(5, ["g1", "g2"], [b"hello", b"world" * 20]),
        encode_envelope(0, ["a" * 128], [b""]),
        encode_join(3, 7, 1, "name", ["g1", "g2"]),
        encode_join(1, 0, 0, "n" * 200, ["g"]),
        encode_leave(3, 7, 2, ["g1"]),
        encode_gone(4, 7),
        encode_snapshot(5, 0, False, entries),
        encode_snapshot(5, 1, True, []),
        msgpack.packb(["snap", 5, 0, True, [[1, 2, "n", ["g", ""]]]]),
        msgpack.packb(["join", 1, 2, 3, "n", ["g"], "extra"]),
        b"\xc1",
        b"",
    ]
    out += [msgpack.packb(v, use_bin_type=True) for v in values]
    return out


DICTIONARY = [msgpack.packb(w) for w in ("join", "leave", "gone", "snap")] + [
    b"\x93",
    b"\x95",
    b"\x96",
    b"\xc3",
    b"\xc2",
    b"\xc4\x01",
    b"\xcf\x7f\xff\xff\xff\xff\xff\xff\xff",
]
