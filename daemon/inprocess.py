"""A client connection inside the daemon's own process: two asyncio transports joined in
memory, for the embedded member (``amcast.member``).

The API server and the client library speak their framed protocol over a stream; here
the stream is a pair of ``MemoryTransport``s on one event loop instead of a unix
socket. What one side writes reaches the other's ``data_received`` on a later turn of
the loop (never re-entrantly, as with a socket), in order, and the stream semantics the
two sides rely on hold:

- **Flow control.** A side that pauses reading (``pause_reading``: the daemon while the
  cluster's send window is full, the client while its event queue is full) receives
  nothing more; what its peer writes meanwhile waits in the peer's write buffer, whose
  size the peer sees (``get_write_buffer_size``: the daemon's slow-reader limit) and
  which calls the peer protocol's ``pause_writing`` above the high-water mark and
  ``resume_writing`` once at or below the low-water mark.
- **End of stream.** ``close`` (and ``write_eof``) hands over what was written first and
  then the end: the peer's ``connection_lost(None)``. ``abort`` drops what is buffered and
  ends both sides at once.

There is no socket: ``get_extra_info("socket")`` is ``None``, so the daemon sees no peer
credentials (the embedding process is the daemon's own) and no unread-frame probe.
"""

from __future__ import annotations

import asyncio
from typing import Any

DEFAULT_HIGH_WATER = 64 * 1024


class MemoryTransport(asyncio.Transport):
    """One end of an in-memory stream (``pipe``)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, protocol: asyncio.Protocol,
                 name: str) -> None:
        super().__init__()
        self._loop = loop
        self._protocol = protocol
        self._name = name
        self.peer: MemoryTransport | None = None
        self._buffer: list[bytes] = []
        """Written by this side, not yet handed to the peer's protocol."""
        self._buffered = 0
        self._high = DEFAULT_HIGH_WATER
        self._low = DEFAULT_HIGH_WATER // 4
        self._writing_paused = False
        self._reading = True
        self._closing = False
        self._eof_pending = False
        """``close``/``write_eof`` called: the end follows the buffered bytes."""
        self._lost = False
        self._scheduled = False

    # ---- asyncio.Transport -----------------------------------------------------
    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "peername":
            return f"in-process:{self._name}"
        return default

    def is_closing(self) -> bool:
        return self._closing or self._lost

    def close(self) -> None:
        if self._closing or self._lost:
            return
        self._closing = True
        self._eof_pending = True
        self._schedule()

    def abort(self) -> None:
        self._buffer.clear()
        self._buffered = 0
        self._closing = True
        self._end(None)
        if self.peer is not None:
            self.peer._buffer.clear()
            self.peer._buffered = 0
            self.peer._closing = True
            self.peer._end(None)

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        assert isinstance(protocol, asyncio.Protocol)
        self._protocol = protocol

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._protocol

    def is_reading(self) -> bool:
        return self._reading and not self._lost

    def pause_reading(self) -> None:
        self._reading = False

    def resume_reading(self) -> None:
        if self._reading:
            return
        self._reading = True
        if self.peer is not None:
            self.peer._schedule()  # what the peer wrote meanwhile

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        if high is None:
            high = DEFAULT_HIGH_WATER if low is None else 4 * low
        if low is None:
            low = high // 4
        if not 0 <= low <= high:
            raise ValueError(f"high ({high!r}) must be >= low ({low!r}) must be >= 0")
        self._high, self._low = high, low
        self._check_pause()

    def get_write_buffer_size(self) -> int:
        return self._buffered

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._low, self._high

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._closing or self._lost or not data:
            return
        self._buffer.append(bytes(data))
        self._buffered += len(data)
        self._check_pause()
        self._schedule()

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        self.close()

    # ---- the stream ----------------------------------------------------------------
    def _check_pause(self) -> None:
        if not self._writing_paused and self._buffered > self._high:
            self._writing_paused = True
            self._protocol.pause_writing()

    def _schedule(self) -> None:
        if not self._scheduled and not self._lost:
            self._scheduled = True
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        """Hand what this side wrote to the peer's protocol while the peer reads, then
        the end of the stream if it was asked for and nothing is left."""
        self._scheduled = False
        peer = self.peer
        if self._lost or peer is None:
            return
        while self._buffer and peer._reading and not peer._lost:
            chunk = b"".join(self._buffer) if len(self._buffer) > 1 else self._buffer[0]
            self._buffer.clear()
            self._buffered = 0
            peer._protocol.data_received(chunk)
        if self._writing_paused and self._buffered <= self._low:
            self._writing_paused = False
            self._protocol.resume_writing()
        if self._eof_pending and not self._buffer:
            self._end(None)
            peer._closing = True
            peer._end(None)

    def _end(self, exc: Exception | None) -> None:
        if self._lost:
            return
        self._lost = True
        self._loop.call_soon(self._protocol.connection_lost, exc)


def pipe(loop: asyncio.AbstractEventLoop, server_side: asyncio.Protocol,
         client_side: asyncio.Protocol) -> tuple[MemoryTransport, MemoryTransport]:
    """Join two protocols by an in-memory stream and tell both (``connection_made``):
    the server side first, as a listening socket would. Returns (server's transport,
    client's transport)."""
    server = MemoryTransport(loop, server_side, "daemon")
    client = MemoryTransport(loop, client_side, "client")
    server.peer, client.peer = client, server
    server_side.connection_made(server)
    client_side.connection_made(client)
    return server, client
