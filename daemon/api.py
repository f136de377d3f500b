"""The unix-socket API server: frames in, deliveries out, bounded everywhere.

Theory of operation (the protocol itself is ``docs/api.md``): one ``ClientConnection``
(an asyncio ``Protocol``) per connected application. Bytes go through a bounded
``FrameDecoder``; each frame is dispatched by its type. Frames that break the rules get
an ``error`` frame with a code (``ClientError`` in ``amcast.protocols.errors``) and the
connection is kept where the stream is still in sync; only a missing or bad ``hello``,
a wrong version or a slow reader close it.

Deliveries (``ApiServer.deliver``) are grouped per client and per vertex: a client gets
*one* ``deliver`` frame per delivered vertex holding every envelope addressed to one of
its groups, written with one ``transport.write``; identical frames for several clients
are encoded once.

Backpressure, the slow-reader policy (end-to-end flow control):

1. a client whose unread deliveries exceed ``client_queue_high_bytes`` (the transport's
   high-water mark) has its *reading paused* (its own sends stop until it catches up)
   and the daemon *holds its releases* (``Backend.flow_hold``, ``Node.hold_deliveries``):
   it acknowledges nothing more, so every sender's window closes and the whole group
   slows to what this client reads; below the low-water mark (a quarter of it) the
   hold ends. A client that keeps reading is never disconnected;
2. a client that makes no progress (its queue does not shrink) for
   ``slow_reader_timeout_s``, or whose queue passes ``client_queue_max_bytes`` (what was
   already on its way when the hold began), gets an ``error`` frame ``slow_reader``
   and is disconnected (counted in
   ``amcast_clients_disconnected_total{reason="slow_reader"}``); the group goes on.

A client's queue is bounded, so it cannot exhaust memory. When the engine's window is full,
the daemon calls ``pause_sends``: every client's reading is paused (their sends are
flow-controlled at the socket) until ``resume_sends``. Frames already read by then are
still handled, in order (the daemon queues their envelopes, bounded in bytes).

Group membership: ``join``/``leave`` are handed to the backend (``group_request``),
which answers ``groups`` once the change took effect in the total order and keeps the
routing index ``members_of`` (``amcast.daemon.groups``); ``ClientConnection.groups`` is
what the client asked for (the ``max_groups`` check).

Access control (``amcast.daemon.access``): at connect the daemon reads the client's uid,
gid and pid (``SO_PEERCRED``) and resolves its names; a ``join`` or ``send`` naming a
group the ``[access]`` policy denies it is refused whole with ``forbidden`` (counted in
``amcast_client_requests_denied_total{request}``, logged at most once a second per
connection with the number of denials not logged), and the connection goes on.
``ApiServer.access`` is replaced on reload; groups already joined are kept.

Connection slots: a connection that has not said ``hello`` is *pending*; pending
connections are a pool of their own, ``api.max_pending_hellos``, and only a greeted
client takes one of ``api.max_clients`` (``ApiServer.admit``, ``greet``). When the pool
is full a new connection is still taken and the oldest pending one without a complete
frame waiting goes (``too_many_pending_hellos``), so connections that never say hello,
however many and however often reopened, cannot keep a client that does from being
served. Every frame's fields are checked for type and range before it is acted on
(``bad_field``, naming the field; fatal for ``hello``).

Bounds on what a client can hold (resource abuse): a connection without ``hello`` gets
``hello_timeout`` after ``api.hello_timeout_s`` (and any error before its hello is
fatal); a frame that was started (its length
prefix or part of its body read) must be complete within ``api.frame_timeout_s`` of the
last complete frame or of its first byte (time while the daemon is not reading the
client does not count), or the client gets ``frame_timeout`` and is disconnected
(``ApiServer.check_frames``, on the daemon's 1 s tick); the frame decoder never buffers
more than one largest frame plus one read; a client whose answers pile up unread (above
``client_queue_high_bytes``) has its next frames wait, undecoded, until it reads
(``_handle``: requests cannot make the daemon queue answers without bound); a client
that half-closes (EOF) gives its slot back at once and what is still queued to it is
dropped after ``close_grace_s`` if it does not read it.

Every frame is handled in arrival order, so ``sync`` is answered ``synced`` right away:
any error about an earlier frame of the connection was written before. An exception
while handling a frame is answered ``internal_error`` (counted, logged) and the
connection goes on.

The socket file: a live daemon already answering on ``api.socket`` makes ``start``
fail (``ConfigurationError``, exit status 2) instead of taking the path over; a stale
socket file (nobody answers) is removed. ``close_listener`` removes the file only if it
is still the one this server created.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import grp
import itertools
import math
import os
import resource
import socket
import stat
import struct
import termios
import time
from collections.abc import Callable
from typing import Any, Protocol, cast

import msgpack
import structlog

from .. import socket_protocol as sp
from ..protocols.errors import ConfigurationError
from .access import AccessPolicy, PeerIdentity, Request, peer_identity, resolve
from .config import ApiSection
from .inprocess import pipe

_packb = msgpack.packb
log = structlog.get_logger("amcastd")
PROBE_TIMEOUT_S = 2.0
MAX_SOCKET_PATH_BYTES = 107  # sun_path holds 108 bytes with the terminating NUL (Linux)


class Backend(Protocol):
    """What the API needs from the daemon."""

    def welcome(self) -> dict[str, Any]: ...

    def status(self) -> dict[str, Any]: ...

    def send(
        self, conn: ClientConnection, groups: list[str], service: str, payloads: list[bytes],
        ref: Any = None, clusters: list[str] | None = None,
    ) -> str | None:
        """Accept the frame whole (``None``) or refuse it whole (an error code);
        ``clusters``: a cross-cluster send (``amcast.daemon.federation``)."""
        ...

    def count_client_error(self, code: str) -> None: ...

    def count_disconnect(self, reason: str) -> None: ...

    def count_denied(self, request: str) -> None:
        """A ``join`` or ``send`` the access policy refused (``forbidden``)."""
        ...

    def forget_client(self, client_id: int) -> None: ...

    def flow_hold(self, on: bool) -> None:
        """Some client is behind (``on``) or none is any more: hold releases or not."""
        ...

    def group_request(self, conn: ClientConnection, kind: str, groups: list[str], ref: Any,
                      watch: bool) -> None:
        """A ``join``/``leave``; the backend answers (``groups``) when it takes effect."""
        ...


class ClientConnection(asyncio.Protocol):
    def __init__(self, server: ApiServer, client_id: int) -> None:
        self.server = server
        self.id = client_id
        self.name = ""
        self.groups: set[str] = set()
        """The groups it asked for; what it receives is ``ApiServer.members_of``, which
        the backend changes when a join/leave takes effect (``amcast.daemon.groups``)."""
        self.greeted = False
        self._hello_timer: asyncio.TimerHandle | None = None
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._decoder = sp.FrameDecoder(server.config.max_frame_bytes)
        self._paused_by: set[str] = set()
        self.peer: PeerIdentity | None = None
        """Who connected (``SO_PEERCRED``); ``None`` where the socket tells nothing."""
        self.frame_since: float | None = None
        """``time.monotonic()`` since which a started frame is incomplete (``None``: the
        decoder holds no partial frame)."""
        self._behind = False
        """What is queued to the client is above the high-water mark (``pause_writing``):
        its next frames wait (``_handle``)."""
        self._denial_logged_at = -math.inf
        self._denials_unlogged = 0

    # ---- asyncio callbacks -------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        cfg = self.server.config
        transport.set_write_buffer_limits(high=cfg.client_queue_high_bytes)
        self.server.admit(self)
        self.peer = peer_identity(transport.get_extra_info("socket"))
        if self.server.sends_paused:
            self._pause("window")
        # a connection that never says hello would hold a pending slot for ever
        self._hello_timer = asyncio.get_running_loop().call_later(
            cfg.hello_timeout_s, self._hello_overdue)

    def hello_waiting(self) -> bool:
        """Whether a whole frame (its hello, presumably) waits unread in this connection's
        socket while the daemon holds none of it: then the connection is about to be
        served, not idle (``ApiServer.pending_victim``). ``False`` where the transport
        has no socket to look at."""
        sock = self.transport.get_extra_info("socket") if self.transport else None
        if sock is None or self._decoder.buffered:
            return False
        return complete_frame_waiting(sock.fileno())

    def _cancel_hello_timer(self) -> None:
        if self._hello_timer is not None:
            self._hello_timer.cancel()
            self._hello_timer = None

    def _hello_overdue(self) -> None:
        self._hello_timer = None
        if not self.greeted and not self.closed:
            self.fail("hello_timeout",
                      f"no hello within {self.server.config.hello_timeout_s:g} s "
                      "(api.hello_timeout_s)", fatal=True)

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return  # closing: what the client still sends is discarded
        decoder = self._decoder
        decoder.push(data)
        progressed = self._handle()
        # a frame left incomplete started in this read if one completed here, else it is
        # the one already pending (check_frames times it out while the daemon reads)
        if decoder.partial:
            if progressed or self.frame_since is None:
                self.frame_since = time.monotonic()
        else:
            self.frame_since = None

    def _handle(self) -> bool:
        """Handle the complete frames read, in order, while the client reads its answers:
        once what is queued to it passes the high-water mark (``pause_writing``) the rest
        stay undecoded in the decoder until it has read (``resume_writing``); one read of
        small requests (``status``, bad frames) would otherwise queue answers thousands
        of times its size to a client that reads none of them. Whether any was handled."""
        pop = self._decoder.pop
        handled = False
        while not self.closed and not self._behind:
            item = pop()
            if item is None:
                break
            handled = True
            if isinstance(item, sp.FrameError):
                # before hello the stream is not a client's yet: nothing to keep it for
                self.fail(item.code, item.detail, fatal=not self.greeted)
                continue
            try:
                self._dispatch(item)
            except Exception:  # a bug: answer, count, log, and keep the connection
                log.error("exception while handling a client frame", client=self.id,
                          frame_type=item.get("t"), exc_info=True)
                ref = item.get("id")
                self.fail("internal_error", f"the daemon failed to handle this "
                          f"{item.get('t')!r} frame; it was not processed",
                          ref=ref if isinstance(ref, int) else None)
        return handled

    def eof_received(self) -> bool | None:
        if not self.closed:
            # frames still undecoded because the client did not read its answers go with it
            truncated = None if self._behind else self._decoder.truncated()
            if truncated is not None:
                self.fail(truncated.code, truncated.detail, fatal=True)
                return False
            # the client sends nothing more: its slot is free now, and what is still queued
            # to it must not stay pinned by one that never reads (abort after the grace)
            self.closed = True
            self.frame_since = None
            self.server.forget(self)
            self.server.closing.add(self)
            transport = self.transport
            if transport is not None:
                asyncio.get_running_loop().call_later(self.server.config.close_grace_s,
                                                      transport.abort)
        return False  # close our side once our writes are flushed

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_hello_timer()
        self.closed = True
        self.server.forget(self)
        self.server.closed(self)

    def pause_writing(self) -> None:  # unread deliveries above the high-water mark
        self._behind = True
        self._pause("slow_reader")
        self.server.reader_behind(self, True)

    def resume_writing(self) -> None:  # below the low-water mark again
        self._behind = False
        if not self.closed and self._decoder.buffered:
            self._handle()  # the frames that waited; may pause again before the end
        if not self._behind:
            self._resume("slow_reader")
            self.server.reader_behind(self, False)

    # ---- flow control --------------------------------------------------------------
    def _pause(self, why: str) -> None:
        if not self._paused_by and self.transport is not None and not self.closed:
            self.transport.pause_reading()
        self._paused_by.add(why)

    def _resume(self, why: str) -> None:
        self._paused_by.discard(why)
        if not self._paused_by and self.transport is not None and not self.closed:
            self.transport.resume_reading()
            if self.frame_since is not None:  # the pause does not count against the client
                self.frame_since = time.monotonic()

    @property
    def partial_bytes(self) -> int:
        """Bytes of an incomplete frame held (0 while skipping an oversized one)."""
        return self._decoder.buffered

    @property
    def reading(self) -> bool:
        """The daemon reads this client now (no flow-control pause)."""
        return not self._paused_by

    @property
    def queued_bytes(self) -> int:
        return self.transport.get_write_buffer_size() if self.transport else 0

    # ---- output --------------------------------------------------------------------
    def write(self, data: bytes) -> None:
        if self.closed or self.transport is None:
            return
        self.transport.write(data)
        if self.transport.get_write_buffer_size() > self.server.config.client_queue_max_bytes:
            self.server.backend.count_disconnect("slow_reader")
            self.fail(
                "slow_reader",
                f"more than {self.server.config.client_queue_max_bytes} bytes of deliveries "
                "unread",
                fatal=True, counted=True,
            )

    def reply(self, frame: dict[str, Any]) -> None:
        self.write(sp.encode_frame(frame))

    def fail(
        self, code: str, detail: str, *, fatal: bool = False, ref: Any = None,
        counted: bool = False, extra: dict[str, Any] | None = None,
    ) -> None:
        """Send an ``error`` frame; close the connection if ``fatal``."""
        self.server.backend.count_client_error(code)
        if self.closed or self.transport is None:
            return
        frame: dict[str, Any] = {"t": "error", "code": code, "detail": detail, "fatal": fatal}
        if ref is not None:
            frame["id"] = ref
        if extra:
            frame.update(extra)
        self.transport.write(sp.encode_frame(frame))
        if fatal:
            if not counted:
                self.server.backend.count_disconnect(code)
            self.closed = True
            self.server.forget(self)
            self.server.closing.add(self)
            transport = self.transport
            if transport.can_write_eof():
                # queued deliveries, the error frame, then EOF; keep reading (and
                # discarding) until the client closes too: closing with its unread
                # frames in our buffer would reset the connection, and a client that is
                # still writing could then lose what we wrote before
                transport.write_eof()
                if self._paused_by:
                    self._paused_by.clear()
                    transport.resume_reading()
            else:
                transport.close()  # flushes queued deliveries and the error frame first
            # ... but a client that never reads must not pin that memory: abort later
            asyncio.get_running_loop().call_later(
                self.server.config.close_grace_s, transport.abort
            )

    # ---- frames --------------------------------------------------------------------
    def _dispatch(self, frame: dict[str, Any]) -> None:
        kind = frame["t"]
        if not self.greeted:
            self._on_hello(frame)
            return
        handler = _HANDLERS.get(kind)
        if handler is None:
            ref = frame.get("id")
            self.fail("unknown_type", f"unknown frame type {kind!r}",
                      ref=ref if _request_id_problem(kind, ref) is None else None)
            return
        problem = _request_id_problem(kind, frame.get("id"))
        if problem is not None:
            self.bad_field(kind, "id", problem, None)  # no id to echo: it is the bad field
            return
        handler(self, frame, frame.get("id"))

    def bad_field(self, kind: str, field: str, problem: str, ref: int | None, *,
                  fatal: bool = False) -> None:
        """Refuse a frame for one of its fields: the ``error`` names the field twice, in
        ``detail`` for people and in ``field`` for programs (which ignore unknown keys)."""
        self.fail("bad_field", f"{kind}.{field} {problem}", ref=ref, fatal=fatal,
                  extra={"field": field})

    def _on_hello(self, frame: dict[str, Any]) -> None:
        """The first frame: a valid ``hello`` greets the connection, anything else closes
        it (a connection that never says a valid hello must not hold a slot)."""
        if frame["t"] != "hello":
            self.fail("hello_required", "the first frame must be hello", fatal=True)
            return
        field, problem = _hello_problem(frame)
        if field is not None:
            self.bad_field("hello", field, problem, None, fatal=True)
            return
        if frame["v"] != sp.PROTOCOL_VERSION:
            self.fail("unsupported_version",
                      f"this daemon speaks version {sp.PROTOCOL_VERSION}, not {frame['v']!r}",
                      fatal=True)
            return
        if not self.server.greet(self):
            return
        self.name = frame.get("name", "")
        self.greeted = True
        self._cancel_hello_timer()
        self.reply({"t": "welcome", "v": sp.PROTOCOL_VERSION, "client": self.id,
                    **self.server.backend.welcome()})

    def _groups_field(self, frame: dict[str, Any], ref: Any) -> list[str] | None:
        cfg = self.server.config
        kind = frame["t"]
        groups = frame.get("groups")
        if isinstance(groups, str):
            groups = [groups]
        if (
            not isinstance(groups, list)
            or not groups
            or not all(isinstance(g, str) and g for g in groups)
        ):
            self.bad_field(kind, "groups", "must be a non-empty list of non-empty strings "
                           "(or one string)", ref)
            return None
        if len(groups) > cfg.max_groups:
            self.fail("too_many_groups", f"at most {cfg.max_groups} groups", ref=ref)
            return None
        if any(len(g.encode()) > cfg.max_group_name_bytes for g in groups):
            self.bad_field(kind, "groups", f"names are at most {cfg.max_group_name_bytes} "
                           "bytes (api.max_group_name_bytes)", ref)
            return None
        return groups

    def _permitted(self, request: Request, groups: list[str], ref: Any) -> bool:
        """Whether the access policy lets this client ``request`` every group; if not,
        the whole frame is refused with ``forbidden`` (counted, logged) and the connection
        goes on."""
        access = self.server.access
        if access.open:
            return True
        denied = access.denied(self.peer, request, groups)
        if not denied:
            return True
        self.server.backend.count_denied(request)
        self._log_denial(request, denied)
        peer = self.peer
        who = "this client (credentials unknown)" if peer is None else (
            f"uid {peer.uid}" + (f" ({peer.user})" if peer.user else ""))
        action = "joined" if request == "join" else "sent"
        self.fail("forbidden", f"{request} to group(s) {', '.join(denied)} is not allowed "
                  f"for {who} ([access] of amcastd's configuration); nothing was {action}",
                  ref=ref)
        return False

    def _log_denial(self, request: str, denied: list[str]) -> None:
        """One line per denial, at most one a second per connection (the metric counts
        all): a client looping on a denied request must not flood the log."""
        now = time.monotonic()
        if now - self._denial_logged_at < DENIAL_LOG_INTERVAL_S:
            self._denials_unlogged += 1
            return
        peer = self.peer
        log.warning("request denied", client=self.id, name=self.name, request=request,
                    groups=denied, uid=peer.uid if peer else None,
                    gid=peer.gid if peer else None, pid=peer.pid if peer else None,
                    user=peer.user if peer else None, not_logged=self._denials_unlogged)
        self._denial_logged_at = now
        self._denials_unlogged = 0

    def _on_join(self, frame: dict[str, Any], ref: Any) -> None:
        groups = self._groups_field(frame, ref)
        if groups is None or not self._permitted("join", groups, ref):
            return
        watch = frame.get("members", False)
        if type(watch) is not bool:
            self.bad_field("join", "members", "must be a boolean", ref)
            return
        if len(self.groups | set(groups)) > self.server.config.max_groups:
            self.fail("too_many_groups", f"at most {self.server.config.max_groups} groups",
                      ref=ref)
            return
        self.groups |= set(groups)
        self.server.backend.group_request(self, "join", groups, ref, watch)

    def _on_leave(self, frame: dict[str, Any], ref: Any) -> None:
        groups = self._groups_field(frame, ref)
        if groups is None:
            return
        self.groups -= set(groups)
        self.server.backend.group_request(self, "leave", groups, ref, False)

    def _on_send(self, frame: dict[str, Any], ref: Any) -> None:
        cfg = self.server.config
        groups = self._groups_field(frame, ref)
        if groups is None or not self._permitted("send", groups, ref):
            return
        service = frame.get("service", "agreed")
        if service not in sp.SERVICES:
            self.fail("bad_service", f"service must be one of {', '.join(sp.SERVICES)}", ref=ref)
            return
        payloads = frame.get("payloads")
        field = "payloads"
        if payloads is None and "payload" in frame:
            payloads, field = [frame["payload"]], "payload"
        if (
            not isinstance(payloads, list)
            or not payloads
            or not all(type(p) is bytes for p in payloads)
        ):
            self.bad_field("send", field, "must be a non-empty list of bin" if field ==
                           "payloads" else "must be bin", ref)
            return
        if max(map(len, payloads)) > cfg.max_message_bytes:
            self.fail("message_too_large",
                      f"a payload exceeds max_message_bytes {cfg.max_message_bytes}", ref=ref)
            return
        clusters = frame.get("clusters")
        if clusters is not None:
            if (not isinstance(clusters, list) or not clusters
                    or not all(type(c) is str and c for c in clusters)):
                self.bad_field("send", "clusters", "must be a non-empty list of str", ref)
                return
            if len(groups) != 1:
                self.bad_field("send", "groups",
                               "a cross-cluster send (clusters) addresses one group", ref)
                return
        backend = self.server.backend
        refused = (backend.send(self, groups, service, payloads, ref) if clusters is None
                   else backend.send(self, groups, service, payloads, ref, clusters=clusters))
        if refused is not None:
            self.fail(refused, _REFUSED.get(refused, "the frame was refused; nothing was sent"),
                      ref=ref)

    def _on_sync(self, frame: dict[str, Any], ref: Any) -> None:
        reply: dict[str, Any] = {"t": "synced"}
        if ref is not None:
            reply["id"] = ref
        self.reply(reply)

    def _on_status(self, frame: dict[str, Any], ref: Any) -> None:
        reply = {"t": "status", **self.server.backend.status()}
        if ref is not None:
            reply["id"] = ref
        self.reply(reply)

    def info(self) -> dict[str, Any]:
        peer = self.peer.info() if self.peer is not None else dict.fromkeys(PEER_FIELDS)
        return {"client": self.id, "name": self.name, "groups": sorted(self.groups),
                "queued_bytes": self.queued_bytes, "paused": sorted(self._paused_by), **peer}


def _request_id_problem(kind: str, ref: Any) -> str | None:
    """Why ``ref`` is not a valid ``id`` for a ``kind`` frame (``None``: it is, or there
    is none). A signed 64-bit integer (``sp.MIN_REQUEST_ID``..``sp.MAX_REQUEST_ID``), so
    that echoing it never hands a client a number its msgpack library cannot decode into
    a native integer; a ``send``'s id numbers messages and is never negative. ``bool`` is
    not an integer here, though Python says it is."""
    if ref is None:
        return None
    low = 0 if kind == "send" else sp.MIN_REQUEST_ID
    if type(ref) is not int or not low <= ref <= sp.MAX_REQUEST_ID:
        bounds = "0..2^63-1" if low == 0 else "-2^63..2^63-1"
        return f"must be an integer in {bounds}, not {_shown(ref)}"
    return None


def _hello_problem(frame: dict[str, Any]) -> tuple[str | None, str]:
    """The first bad field of a ``hello`` and why (``(None, "")``: none is). A ``v``
    that is an integer but not ours is ``unsupported_version``, not a bad field."""
    problem = _request_id_problem("hello", frame.get("id"))
    if problem is not None:
        return "id", problem
    if type(frame.get("v")) is not int:
        return "v", f"must be an integer, the protocol version, not {_shown(frame.get('v'))}"
    name = frame.get("name", "")
    if type(name) is not str:
        return "name", f"must be a string, not {_shown(name)}"
    if len(name.encode()) > sp.MAX_CLIENT_NAME_BYTES:
        return "name", f"is at most {sp.MAX_CLIENT_NAME_BYTES} bytes (UTF-8)"
    return None, ""


def _shown(value: Any) -> str:
    """A bad value for an error's detail, cut short: the value may be a megabyte."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


