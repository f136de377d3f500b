"""The blocking client: ``BlockingClient``, the same protocol without an event loop.

Theory of operation: the same ``Session`` as the asyncio client over a non-blocking
socket driven by ``select``. Every call that talks to the daemon runs ``_io``: it writes
its bytes completely *while* reading whatever arrives (so a client that joined groups
never deadlocks against a daemon waiting for it to read), until the call's condition holds
or its deadline passes. Deliveries and views read meanwhile wait in an inbox, bounded by
``max_queued_bytes`` (past it the client stops reading; a call that needs a reply then
raises ``ClientError("inbox_full")``: read your events).

``send()`` batches like the asyncio client (a frame is written when ``max_batch_bytes``
are pending, or by ``flush``) and returns the message number. When
``max_unconfirmed_bytes`` are unconfirmed, ``send()`` *blocks* until amcastd confirms
earlier messages, up to ``timeout`` (``ClientTimeout``). A write that cannot complete
within ``timeout`` closes the connection (``ConnectionClosed`` with code ``timeout``):
frames written completely are then of unknown outcome, the others are reported as not
sent. ``sync()`` waits until every message sent so far is handled; refusals are raised
(``MessagesRefused``) by the next ``send``/``flush``/``sync``/``close``. ``fileno()``,
``poll()`` and ``poll_event()`` let a program wait on the socket with its own ``select``.
"""

from __future__ import annotations

import contextlib
import math
import select
import socket
import time
from collections import deque
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from typing import Any

from .. import socket_protocol as sp
from ..protocols.errors import ClientError
from ..socket_protocol import FrameDecoder, FrameError
from .aio import (
    DEFAULT_MAX_BATCH_BYTES,
    DEFAULT_MAX_UNCONFIRMED_BYTES,
    DEFAULT_SOCKET,
    DEFAULT_TIMEOUT,
    connect_error,
    expected_text,
)
from .errors import ClientTimeout, ConnectionClosed
from .records import DeliveredBatch, Delivery, Event, MembersChange, ViewChange
from .session import (
    Reply,
    Session,
    SessionState,
    _Frame,
    expected_members,
    members_satisfy,
    view_satisfies,
)

DEFAULT_MAX_QUEUED_BYTES = 32 * 1024 * 1024


