"""The unix-socket protocol between amcastd and its clients: frames, envelopes, codes.

One module that the daemon (``amcast.daemon.api``, ``amcast.daemon.runner``) and the
clients (``amcast.client``) both use; ``docs/api.md`` is its specification for clients in
other languages.

Frames. A stream is a sequence of frames ``len:u32be || body`` where ``body`` is a
msgpack map with a string ``t`` (its type). ``FrameDecoder.feed`` takes whatever bytes
the socket produced and returns complete items, in order: decoded frame dicts, or
``FrameError`` values for frames it had to refuse. It never raises and never buffers
more than ``max_frame_bytes`` plus one prefix:

- a body that is not a msgpack map with a string ``t``: ``FrameError("bad_frame")``,
  the stream stays in sync (the length prefix told us where the next frame starts);
- a prefix announcing more than ``max_frame_bytes``: ``FrameError("frame_too_large")``
  and the decoder *skips* that many bytes without buffering them, then resyncs;
- bytes left over when the peer closes: ``truncated()`` reports them.

Envelopes. A client's ``send`` frame carries one or more application payloads for one
set of groups and one service level. The daemon wraps the frame into one engine payload,
the *envelope* ``msgpack([client_id, [group, ...], [payload, ...]])``; the engine batches
envelopes into DAG vertices (one datagram = one vertex). At delivery the daemon decodes
each envelope once (``decode_envelope``: as strict as the datagram codec, since it
comes from a peer) and never loops over application messages in Python: positions are
derived per envelope (``first index + i``). A vertex delivered at total-order position
``p`` holds messages ``p .. p + count - 1``; the envelope at index ``k`` of the vertex
starts at ``p + sum(len(payloads) of envelopes before k)``.

Service levels and error codes are listed here once (``SERVICES``, ``ERROR_CODES``).

Frame types (``docs/api.md`` has every field). Client to daemon: ``hello``, ``join``,
``leave``, ``send`` (clients put an integer ``id`` on every send frame, so that an error
about it can name it), ``status`` and ``sync``. Daemon to client: ``welcome``, ``groups``,
``deliver``, ``view``, ``members``, ``status``, ``synced`` and ``error``.

- ``{"t": "sync", "id": N}`` is answered ``{"t": "synced", "id": N}`` once the daemon has
  handled every earlier frame of the connection: every error frame about an earlier
  frame is written before the ``synced`` reply. A ``send`` frame without an error by then
  was accepted.
- Every refused ``send`` frame gets ``{"t": "error", "code": C, "detail": ...,
  "fatal": false, "id": <the send frame's id>}`` (``REFUSAL_CODES``); none of its
  messages was sent.
- When the daemon stops, messages it accepted but did not deliver itself within
  ``shutdown.grace_s`` are reported before the fatal ``shutting_down``: one frame
  ``{"t": "error", "code": "undelivered", "fatal": false, "id": <send frame id>,
  "first": k}`` per affected send frame: messages ``k..`` of that frame were accepted
  but this daemon stopped before delivering them (other members may or may not).
  Other ``undelivered`` frames carry ``count`` (messages ``first..first+count-1``),
  ``outcome`` and ``reason`` (``UNDELIVERED_REASONS``): own messages of a view this
  daemon was excluded from, and cross-cluster messages not acknowledged by every
  destination cluster within ``federation.deadline_s`` (``clusters``: those that had
  not), or still unacknowledged at shutdown.
- The ``status`` reply carries ``health``: ``{"ok": bool, "problems": [str, ...],
  "warnings": [str, ...]}`` (``ok`` reads the problems alone).

Control envelopes (group membership, ``amcast.daemon.groups``). Daemons multicast the
changes of their clients' group memberships as ``agreed`` engine payloads whose first
element is a *string*, so ``decode_envelope`` (an int client id first) refuses them and
they are never handed to clients as deliveries; ``decode_control`` reads them, as
strictly. Each carries the view it was submitted in (applied only if delivered in it):

- ``["join", view, client, req, name, [group, ...]]`` and
  ``["leave", view, client, req, [group, ...]]``: a client's request number ``req``;
- ``["gone", view, client]``: the client disconnected;
- ``["snap", view, part, final, [[client, req, name, [group, ...]], ...]]``: the
  sender's clients and their groups at the start of ``view`` (parts 0.., the last one
  ``final``).

A ``members`` frame tells a client that asked for it (``join`` with ``"members": true``)
who is in a group (``docs/api.md``, Group membership).

Sizes. One application message has one limit, ``api.max_message_bytes``; the largest
frame and the largest engine message (an envelope) are derived from it by adding the
overheads below (``send_frame_overhead``, ``envelope_overhead``), so the three can never
disagree.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import msgpack

SERVICES = ("causal", "agreed", "safe")
"""Service levels a ``send`` frame may ask for (``amcast.protocols.vocabulary``)."""

ERROR_CODES: dict[str, str] = {
    "hello_required": "the first frame is not hello (fatal)",
    "unsupported_version": "hello.v is not a version this daemon speaks (fatal)",
    "bad_frame": "the body is not a msgpack map with a string t (the frame is skipped)",
    "frame_too_large": "the length prefix exceeds max_frame_bytes (the frame is skipped)",
    "truncated_frame": "the client closed its sending side in the middle of a frame (fatal)",
    "unknown_type": "t names no request",
    "bad_field": (
        "a field is missing, has the wrong type or is out of its range (the error's field "
        "names it; fatal for hello)"
    ),
    "bad_service": "service is not causal, agreed or safe",
    "message_too_large": "a payload exceeds max_message_bytes (no message of the frame is sent)",
    "too_many_groups": "more than max_groups groups joined or addressed",
    "overloaded": "the daemon could not take the frame; none of its messages was sent",
    "too_many_clients": "max_clients clients have said hello (fatal, answers a hello)",
    "too_many_pending_hellos": (
        "api.max_pending_hellos connections were waiting for their hello and this one was "
        "closed to make room for a newer one (fatal)"
    ),
    "slow_reader": "deliveries unread past the hard limit (fatal)",
    "hello_timeout": "no hello within api.hello_timeout_s of connecting (fatal)",
    "frame_timeout": (
        "a started frame was not completed within api.frame_timeout_s (fatal)"
    ),
    "unknown_cluster": (
        "a send frame's clusters names a cluster this daemon's federation does not have "
        "(or the daemon runs none); nothing of the frame was sent (not fatal)"
    ),
    "forbidden": (
        "the access policy ([access]) does not allow this client to join or send to a "
        "group of the frame; nothing of it was done (not fatal)"
    ),
    "shutting_down": "the daemon is stopping (fatal; not fatal for a send during shutdown)",
    "undelivered": (
        "messages first.. (count of them, when given) of send frame id were accepted and "
        "not delivered: reason view_change, shutting_down (the fatal shutting_down "
        "follows) or deadline (cross-cluster, outcome unknown); not fatal"
    ),
    "internal_error": "the daemon failed to handle the frame (a bug, logged); not fatal",
}
"""Every ``code`` an ``error`` frame can carry, with when it is sent (docs/api.md)."""

UNDELIVERED_REASONS: dict[str, str] = {
    "view_change": "excluded from the view the messages were sent in (outcome "
                   "not_delivered, delivered or unknown)",
    "shutting_down": "the daemon stopped before delivering them (or, cross-cluster, "
                     "before every destination acknowledged them: outcome unknown)",
    "deadline": "cross-cluster messages that not every destination cluster acknowledged "
                "holding within federation.deadline_s; still sent: outcome unknown, "
                "delivered by every destination or by none",
}
"""The ``reason`` of an ``undelivered`` error frame (docs/api.md)."""

REFUSAL_CODES = (
    "message_too_large", "bad_field", "bad_service", "too_many_groups", "overloaded",
    "shutting_down", "forbidden", "unknown_cluster",
)
"""Codes of an ``error`` frame refusing a ``send`` frame (none of its messages was sent)."""

PROTOCOL_VERSION = 1
MIN_REQUEST_ID = -(2**63)
MAX_REQUEST_ID = 2**63 - 1
"""A request's ``id`` is a signed 64-bit integer: every msgpack library decodes that to a
native integer, so a client in any language can match the echoed id; a ``send`` frame's
id is a message number, ``0..MAX_REQUEST_ID`` (the Python client's other requests use
negative ids, so the two never collide)."""
MAX_CLIENT_NAME_BYTES = 256
"""Longest ``hello`` name (UTF-8 bytes): every ``status`` reply lists every client's name,
so a name as large as a frame would make each reply that much larger per client."""
PREFIX = struct.Struct(">I")
DEFAULT_MAX_FRAME_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class FrameError:
    """A frame the decoder refused; ``code`` is the error code of ``docs/api.md``."""

    code: str
    detail: str


def encode_frame(frame: dict[str, Any]) -> bytes:
    """One frame, prefix included."""
    body = msgpack.packb(frame, use_bin_type=True)
    return PREFIX.pack(len(body)) + body


def encode_frame_body(body: bytes) -> bytes:
    """Prefix an already msgpack-encoded body (used to splice pre-encoded parts)."""
    return PREFIX.pack(len(body)) + body


class FrameDecoder:
    """Incremental, bounded decoder of a frame stream (see the module docstring).

    ``feed(data)`` returns every complete item. A reader that may stop between frames
    (the daemon stops handling a client's frames while the client does not read its
    answers) uses ``push(data)`` then ``pop()`` one item at a time: what it has not
    popped stays *undecoded* in the buffer (at most what was pushed, never more than
    that plus one frame), not as decoded objects many times its size."""

    __slots__ = ("_buf", "_max", "_pos", "_skip")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self._buf = bytearray()
        self._max = max_frame_bytes
        self._skip = 0
        self._pos = 0  # bytes of _buf already decoded

    @property
    def buffered(self) -> int:
        """Bytes held and not decoded yet (complete frames not popped, a partial one)."""
        return len(self._buf) - self._pos

    @property
    def partial(self) -> bool:
        """Bytes of a frame are held (or an oversized one is being skipped)."""
        return len(self._buf) > self._pos or self._skip > 0

    def feed(self, data: bytes) -> list[dict[str, Any] | FrameError]:
        self.push(data)
        out: list[dict[str, Any] | FrameError] = []
        pop = self.pop
        while (item := pop()) is not None:
            out.append(item)
        return out

    def push(self, data: bytes) -> None:
        """Take bytes from the stream (the rest of a skipped oversized frame is dropped)."""
        if self._skip:
            if len(data) <= self._skip:
                self._skip -= len(data)
                return
            data = data[self._skip :]
            self._skip = 0
        self._buf += data

    def pop(self) -> dict[str, Any] | FrameError | None:
        """The next complete item, or ``None`` until more bytes are pushed."""
        buf = self._buf
        start = self._pos
        end = len(buf)
        item: dict[str, Any] | FrameError | None = None
        if end - start >= 4:
            (size,) = PREFIX.unpack_from(buf, start)
            if size > self._max:
                item = FrameError("frame_too_large", f"{size} bytes > max_frame_bytes {self._max}")
                start += 4
                available = end - start
                if available >= size:
                    start += size
                else:
                    self._skip = size - available
                    start = end
            elif end - start - 4 >= size:
                body = bytes(buf[start + 4 : start + 4 + size])
                start += 4 + size
                item = decode_frame_body(body)
        if start == end:
            if end:
                buf.clear()
            self._pos = 0
        elif (item is None and start) or (start > COMPACT_BYTES and 2 * start > end):
            # waiting for more (keep only the partial frame), or much already decoded
            del buf[:start]
            self._pos = 0
        else:
            self._pos = start
        return item

    def truncated(self) -> FrameError | None:
        """What to report when the peer closed: a partial frame, or ``None``."""
        if self.partial:
            pending = self.buffered + self._skip
            return FrameError("truncated_frame", f"stream ended inside a frame ({pending} bytes)")
        return None


COMPACT_BYTES = 1 << 16
"""``FrameDecoder.pop`` drops decoded bytes from its buffer's front past this."""