_HANDLERS: dict[str, Callable[[ClientConnection, dict[str, Any], Any], None]] = {
    "join": ClientConnection._on_join,
    "leave": ClientConnection._on_leave,
    "send": ClientConnection._on_send,
    "status": ClientConnection._on_status,
    "sync": ClientConnection._on_sync,
}
PEER_FIELDS = ("uid", "user", "gid", "group", "pid")
"""A client's identity in ``status`` (``None`` each where the socket gave none)."""
DENIAL_LOG_INTERVAL_S = 1.0
_REFUSED = {
    "overloaded": "the daemon's submit queue is full (api.submit_queue_bytes); "
                  "none of the frame's messages was sent",
    "shutting_down": "the daemon is stopping; none of the frame's messages was sent",
    "unknown_cluster": "clusters names a cluster this daemon's federation does not have "
                       "([federation] in its configuration); nothing was sent",
}


def complete_frame_waiting(fd: int) -> bool:
    """Whether the socket ``fd``'s receive queue starts with a whole frame (its length
    prefix and that many bytes), read without taking anything from it: ``FIONREAD`` for
    what is queued, a ``MSG_PEEK`` of the prefix for what the frame needs. ``False``
    for a closed socket (``fd`` -1) or one that cannot be looked at."""
    if fd < 0:
        return False
    try:
        queued = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0" * 4))[0]
        if queued < sp.PREFIX.size:
            return False
        peek = socket.socket(fileno=fd)
        try:
            prefix = peek.recv(sp.PREFIX.size, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        finally:
            peek.detach()  # the descriptor stays the transport's
    except OSError:
        return False
    return len(prefix) == sp.PREFIX.size and queued >= sp.PREFIX.size + \
        sp.PREFIX.unpack(prefix)[0]


def listen_backlog(max_clients: int) -> int:
    """Connections the kernel queues before the daemon accepts them: room for a burst
    of ``max_clients`` (a unix socket's connect fails with EAGAIN past it), at least
    asyncio's 100, at most ``SOMAXCONN``."""
    return max(100, min(max_clients, socket.SOMAXCONN))


PENDING_SCAN = 32
"""Pending connections ``ApiServer.pending_victim`` looks at, oldest first, for one
without a whole frame waiting. Bounded: in a burst of connections that all have their
hello waiting, looking at the whole pool for each new one would cost its size squared in
system calls; and a connection with a whole frame waiting leaves the pool as soon as the
daemon reads it, so many of them are only ever the newest ones."""

FD_MARGIN = 64
"""Descriptors the daemon needs besides its clients (sockets, logs, metrics, pidfds)."""


def ensure_fd_limit(connections: int) -> int:
    """Raise the soft ``RLIMIT_NOFILE`` to what ``connections`` clients need (plus
    ``FD_MARGIN``; the daemon passes ``max_clients`` + ``max_pending_hellos``), up to
    the hard limit; log a warning when even that is too low (a connection past it is
    refused by the kernel, not served). Returns the soft limit."""
    need = connections + FD_MARGIN
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < need:
        target = need if hard == resource.RLIM_INFINITY else min(need, hard)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        if soft < need:
            log.warning("file descriptor limit too low for api.max_clients + "
                        "api.max_pending_hellos: raise LimitNOFILE (systemd) or ulimit -n",
                        connections=connections,
                        soft_limit=soft, hard_limit=hard, needed=need)
    return soft


def socket_path_problem(path: str) -> str | None:
    """Why the daemon could not serve on ``path`` (``None``: it can).

    The checks ``start`` relies on, shared with ``amcastd --check``: the path fits a
    unix socket address, its directory exists or can be created and is writable, and no
    live process answers on an existing socket file there.
    """
    if len(os.fsencode(path)) > MAX_SOCKET_PATH_BYTES:
        return (f"api.socket {path} is {len(os.fsencode(path))} bytes long; unix socket "
                f"paths are at most {MAX_SOCKET_PATH_BYTES}: choose a shorter path")
    directory = os.path.dirname(os.path.abspath(path))
    problem = directory_problem(directory, "api.socket's directory")
    if problem is not None:
        return problem
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"api.socket {path}: {exc.strerror}"
    if not stat.S_ISSOCK(st.st_mode):
        return f"api.socket {path} exists and is not a socket: remove it or choose another path"
    if socket_is_live(path):
        return (f"another process (an amcastd?) is serving api.socket {path}: stop it, or "
                "give this daemon another api.socket")
    return None


def directory_problem(directory: str, what: str) -> str | None:
    """Why ``directory`` cannot be used (created if missing, then written), or ``None``."""
    path = os.path.abspath(directory)
    probe = path
    while not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    if not os.path.isdir(probe):
        return f"{what} {path} cannot be created: {probe} is not a directory"
    if not os.access(probe, os.W_OK | os.X_OK):
        verb = "is not writable" if probe == path else f"cannot be created in {probe}"
        return f"{what} {path} {verb} (permission denied for this user)"
    return None


def socket_is_live(path: str) -> bool:
    """Whether a process accepts connections on the unix socket ``path``."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(PROBE_TIMEOUT_S)
    try:
        probe.connect(path)
    except (ConnectionRefusedError, FileNotFoundError):
        return False  # stale: nobody listens
    except TimeoutError:
        return True  # a listener whose backlog is full: alive
    except OSError as exc:
        if exc.errno in (errno.ECONNREFUSED, errno.ENOENT):
            return False
        raise
    finally:
        probe.close()
    return True


class ApiServer:
    """The listening socket, the connected clients and the group index."""

    def __init__(self, config: ApiSection, backend: Backend,
                 access: AccessPolicy | None = None) -> None:
        self.config = config
        self.backend = backend
        self.access = AccessPolicy() if access is None else access
        """Who may join and send where (``amcast.daemon.access``); replaced on reload."""
        self.clients: dict[int, ClientConnection] = {}
        """Every open connection, greeted or not (flow control and timeouts apply to all)."""
        self.pending: dict[int, ClientConnection] = {}
        """The connections of ``clients`` that have not said hello yet, oldest first: a
        pool of their own (``admit``), so that they never take a greeted client's slot."""
        self.members_of: dict[str, set[int]] = {}
        self.sends_paused = False
        self._next_id = 1
        self._server: asyncio.AbstractServer | None = None
        self._inode: tuple[int, int] | None = None  # (st_dev, st_ino) of the file we made
        self.path = config.socket
        self.closing: set[ClientConnection] = set()  # told to go, not disconnected yet
        self._all_closed: asyncio.Event | None = None
        self.behind: dict[int, tuple[float, int]] = {}
        """Clients above the high-water mark: (time of their last progress, the least
        they had queued since)."""

    def check(self) -> None:
        """Raise ``ConfigurationError`` if ``start`` cannot serve on the path (no side
        effects: the daemon calls it before it opens its logs and sockets)."""
        problem = socket_path_problem(self.path)
        if problem is not None:
            raise ConfigurationError(problem)

    async def start(self) -> None:
        path = self.path
        self.check()
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # a stale socket file from a previous run (nobody answers)
        loop = asyncio.get_running_loop()
        old_umask = os.umask(0o177)  # never world-accessible, not even for a moment
        try:
            self._server = await loop.create_unix_server(
                self._new_connection, path, backlog=listen_backlog(self.config.max_clients))
        finally:
            os.umask(old_umask)
        st = os.stat(path)
        self._inode = (st.st_dev, st.st_ino)
        if self.config.socket_group:
            try:
                gid = grp.getgrnam(self.config.socket_group).gr_gid
            except KeyError:
                self.close_listener()
                raise ConfigurationError(
                    f"api.socket_group: there is no group named {self.config.socket_group!r}"
                ) from None
            os.chown(path, -1, gid)
        os.chmod(path, self.config.socket_mode)

    def _new_connection(self) -> ClientConnection:
        conn = ClientConnection(self, self._next_id)
        self._next_id += 1
        return conn

    def connect_in_process(self, client_side: asyncio.Protocol) -> asyncio.Transport:
        """Serve a client of this process (the embedded member) over an in-memory stream
        instead of the socket: the same connection, slots, access policy and flow
        control as a socket client (``amcast.daemon.inprocess``). Returns the client's
        transport."""
        conn = self._new_connection()
        _, client = pipe(asyncio.get_running_loop(), conn, client_side)
        conn.peer = resolve(os.getuid(), os.getgid(), os.getpid())  # this very process
        return client

    # ---- connection slots ----------------------------------------------------------
    def admit(self, conn: ClientConnection) -> None:
        """Take a new connection into the pending pool (it has not said hello).

        Connections that have not said hello are bounded on their own, by
        ``api.max_pending_hellos``, and never count against ``max_clients``: however many
        connect and stay silent, a client that says hello finds its slot. When the pool
        is full the new connection is taken and an older one goes, with the fatal error
        ``too_many_pending_hellos`` (``pending_victim`` says which). Refusing the new one
        instead would let a flood of silent connections, reopened as they close, lock
        every newcomer out, honest ones included (the newest connection is the one most
        likely to be a client that is about to say hello)."""
        limit = self.config.max_pending_hellos
        while len(self.pending) >= limit:
            victim = self.pending_victim()
            self.pending.pop(victim.id, None)  # even if failing it cannot forget it
            victim.fail("too_many_pending_hellos",
                        f"{limit} connections were waiting for their hello "
                        "(api.max_pending_hellos); this one, among the oldest that had "
                        "not sent one, was closed for a newer one", fatal=True)
        self.clients[conn.id] = conn
        self.pending[conn.id] = conn

    def pending_victim(self) -> ClientConnection:
        """The pending connection to close for a new one: the oldest that has no
        complete frame waiting to be read, else the oldest. One whose hello already
        waits in its socket (a burst of clients connecting at once: the daemon accepts
        them all before it reads any) is served in the next turn of the event loop; a
        silent one, or one that sent part of a frame and stopped, is what an abuser
        holds. Under a flood of silent connections the first one looked at is the one;
        at most ``PENDING_SCAN`` are looked at (each look is a few system calls)."""
        for conn in itertools.islice(self.pending.values(), PENDING_SCAN):
            if not conn.hello_waiting():
                return conn
        return next(iter(self.pending.values()))

    def greet(self, conn: ClientConnection) -> bool:
        """Move a connection that said a valid hello from the pending pool to the
        ``max_clients`` greeted ones; if those are all taken, refuse it with the fatal
        ``too_many_clients`` (``False``)."""
        cfg = self.config
        if len(self.clients) - len(self.pending) >= cfg.max_clients:
            conn.fail("too_many_clients", f"max_clients = {cfg.max_clients} clients have "
                      "said hello (api.max_clients)", fatal=True)
            return False
        self.pending.pop(conn.id, None)
        return True

    def forget(self, conn: ClientConnection) -> None:
        self.pending.pop(conn.id, None)
        if self.behind.pop(conn.id, None) is not None and not self.behind:
            self.backend.flow_hold(False)
        if self.clients.pop(conn.id, None) is None:
            return
        self.backend.forget_client(conn.id)  # its routing goes, its groups are told

    # ---- end-to-end flow control -----------------------------------------------------
    def reader_behind(self, conn: ClientConnection, behind: bool) -> None:
        """A client went above the high-water mark (or back below the low one)."""
        if conn.closed:
            return
        was = bool(self.behind)
        if behind:
            self.behind[conn.id] = (time.monotonic(), conn.queued_bytes)
        else:
            self.behind.pop(conn.id, None)
        if bool(self.behind) != was:
            self.backend.flow_hold(bool(self.behind))

    def check_readers(self, now: float) -> None:
        """Periodic: disconnect a client behind that made no progress for
        ``slow_reader_timeout_s`` (its queue did not shrink); the group goes on."""
        timeout = self.config.slow_reader_timeout_s
        was = bool(self.behind)
        for client_id, (since, least) in list(self.behind.items()):
            conn = self.clients.get(client_id)
            if conn is None or conn.closed:
                self.behind.pop(client_id, None)
                continue
            queued = conn.queued_bytes
            if queued < least:
                self.behind[client_id] = (now, queued)
            elif now - since > timeout:
                self.backend.count_disconnect("slow_reader")
                conn.fail("slow_reader",
                          f"read none of its {queued} bytes of queued deliveries for "
                          f"{timeout:g} s (api.slow_reader_timeout_s)",
                          fatal=True, counted=True)
                self.behind.pop(client_id, None)
        if was and not self.behind:
            self.backend.flow_hold(False)

    def check_frames(self, now: float) -> None:
        """Periodic: disconnect a client whose started frame is still incomplete
        ``frame_timeout_s`` after its first byte (or the last complete frame) while the
        daemon was reading it (``frame_timeout``, counted as a disconnect reason): a
        length prefix then silence must not hold a slot and a frame buffer for ever."""
        timeout = self.config.frame_timeout_s
        for conn in list(self.clients.values()):
            since = conn.frame_since
            if since is not None and not conn.closed and conn.reading \
                    and now - since > timeout:
                conn.fail("frame_timeout",
                          f"a frame was started and not completed within {timeout:g} s "
                          f"({conn.partial_bytes} bytes of it read; api.frame_timeout_s)",
                          fatal=True)

    def pause_sends(self) -> None:
        if not self.sends_paused:
            self.sends_paused = True
            for conn in list(self.clients.values()):
                conn._pause("window")

    def resume_sends(self) -> None:
        if self.sends_paused:
            self.sends_paused = False
            for conn in list(self.clients.values()):
                conn._resume("window")

    def deliver(self, header: dict[str, Any], envelopes: list[list[Any]]) -> int:
        """Hand one delivered vertex to the clients whose groups it addresses.

        ``envelopes`` holds ``[client, groups, index, payloads]`` entries; returns the
        number of deliver frames written.
        """
        members_of = self.members_of
        if not members_of:
            return 0
        per_client: dict[int, list[int]] = {}
        for k, env in enumerate(envelopes):
            groups = env[1]
            if len(groups) == 1:
                recipients = members_of.get(groups[0], ())
            else:
                recipients = set()
                for g in groups:
                    recipients |= members_of.get(g, set())
            for cid in recipients:
                lst = per_client.get(cid)
                if lst is None:
                    per_client[cid] = [k]
                else:
                    lst.append(k)
        encoded: dict[tuple[int, ...], bytes] = {}
        clients = self.clients
        for cid, idx in per_client.items():
            conn = clients.get(cid)
            if conn is None:
                continue
            key = tuple(idx)
            data = encoded.get(key)
            if data is None:
                body = _packb({**header, "batches": [envelopes[k] for k in idx]},
                              use_bin_type=True)
                data = sp.encode_frame_body(body)
                encoded[key] = data
            conn.write(data)
        return len(per_client)

    def broadcast(self, frame: dict[str, Any]) -> None:
        data = sp.encode_frame(frame)
        for conn in list(self.clients.values()):
            if conn.greeted:
                conn.write(data)

    def close_listener(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        if self._inode is not None:  # remove the socket file only if it is still ours
            with contextlib.suppress(FileNotFoundError):
                st = os.stat(self.path)
                if (st.st_dev, st.st_ino) == self._inode:
                    os.unlink(self.path)
            self._inode = None

    def close_clients(self, code: str = "shutting_down", detail: str = "") -> None:
        for conn in list(self.clients.values()):
            conn.fail(code, detail or "the daemon is stopping", fatal=True)

    def closed(self, conn: ClientConnection) -> None:
        self.closing.discard(conn)
        if not self.closing and self._all_closed is not None:
            self._all_closed.set()

    async def wait_closed(self, timeout: float) -> None:
        """Until every connection told to go has gone (its frames flushed), at most
        ``timeout`` seconds (a client that does not read is aborted after
        ``close_grace_s`` anyway)."""
        if not self.closing:
            return
        self._all_closed = asyncio.Event()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._all_closed.wait(), timeout)