class BlockingClient(SessionState):
    """amcastd client over a blocking-style API (no event loop), batching sends; create
    with ``BlockingClient.connect(path)`` (or ``BlockingClient(path)``: the same)."""

    def __init__(self, path: str = DEFAULT_SOCKET, *, name: str = "",
                 max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
                 max_unconfirmed_bytes: int = DEFAULT_MAX_UNCONFIRMED_BYTES,
                 max_queued_bytes: int = DEFAULT_MAX_QUEUED_BYTES,
                 timeout: float | None = DEFAULT_TIMEOUT, self_discard: bool = False) -> None:
        """Connect and greet, like ``connect``."""
        self.path = path
        self.max_batch_bytes = max_batch_bytes
        self.max_queued_bytes = max_queued_bytes
        self.timeout = timeout
        self._session = Session(max_unconfirmed_bytes=max_unconfirmed_bytes,
                                self_discard=self_discard)
        self._decoder = FrameDecoder(1 << 30)
        self._inbox: deque[Event] = deque()
        self._inbox_bytes = 0
        self._replies: dict[int, Reply] = {}
        self._waiting: set[int] = set()
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.settimeout(None if timeout is None or math.isinf(timeout) else timeout)
            self._sock.connect(path)
        except OSError as exc:
            self._sock.close()
            raise connect_error(path, exc) from None
        self._sock.setblocking(False)
        s = self._session
        try:
            self._io(sp.encode_frame({"t": "hello", "v": sp.PROTOCOL_VERSION, "name": name}),
                     [], lambda: s.welcome is not None, self._deadline(None),
                     lambda: f"amcastd at {path} did not answer hello in time (is it stalled?)")
        except ClientError:
            self._close_socket()
            raise

    @classmethod
    def connect(cls, path: str = DEFAULT_SOCKET, *, name: str = "",
                max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
                max_unconfirmed_bytes: int = DEFAULT_MAX_UNCONFIRMED_BYTES,
                max_queued_bytes: int = DEFAULT_MAX_QUEUED_BYTES,
                timeout: float | None = DEFAULT_TIMEOUT,
                self_discard: bool = False) -> BlockingClient:
        """Connect and greet (``Client.connect`` without ``await``); raises
        ``Unreachable``, ``ClientTimeout`` or ``ConnectionClosed``. ``max_queued_bytes``
        bounds the events read and not yet taken (the asyncio client counts events);
        ``self_discard``: never deliver this connection's own messages back to it."""
        return cls(path, name=name, max_batch_bytes=max_batch_bytes,
                   max_unconfirmed_bytes=max_unconfirmed_bytes,
                   max_queued_bytes=max_queued_bytes, timeout=timeout,
                   self_discard=self_discard)

    # ---- state -----------------------------------------------------------------------
    def fileno(self) -> int:
        """The socket's descriptor, for ``select``; ``ConnectionClosed`` once it is closed."""
        fd = self._sock.fileno()
        if fd < 0 and self._session.closed is not None:
            raise self._session.closed_error()
        return fd

    # ---- the I/O loop ------------------------------------------------------------------
    def _deadline(self, timeout: float | None) -> float | None:
        t = self.timeout if timeout is None else timeout
        return None if t is None or math.isinf(t) else time.monotonic() + t

    def _io(self, data: bytes, frames: list[_Frame], done: Callable[[], bool] | None,
            deadline: float | None, on_timeout: Callable[[], str]) -> None:
        """Write ``data`` (holding ``frames``, in order, then maybe a sync) completely,
        reading meanwhile, then read until ``done()``; raise at the deadline."""
        s = self._session
        view = memoryview(data)
        total = len(data)
        sock = self._sock
        while True:
            if view:
                try:
                    view = view[sock.send(view):]
                except BlockingIOError:
                    pass
                except OSError as exc:
                    self._lost(f"connection to amcastd lost: {exc.strerror or exc}")
            if s.closed is not None:
                self._unwritten(frames, total - len(view))
                raise s.closed_error()
            if not view and (done is None or done()):
                return
            reading = self._inbox_bytes < self.max_queued_bytes
            if not reading and not view:
                raise ClientError("inbox_full", f"{len(self._inbox)} deliveries unread "
                                  f"({self._inbox_bytes} bytes): read them with next_event()")
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            r, w, _ = select.select([sock] if reading else [], [sock] if view else [], [],
                                    left)
            if r:
                self._read()
            elif not w:
                if view:  # the daemon did not read our bytes: the stream cannot be resumed
                    self._unwritten(frames, total - len(view))
                    self._lost(f"amcastd did not read for {self.timeout} s: {on_timeout()}",
                               code="timeout")
                    raise s.closed_error()
                raise ClientTimeout(on_timeout(), s.unconfirmed_count())

    def _unwritten(self, frames: list[_Frame], written: int) -> None:
        """Frames not completely written never reach the daemon: back to pending."""
        if not frames:
            return
        end = 0
        for i, f in enumerate(frames):
            end += f.encoded_size
            if end > written:
                self._session.unwrite(frames[i:])
                return

    def _read(self) -> None:
        s = self._session
        try:
            data = self._sock.recv(1 << 16)
        except BlockingIOError:
            return
        except OSError as exc:
            self._lost(f"connection to amcastd lost: {exc.strerror or exc}")
            return
        if not data:
            self._lost("amcastd closed the connection")
            return
        queued = False
        for item in self._decoder.feed(data):
            if isinstance(item, FrameError):
                self._lost(f"amcastd sent a bad frame: {item.detail}", code=item.code)
                return
            try:
                out = s.on_frame(item)
            except (KeyError, TypeError, ValueError) as exc:
                self._lost(f"malformed {item.get('t')!r} frame from amcastd: {exc!r}",
                           code="bad_frame")
                return
            if out is None:
                if s.closed is not None:
                    self._close_socket()
                    return
            elif type(out) is Reply:
                if out.id in self._waiting:
                    self._replies[out.id] = out
            else:
                self._inbox.append(out)  # type: ignore[arg-type]
                queued = True
        if queued:
            self._inbox_bytes += len(data)

    def _lost(self, detail: str, code: str = "closed") -> None:
        self._session.fail(code, detail)
        self._close_socket()

    def _close_socket(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.close()

    # ---- sending -----------------------------------------------------------------------
    def send(self, payload: bytes, groups: str | Sequence[str], service: str = "agreed",
             clusters: str | Sequence[str] | None = None) -> int:
        """Queue one message and return its number; blocks (up to ``timeout``) while
        ``max_unconfirmed_bytes`` are unconfirmed. Raises like ``Client.send``;
        ``clusters`` as there."""
        s = self._session
        if s.alarm:
            s.check()
        used = s.pending_bytes + s.inflight_bytes
        if used and used + len(payload) > s.max_unconfirmed_bytes:
            size = len(payload)
            self._flush()
            self._io(s.sync_frame(force=True), [], lambda: s.has_room(size),
                     self._deadline(None), lambda: self._stalled("send"))
            if s.alarm:
                s.check()
        seq = s.add(payload, groups, service, clusters)
        if s.pending_bytes >= self.max_batch_bytes:
            self._flush()
        return seq

    def _stalled(self, what: str) -> str:
        return (f"{what}: amcastd has not confirmed {self._session.unconfirmed_count()} "
                "message(s) in time: the cluster may be stalled (check amcast status --health)")

    def _flush(self) -> None:
        s = self._session
        if s.closed is not None:
            return
        frames = s.take()
        if not frames:
            return
        self._io(b"".join(d for d, _ in frames) + s.sync_frame(), [f for _, f in frames],
                 None, self._deadline(None), lambda: self._stalled("write"))

    def flush(self) -> None:
        """Write the pending messages now; raises refusals and ``ConnectionClosed``."""
        self._flush()
        if self._session.alarm:
            self._session.check()

    def sync(self, timeout: float | None = None) -> int:
        """Flush and wait until amcastd has handled every message sent so far; raises
        ``MessagesRefused`` if any was refused. Returns the number of messages sent."""
        s = self._session
        self._flush()
        target = s.next_seq
        if s.synced_seq < target:
            self._io(s.sync_frame(force=True), [], lambda: s.synced_seq >= target,
                     self._deadline(timeout), lambda: self._stalled("sync"))
        if s.alarm:
            s.check()
        return target

    def send_wait(self, payload: bytes, groups: str | Sequence[str],
                  service: str = "agreed", *, timeout: float | None = None,
                  clusters: str | Sequence[str] | None = None) -> int:
        """``send``, waiting up to ``timeout`` (the client's unless given) for room: the
        blocking ``send`` already waits; this names the wait as ``Client.send_wait`` does."""
        if timeout is None:
            return self.send(payload, groups, service, clusters)
        saved, self.timeout = self.timeout, timeout
        try:
            return self.send(payload, groups, service, clusters)
        finally:
            self.timeout = saved

    def drain(self, timeout: float | None = None) -> None:
        """Flush, then wait (up to ``timeout``) while more than 3/4 of
        ``max_unconfirmed_bytes`` is unconfirmed, as ``Client.drain``."""
        s = self._session
        self._flush()
        low = s.max_unconfirmed_bytes * 3 // 4
        if s.inflight_bytes > low:
            self._io(s.sync_frame(force=True), [], lambda: s.inflight_bytes <= low,
                     self._deadline(timeout), lambda: self._stalled("drain"))
        if s.alarm:
            s.check()

    def request_sync(self) -> None:
        """Flush and ask for a confirmation without waiting for it (see ``poll``)."""
        self._flush()
        self._io(self._session.sync_frame(force=True), [], None, self._deadline(None),
                 lambda: self._stalled("write"))

    # ---- requests --------------------------------------------------------------------
    def _request(self, frame: dict[str, Any], timeout: float | None) -> dict[str, Any]:
        self._flush()
        s = self._session
        if s.closed is not None:
            raise s.closed_error()
        rid = s.request_id()
        self._waiting.add(rid)
        try:
            self._io(sp.encode_frame({**frame, "id": rid}), [], lambda: rid in self._replies,
                     self._deadline(timeout),
                     lambda: f"no reply to {frame['t']} from amcastd in time: it may be "
                             "stalled (check amcast status --health)")
        finally:
            self._waiting.discard(rid)
        reply = self._replies.pop(rid)
        if reply.error is not None:
            raise reply.error
        assert reply.frame is not None
        return reply.frame

    def join(self, *groups: str, timeout: float | None = None,
             members: bool = False) -> list[str]:
        """Join ``groups`` (returns once ordered); ``members``: also get ``MembersChange``
        events for them from ``next_event`` (the full list first)."""
        frame = {"t": "join", "groups": list(groups), **({"members": True} if members else {})}
        if members:
            self._session.watching.update(groups)
        return list(self._request(frame, timeout)["groups"])

    def leave(self, *groups: str, timeout: float | None = None) -> list[str]:
        """Leave ``groups`` (returns once ordered); returns the groups still joined."""
        self._session.watching.difference_update(groups)
        return list(self._request({"t": "leave", "groups": list(groups)}, timeout)["groups"])

    def status(self, timeout: float | None = None) -> dict[str, Any]:
        """The daemon's ``status`` reply (docs/api.md)."""
        return self._request({"t": "status"}, timeout)

    # ---- start-up barriers -------------------------------------------------------------
    def wait_for_members(self, group: str, expected: int | Iterable[str], *,
                         timeout: float | None = None) -> MembersChange:
        """The start-up barrier, as ``Client.wait_for_members``: wait until ``group``
        (joined with ``members=True``) has ``expected`` members (a count, or ``hello``
        names); returns the last ``members`` notice. Events read meanwhile stay queued
        for ``next_event``."""
        want = expected_members(expected)
        s = self._session
        if group not in s.watching:
            raise ClientError("not_watching",
                              f"join({group!r}, members=True) before waiting for its members")
        what = f"waiting for {group!r} to have {expected_text(want)}: not reached in time"
        self._flush()
        self._io(b"", [], lambda: members_satisfy(s.members.get(group), want),
                 self._deadline(timeout), lambda: what)
        return s.members[group]

    def wait_for_view(self, nodes: int | Collection[int], *,
                      timeout: float | None = None) -> ViewChange:
        """Wait until this client's daemon is in a primary view of ``nodes`` (a count, or
        node ids), as ``Client.wait_for_view``; returns that view."""
        s = self._session
        what = f"waiting for a primary view of {expected_text(nodes, 'node')}: not reached"
        self._flush()
        self._io(b"", [], lambda: view_satisfies(s.view, nodes), self._deadline(timeout),
                 lambda: what)
        assert s.view is not None
        return s.view

    # ---- deliveries --------------------------------------------------------------------
    def _pop(self) -> Event:
        item = self._inbox.popleft()
        if not self._inbox:
            self._inbox_bytes = 0
        return item

    def poll(self) -> None:
        """Read what the daemon has sent, without blocking."""
        s = self._session
        while s.closed is None:
            r, _, _ = select.select([self._sock], [], [], 0)
            if not r or self._inbox_bytes >= self.max_queued_bytes:
                return
            self._read()

    def poll_event(self) -> Event | None:
        """The next event if one has arrived, else None (never blocks)."""
        if not self._inbox:
            self.poll()
        if self._inbox:
            return self._pop()
        if self._session.closed is not None:
            raise self._session.closed_error()
        return None

    def next_event(self, timeout: float | None = 10.0) -> Event:
        """Flush, then the next event (delivery batch, view change, order gap, undelivered
        report, in the daemon's frame order); ``ClientTimeout`` after
        ``timeout`` seconds without one (None waits for ever)."""
        self._flush()
        if not self._inbox:
            deadline = None if timeout is None else time.monotonic() + timeout
            try:
                self._io(b"", [], lambda: bool(self._inbox), deadline,
                         lambda: f"no delivery within {timeout} s")
            except ConnectionClosed:
                if not self._inbox:  # events read with the end come before it
                    raise
        return self._pop()

    def events(self) -> Iterator[Event]:
        """Every event until the connection ends (waits for ever for each)."""
        while True:
            try:
                yield self.next_event(None)
            except ConnectionClosed:
                return

    def batches(self, timeout: float | None = 10.0) -> Iterator[DeliveredBatch]:
        """The delivered batches (other events skipped); ``timeout`` as ``next_event``."""
        while True:
            item = self.next_event(timeout)
            if isinstance(item, DeliveredBatch):
                yield item

    def deliveries(self, timeout: float | None = 10.0) -> Iterator[Delivery]:
        """Every delivered message (other events skipped); ``timeout`` as ``next_event``."""
        for batch in self.batches(timeout):
            yield from batch

    # ---- the end -----------------------------------------------------------------------
    def close(self, timeout: float | None = None) -> None:
        """Flush, wait until every message is confirmed, close (see ``Client.close``)."""
        s = self._session
        try:
            if s.closed is None:
                self.sync(timeout)
            else:
                err = s.closed_error()
                if err.unsent or err.unknown or err.refused:
                    raise err
        finally:
            self.abort()

    def abort(self) -> None:
        """Close now without waiting for confirmations (see ``Client.abort``)."""
        self._session.fail("closed", "the client closed the connection")
        self._close_socket()

    def __enter__(self) -> BlockingClient:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()