def decode_frame_body(body: bytes) -> dict[str, Any] | FrameError:
    try:
        frame = msgpack.unpackb(body, raw=False, strict_map_key=True, use_list=True)
    except Exception as exc:  # msgpack raises several types on garbage
        return FrameError("bad_frame", f"not msgpack: {type(exc).__name__}")
    if not isinstance(frame, dict):
        return FrameError("bad_frame", "frame body is not a map")
    if not isinstance(frame.get("t"), str):
        return FrameError("bad_frame", "frame has no string field 't'")
    return frame


# ---------------------------------------------------------------- envelopes

_packb = msgpack.packb
_unpackb = msgpack.unpackb


def encode_envelope(client: int, groups: list[str], payloads: list[bytes]) -> bytes:
    return _packb((client, groups, payloads), use_bin_type=True)


def split_payloads(payloads: list[bytes], limit: int) -> list[list[bytes]]:
    """Consecutive runs of ``payloads`` of at most ``limit`` bytes each (order kept)."""
    parts: list[list[bytes]] = []
    current: list[bytes] = []
    size = 0
    for p in payloads:
        cost = len(p) + 8
        if current and size + cost > limit:
            parts.append(current)
            current, size = [], 0
        current.append(p)
        size += cost
    if current:
        parts.append(current)
    return parts


