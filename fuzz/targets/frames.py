"""Fuzz target ``frames``: the client frame decoder and the daemon's dispatch of frames.

Theory of operation: the input is a byte stream a client writes to the unix socket,
after one control byte that picks how the stream is cut into reads (1..32 bytes) and a
small ``max_frame_bytes`` for a bare decoder. Two consumers read it:

- a bare ``FrameDecoder`` (``amcast.socket_protocol``) fed once whole and once in
  reads: both must give the same items, each a frame dict with a string ``t`` or a
  ``FrameError`` with a documented code; it never buffers more than one prefix plus
  ``max_frame_bytes``, and ``truncated`` reports exactly a partial frame;
- a real ``ClientConnection`` of the daemon's API server (``amcast.daemon.api``), fed
  the reads through ``data_received`` then ``eof_received`` as asyncio would, over an
  in-memory transport and a recording backend that accepts every send and join. What
  the connection writes back must be well-formed frames, and never ``internal_error``
  (the code of an exception while handling a frame: a bug).

Decoder and dispatch must not raise; a fresh event loop per input holds the
connection's timers (hello timeout, close grace) and drops them unrun.
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgpack
from amcast.daemon.api import ApiServer, ClientConnection
from amcast.daemon.config import ApiSection

from amcast.socket_protocol import ERROR_CODES, PREFIX, FrameDecoder, FrameError, encode_frame

INSTRUMENT = ("amcast",)
MAX_LEN = 16384
TIMEOUT_S = 10
API = ApiSection(
    socket="/nonexistent/amcast-fuzz.sock",
    max_message_bytes=64,
    max_groups=4,
    max_group_name_bytes=16,
    max_clients=4,
)


def controls(data: bytes) -> tuple[int, int, bytes]:
    """``(read size, bare decoder max_frame_bytes, stream)`` of an input."""
    head = data[0] if data else 0
    return head % 32 + 1, 16 + (head >> 5) * 64, data[1:]


class MemoryTransport(asyncio.Transport):
    """What a ``ClientConnection`` writes, kept in memory; closing only sets flags."""

    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.eof = False
        self.closed = False
        self.reading = True

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self.eof or self.closed:
            raise AssertionError("the connection wrote after it closed its side")
        self.written += data

    def get_write_buffer_size(self) -> int:
        return 0  # the client reads everything at once

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        self.eof = True

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.eof or self.closed


class RecordingBackend:
    """The daemon side of the API: accepts every send and group request, counts."""

    def __init__(self) -> None:
        self.sent = 0
        self.requests: list[tuple[str, list[str]]] = []
        self.errors: list[str] = []

    def welcome(self) -> dict[str, Any]:
        return {"node": 1, "max_message_bytes": API.max_message_bytes}

    def status(self) -> dict[str, Any]:
        return {"node": 1, "health": {"ok": True, "problems": []}}

    def send(
        self,
        conn: ClientConnection,
        groups: list[str],
        service: str,
        payloads: list[bytes],
        ref: Any = None,
    ) -> str | None:
        self.sent += len(payloads)
        return None

    def count_client_error(self, code: str) -> None:
        self.errors.append(code)

    def count_disconnect(self, reason: str) -> None:
        pass

    def forget_client(self, client_id: int) -> None:
        pass

    def flow_hold(self, on: bool) -> None:
        pass

    def group_request(
        self, conn: ClientConnection, kind: str, groups: list[str], ref: Any, watch: bool
    ) -> None:
        self.requests.append((kind, groups))


def _check_bare_decoder(step: int, limit: int, stream: bytes) -> None:
    whole = FrameDecoder(limit).feed(stream)
    dec = FrameDecoder(limit)
    pieces: list[dict[str, Any] | FrameError] = []
    for i in range(0, len(stream), step):
        pieces += dec.feed(stream[i : i + step])
        if dec.buffered > PREFIX.size + limit:
            raise AssertionError(f"{dec.buffered} bytes buffered, limit {limit}")
    if repr(pieces) != repr(whole):  # repr: a NaN in a frame is not equal to itself
        raise AssertionError(f"reads of {step} bytes decode differently:\n{pieces}\n{whole}")
    for item in pieces:
        if isinstance(item, FrameError):
            if item.code not in ERROR_CODES:
                raise AssertionError(f"undocumented error code {item.code}")
        elif type(item) is not dict or type(item.get("t")) is not str:
            raise AssertionError(f"not a frame: {item!r}")
    if (dec.truncated() is None) != (_partial(stream, limit) == 0):
        raise AssertionError("truncated() disagrees with the stream")


def _partial(stream: bytes, limit: int) -> int:
    """Bytes of the stream's unfinished last frame (prefix included), by hand."""
    pos = 0
    while len(stream) - pos >= PREFIX.size:
        (size,) = PREFIX.unpack_from(stream, pos)
        if len(stream) - pos - PREFIX.size < size:
            return len(stream) - pos
        pos += PREFIX.size + size
    return len(stream) - pos


