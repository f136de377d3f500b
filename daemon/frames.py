"""Frames of the unix-socket API: a 4-byte length prefix and one msgpack map.

Theory of operation: a stream is a sequence of frames ``len:u32be || body`` where
``body`` is a msgpack map with a string ``t`` (its type). ``FrameDecoder.feed`` takes
whatever bytes the socket produced and returns complete items, in order: decoded
frame dicts, or ``FrameError`` values for frames it had to refuse. It never raises and
never buffers more than ``max_frame_bytes`` plus one prefix:

- a body that is not a msgpack map with a string ``t``: ``FrameError("bad_frame")``,
  the stream stays in sync (the length prefix told us where the next frame starts);
- a prefix announcing more than ``max_frame_bytes``: ``FrameError("frame_too_large")``
  and the decoder *skips* that many bytes without buffering them, then resyncs;
- bytes left over when the peer closes: ``truncated()`` reports them.

Used by the daemon (``daemon.api``) and by the client library (``amcast.client``); the
protocol is documented in ``docs/api.md``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import msgpack

PROTOCOL_VERSION = 1
PREFIX = struct.Struct(">I")
DEFAULT_MAX_FRAME_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class FrameError:
    """A frame the decoder refused; ``code`` is the error code of ``docs/api.md``."""

    code: str
    detail: str


def encode(frame: dict[str, Any]) -> bytes:
    """One frame, prefix included."""
    body = msgpack.packb(frame, use_bin_type=True)
    return PREFIX.pack(len(body)) + body


def encode_body(body: bytes) -> bytes:
    """Prefix an already msgpack-encoded body (used to splice pre-encoded parts)."""
    return PREFIX.pack(len(body)) + body


class FrameDecoder:
    """Incremental, bounded decoder of a frame stream (see the module docstring)."""

    __slots__ = ("_buf", "_max", "_skip")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self._buf = bytearray()
        self._max = max_frame_bytes
        self._skip = 0

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def feed(self, data: bytes) -> list[dict[str, Any] | FrameError]:
        out: list[dict[str, Any] | FrameError] = []
        if self._skip:
            if len(data) <= self._skip:
                self._skip -= len(data)
                return out
            data = data[self._skip :]
            self._skip = 0
        buf = self._buf
        buf += data
        start = 0
        end = len(buf)
        while end - start >= 4:
            (size,) = PREFIX.unpack_from(buf, start)
            if size > self._max:
                out.append(
                    FrameError("frame_too_large", f"{size} bytes > max_frame_bytes {self._max}")
                )
                start += 4
                available = end - start
                if available >= size:
                    start += size
                    continue
                self._skip = size - available
                start = end
                break
            if end - start - 4 < size:
                break
            body = bytes(buf[start + 4 : start + 4 + size])
            start += 4 + size
            out.append(decode_body(body))
        if start:
            del buf[:start]
        return out

    def truncated(self) -> FrameError | None:
        """What to report when the peer closed: a partial frame, or ``None``."""
        if self._buf or self._skip:
            pending = len(self._buf) + self._skip
            return FrameError("truncated_frame", f"stream ended inside a frame ({pending} bytes)")
        return None


def decode_body(body: bytes) -> dict[str, Any] | FrameError:
    try:
        frame = msgpack.unpackb(body, raw=False, strict_map_key=True, use_list=True)
    except Exception as exc:  # msgpack raises several types on garbage
        return FrameError("bad_frame", f"not msgpack: {type(exc).__name__}")
    if not isinstance(frame, dict):
        return FrameError("bad_frame", "frame body is not a map")
    if not isinstance(frame.get("t"), str):
        return FrameError("bad_frame", "frame has no string field 't'")
    return frame