MAX_CLIENT_ID = 2**63 - 1

# msgpack sizes: a str/bin/array header is at most 5 bytes, an int at most 9.
_HEADER = 5
_INT = 9
FRAME_FIELDS_SLACK = 4096
"""Room in a ``send`` frame for its other fields (``t``, ``id``, ``service``, keys a
client may add that the daemon ignores)."""


def groups_bytes(max_groups: int, max_group_name_bytes: int) -> int:
    """Most bytes a list of groups can take in msgpack (the names plus their headers)."""
    return _HEADER + max_groups * (max_group_name_bytes + _HEADER)


def send_frame_overhead(max_groups: int, max_group_name_bytes: int) -> int:
    """Bytes of a ``send`` frame body beyond its payloads' bytes, for one payload."""
    return FRAME_FIELDS_SLACK + groups_bytes(max_groups, max_group_name_bytes) + 2 * _HEADER


def envelope_overhead(max_groups: int, max_group_name_bytes: int) -> int:
    """Bytes of an envelope beyond its payload bytes, for one payload (``encode_envelope``)."""
    return (
        1 + _INT + groups_bytes(max_groups, max_group_name_bytes) + _HEADER + _HEADER
    )


def decode_envelope(envelope: bytes) -> list[Any] | None:
    """``[client, groups, payloads]``; ``None`` if the bytes are not a well-formed envelope.

    As strict as the datagram codec: an int client id, a non-empty list of non-empty
    group names (str) and a non-empty list of payloads (bin). The element checks run in
    C (``map``/``set``), not in a Python loop per message.
    """
    try:
        env = _unpackb(envelope, raw=False, use_list=True, strict_map_key=True)
    except Exception:  # msgpack raises several unrelated types on garbage
        return None
    if type(env) is not list or len(env) != 3:
        return None
    client, groups, payloads = env
    if (
        type(client) is not int
        or not 0 <= client <= MAX_CLIENT_ID
        or type(groups) is not list
        or type(payloads) is not list
        or not groups
        or not payloads
        or set(map(type, groups)) != _STR
        or set(map(type, payloads)) != _BYTES
        or not all(groups)
    ):
        return None
    return env