async def _converse(step: int, stream: bytes) -> MemoryTransport:
    backend = RecordingBackend()
    server = ApiServer(API, backend)
    conn = ClientConnection(server, 1)
    transport = MemoryTransport()
    conn.connection_made(transport)
    for i in range(0, len(stream), step):
        conn.data_received(stream[i : i + step])
    conn.eof_received()
    conn.connection_lost(None)
    return transport


def _check_dispatch(step: int, stream: bytes) -> None:
    loop = asyncio.new_event_loop()
    try:
        transport = loop.run_until_complete(_converse(step, stream))
    finally:
        loop.close()
    reply = FrameDecoder(1 << 30)
    for frame in reply.feed(bytes(transport.written)):
        if isinstance(frame, FrameError):
            raise AssertionError(f"the daemon wrote a bad frame: {frame}")
        if frame.get("code") == "internal_error":
            raise AssertionError(f"the daemon failed to handle a frame: {frame}")
    if reply.truncated() is not None:
        raise AssertionError("the daemon wrote a partial frame")


def test_one_input(data: bytes) -> None:
    step, limit, stream = controls(data)
    _check_bare_decoder(step, limit, stream)
    _check_dispatch(step, stream)


# ----------------------------------------------------------------------------- seeds

_FRAMES: list[dict[str, Any]] = [
    {"t": "hello", "v": 1, "name": "fuzz"},
    {"t": "join", "groups": ["g1", "g2"], "id": 1, "members": True},
    {"t": "send", "groups": ["g1"], "service": "safe", "payloads": [b"a", b"bc"], "id": 2},
    {"t": "send", "groups": "g2", "payload": b"x" * 64, "id": 3},
    {"t": "send", "groups": ["g1"], "service": "causal", "payloads": [b"y" * 65], "id": 4},
    {"t": "leave", "groups": ["g2"], "id": 5},
    {"t": "status", "id": 6},
    {"t": "sync", "id": 7},
]


def seeds() -> list[bytes]:
    """Whole conversations cut in reads of several sizes, a conversation without hello,
    garbage, oversized and truncated frames."""
    talk = b"".join(encode_frame(f) for f in _FRAMES)
    out = [bytes((head,)) + talk for head in (0, 3, 31, 64 + 7, 255)]
    out += [bytes((0,)) + encode_frame(_FRAMES[0]) + encode_frame(f) for f in _FRAMES[1:]]
    out.append(bytes((5,)) + b"".join(encode_frame(f) for f in _FRAMES[1:]))
    out.append(bytes((1,)) + encode_frame({"t": "hello", "v": 2}))
    out.append(bytes((2,)) + PREFIX.pack(3) + b"\xc1\xc1\xc1" + talk)
    out.append(bytes((2,)) + PREFIX.pack(1) + msgpack.packb(7) + talk)
    out.append(bytes((9,)) + PREFIX.pack(9000) + b"z" * 300 + talk)
    out.append(bytes((0,)) + talk[:-3])
    return out


DICTIONARY = [
    msgpack.packb(word)
    for word in (
        "t",
        "hello",
        "v",
        "name",
        "join",
        "leave",
        "send",
        "status",
        "sync",
        "groups",
        "members",
        "service",
        "payloads",
        "payload",
        "id",
        "causal",
        "agreed",
        "safe",
    )
] + [PREFIX.pack(0), PREFIX.pack(1 << 20)]