_STR = {str}
_BYTES = {bytes}


# ---------------------------------------------------------------- control envelopes

CONTROL_KINDS = ("join", "leave", "gone", "snap")
MAX_NAME_CHARS = 128
"""A client's ``hello`` name as carried in control envelopes (longer ones are cut)."""


@dataclass(frozen=True, slots=True)
class SnapEntry:
    """One client of a snapshot: its last request reflected, name and groups."""

    client: int
    req: int
    name: str
    groups: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Control:
    """A decoded control envelope (see the module docstring); unused fields are empty."""

    kind: str
    view: int
    client: int = -1
    req: int = -1
    name: str = ""
    groups: tuple[str, ...] = ()
    part: int = 0
    final: bool = False
    entries: tuple[SnapEntry, ...] = ()


def encode_join(view: int, client: int, req: int, name: str, groups: list[str]) -> bytes:
    return _packb(("join", view, client, req, name[:MAX_NAME_CHARS], groups), use_bin_type=True)


def encode_leave(view: int, client: int, req: int, groups: list[str]) -> bytes:
    return _packb(("leave", view, client, req, groups), use_bin_type=True)


def encode_gone(view: int, client: int) -> bytes:
    return _packb(("gone", view, client), use_bin_type=True)


def encode_snapshot(view: int, part: int, final: bool, entries: list[SnapEntry]) -> bytes:
    return _packb(("snap", view, part, final,
                   [(e.client, e.req, e.name[:MAX_NAME_CHARS], list(e.groups)) for e in entries]),
                  use_bin_type=True)


def _uint(x: Any) -> bool:
    return type(x) is int and 0 <= x <= MAX_CLIENT_ID


def _groups(x: Any, empty: bool) -> tuple[str, ...] | None:
    if type(x) is not list or (not x and not empty):
        return None
    if x and (set(map(type, x)) != _STR or not all(x)):
        return None
    return tuple(x)


def _name(x: Any) -> bool:
    return type(x) is str and len(x) <= MAX_NAME_CHARS


def decode_control(data: bytes) -> Control | None:
    """The control envelope in ``data``; ``None`` unless it is exactly one of the shapes
    of the module docstring (non-negative ints, non-empty group names, no extra field)."""
    try:
        c = _unpackb(data, raw=False, use_list=True, strict_map_key=True)
    except Exception:  # msgpack raises several unrelated types on garbage
        return None
    if type(c) is not list or len(c) < 3 or type(c[0]) is not str or not _uint(c[1]):
        return None
    kind, view = c[0], c[1]
    if kind == "join" and len(c) == 6:
        groups = _groups(c[5], empty=False)
        if _uint(c[2]) and _uint(c[3]) and _name(c[4]) and groups is not None:
            return Control("join", view, c[2], c[3], c[4], groups)
    elif kind == "leave" and len(c) == 5:
        groups = _groups(c[4], empty=False)
        if _uint(c[2]) and _uint(c[3]) and groups is not None:
            return Control("leave", view, c[2], c[3], groups=groups)
    elif kind == "gone" and len(c) == 3:
        if _uint(c[2]):
            return Control("gone", view, c[2])
    elif kind == "snap" and len(c) == 5:
        part, final, raw = c[2], c[3], c[4]
        if not _uint(part) or type(final) is not bool or type(raw) is not list:
            return None
        entries = []
        for e in raw:
            if type(e) is not list or len(e) != 4:
                return None
            groups = _groups(e[3], empty=True)
            if not (_uint(e[0]) and _uint(e[1]) and _name(e[2])) or groups is None:
                return None
            entries.append(SnapEntry(e[0], e[1], e[2], groups))
        return Control("snap", view, part=part, final=final, entries=tuple(entries))
    return None


def is_control(data: bytes) -> bool:
    """Whether ``data`` looks like a control envelope (a list starting with a string):
    for counting a malformed one as ``bad_control`` rather than ``bad_envelope``."""
    try:
        c = _unpackb(data, raw=False, use_list=True, strict_map_key=True)
    except Exception:
        return False
    return type(c) is list and bool(c) and type(c[0]) is str
