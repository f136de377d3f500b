"""The asyncio client: ``Client`` (create it with ``await Client.connect(path)``).

Theory of operation: a ``Session`` (``amcast.client.session``) holds the protocol state;
this module does the I/O on an asyncio transport. ``send()`` is synchronous and
*batches transparently*: it numbers the message, appends it to the pending frame, and the
pending frames are written at the end of the current event-loop iteration
(``call_soon``) or as soon as they reach ``max_batch_bytes``. What was written is
confirmed (or refused) by a ``sync`` request, sent lazily: with the write once an eighth
of ``max_unconfirmed_bytes`` is in flight, else ``sync_interval`` later (20 ms), and at
once by every wait (``drain``, ``sync``, ``send_wait`` without room, ``close``). A sender of one
message per flush thus costs the daemon no ``synced`` reply per message, nor itself a
wake-up to read it. A refusal comes as soon as the daemon reads the frame, sync or not.

Memory and backpressure: the bytes of messages not yet confirmed (pending, buffered in the
transport, or in the daemon's socket) are bounded by ``max_unconfirmed_bytes``; past it
``send()`` raises ``WouldBlock`` without queuing, and ``await drain()`` (or ``send_wait``)
waits for room. When the daemon stops reading (a full cluster window), confirmations stop,
so a sender is held back at that bound instead of filling memory. Every wait (``drain``,
``sync``, ``send_wait``, requests, ``close``) has a timeout (the client's ``timeout``
unless given; ``math.inf`` waits for ever) and raises ``ClientTimeout``.

Incoming frames: ``deliver``, ``view``, ``gap`` and ``undelivered`` errors become
``DeliveredBatch``/``ViewChange``/``OrderGap``/``Undelivered`` events, in the daemon's
frame order, in a bounded queue, read with ``await next_event()`` or the ``events()``/``batches()``/
``deliveries()`` iterators; when the application does not read, the client stops reading
the socket (the daemon's slow-reader policy then applies). Replies resolve their
request by id. Refusals are raised (``MessagesRefused``, once) by the next ``send``,
``flush``, ``drain``, ``sync`` or ``close``. When the connection ends (a fatal error
frame, a closed socket) every later call raises ``ConnectionClosed`` naming the messages
never written and those of unknown outcome; nothing is dropped silently, and no callback
ever raises into the event loop.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Sequence
from typing import Any, cast

from .. import socket_protocol as sp
from ..protocols.errors import ClientError
from ..socket_protocol import FrameDecoder, FrameError
from .errors import ClientTimeout, ConnectionClosed, Unreachable, WouldBlock
from .records import DeliveredBatch, Delivery, Event, MembersChange, ViewChange
from .session import (
    PAYLOAD_OVERHEAD,
    Reply,
    Session,
    SessionState,
    expected_members,
    members_satisfy,
    view_satisfies,
)

DEFAULT_SOCKET = "/run/amcast/amcastd.sock"
DEFAULT_MAX_BATCH_BYTES = 16 * 1024
DEFAULT_MAX_UNCONFIRMED_BYTES = 8 * 1024 * 1024
DEFAULT_TIMEOUT = 30.0


def connect_error(path: str, exc: BaseException) -> Unreachable:
    if isinstance(exc, FileNotFoundError | ConnectionRefusedError):
        return Unreachable("not_running", f"no amcastd listening on {path}")
    if isinstance(exc, PermissionError):
        return Unreachable("unreachable", f"permission denied on {path} (api.socket_group?)")
    if isinstance(exc, TimeoutError):
        return Unreachable("unreachable", f"{path} did not accept the connection in time")
    reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return Unreachable("unreachable", f"cannot connect to {path}: {reason}")


class _Protocol(asyncio.Protocol):
    def __init__(self, client: Client) -> None:
        self.client = client
        self.decoder = FrameDecoder(1 << 30)
        self.transport: asyncio.Transport | None = None
        self.paused = False
        self.can_write = asyncio.Event()
        self.can_write.set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        on_item = self.client._on_item
        for item in self.decoder.feed(data):
            on_item(item)

    def connection_lost(self, exc: Exception | None) -> None:
        self.can_write.set()
        self.client._on_lost(exc)

    def pause_writing(self) -> None:
        self.can_write.clear()

    def resume_writing(self) -> None:
        self.can_write.set()


LAZY_SYNC_S = 0.02
"""How long written messages may stay without a ``sync`` asking the daemon to confirm
them (below ``Session.lazy_sync_bytes`` in flight)."""


def expected_text(want: int | Iterable[Any], what: str = "member") -> str:
    """``3 members`` or ``members a, b``: a wait's target for people."""
    if isinstance(want, int):
        return f"{want} {what}{'s' if want != 1 else ''}"
    return f"{what}s {', '.join(sorted(map(str, want)))}"


class Client(SessionState):
    """asyncio client of amcastd; create with ``await Client.connect(path)``."""

    def __init__(self, max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
                 max_queued_events: int = 4096, *,
                 max_unconfirmed_bytes: int = DEFAULT_MAX_UNCONFIRMED_BYTES,
                 timeout: float | None = DEFAULT_TIMEOUT,
                 sync_interval: float = LAZY_SYNC_S, self_discard: bool = False) -> None:
        """A client not yet connected: use ``await Client.connect(...)``, which takes the
        same arguments (and the socket path and name)."""
        self.max_batch_bytes = max_batch_bytes
        self.timeout = timeout
        self.sync_interval = sync_interval
        self._session = Session(max_unconfirmed_bytes=max_unconfirmed_bytes,
                                self_discard=self_discard)
        self._proto = _Protocol(self)
        self._loop = asyncio.get_running_loop()
        self._events: deque[Event] = deque()
        self._max_events = max_queued_events
        self._event_ready = asyncio.Event()
        self._progress = asyncio.Event()  # set when a reply, refusal or the end arrives
        self._requests: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._welcome: asyncio.Future[None] = self._loop.create_future()
        self._flush_scheduled = False
        self._sync_timer: asyncio.TimerHandle | None = None

    @classmethod
    async def connect(cls, path: str = DEFAULT_SOCKET, *, name: str = "",
                      max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
                      max_unconfirmed_bytes: int = DEFAULT_MAX_UNCONFIRMED_BYTES,
                      max_queued_events: int = 4096,
                      timeout: float | None = DEFAULT_TIMEOUT,
                      sync_interval: float = LAZY_SYNC_S,
                      self_discard: bool = False) -> Client:
        """Connect and greet; raises ``Unreachable``, ``ClientTimeout`` or
        ``ConnectionClosed`` (e.g. ``too_many_clients``). ``name``: shown in status and
        in ``members`` notices; ``sync_interval``: how long written messages may wait for
        a ``sync`` below an eighth of ``max_unconfirmed_bytes`` in flight
        (``LAZY_SYNC_S``); ``self_discard``: never deliver this connection's own messages
        back to it (they are dropped by the client library; positions are unchanged)."""
        self = cls(max_batch_bytes, max_queued_events,
                   max_unconfirmed_bytes=max_unconfirmed_bytes, timeout=timeout,
                   sync_interval=sync_interval, self_discard=self_discard)
        limit = None if timeout is None or math.isinf(timeout) else timeout
        try:
            await asyncio.wait_for(
                self._loop.create_unix_connection(lambda: self._proto, path), limit
            )
        except (OSError, TimeoutError) as exc:
            raise connect_error(path, exc) from None
        await self._greet(name, f"amcastd at {path}", limit)
        return self

    @classmethod
    async def attach(cls, connect: Callable[[asyncio.Protocol], object], *, name: str = "",
                     max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
                     max_unconfirmed_bytes: int = DEFAULT_MAX_UNCONFIRMED_BYTES,
                     max_queued_events: int = 4096,
                     timeout: float | None = DEFAULT_TIMEOUT,
                     sync_interval: float = LAZY_SYNC_S,
                     self_discard: bool = False) -> Client:
        """Greet a daemon over a stream that ``connect(protocol)`` opens for this client
        (it calls ``protocol.connection_made``): the embedded member's in-process
        connection (``amcast.member``). Otherwise as ``connect``."""
        self = cls(max_batch_bytes, max_queued_events,
                   max_unconfirmed_bytes=max_unconfirmed_bytes, timeout=timeout,
                   sync_interval=sync_interval, self_discard=self_discard)
        connect(self._proto)
        limit = None if timeout is None or math.isinf(timeout) else timeout
        await self._greet(name, "the embedded member", limit)
        return self

    async def _greet(self, name: str, what: str, limit: float | None) -> None:
        self._write(sp.encode_frame({"t": "hello", "v": sp.PROTOCOL_VERSION, "name": name}))
        try:
            await asyncio.wait_for(asyncio.shield(self._welcome), limit)
        except TimeoutError:
            self.abort()
            raise ClientTimeout(f"{what} did not answer hello within {limit} s "
                                "(is it stalled?)") from None

    # ---- frames in -------------------------------------------------------------------
    def _on_item(self, item: dict[str, Any] | FrameError) -> None:
        s = self._session
        if s.closed is not None:
            return
        if isinstance(item, FrameError):
            s.fail(item.code, f"amcastd sent a bad frame: {item.detail}")
            self._ended()
            return
        try:
            out = s.on_frame(item)
        except (KeyError, TypeError, ValueError) as exc:
            s.fail("bad_frame", f"malformed {item.get('t')!r} frame from amcastd: {exc!r}")
            self._ended()
            return
        if out is None:
            if s.closed is not None:
                self._ended()
                return
            if not self._welcome.done() and s.welcome is not None:
                self._welcome.set_result(None)
            if s.written_seq > s.synced_seq:  # more to confirm: the next sync, lazily
                self._sync_lazily()
            self._progress.set()
        elif type(out) is Reply:
            fut = self._requests.pop(out.id, None)
            if fut is not None and not fut.done():
                if out.error is not None:
                    fut.set_exception(out.error)
                else:
                    fut.set_result(cast(dict[str, Any], out.frame))
            self._progress.set()
        else:
            self._push(cast(Event, out))

    def _push(self, item: Event) -> None:
        self._events.append(item)
        self._event_ready.set()
        if type(item) is MembersChange or type(item) is ViewChange:
            self._progress.set()  # wakes wait_for_members / wait_for_view
        t = self._proto.transport
        if len(self._events) >= self._max_events and t is not None and not self._proto.paused:
            self._proto.paused = True
            t.pause_reading()

    def _on_lost(self, exc: Exception | None) -> None:
        self._session.fail("closed", f"connection to amcastd lost{f': {exc}' if exc else ''}")
        self._ended()

    def _ended(self) -> None:
        """The connection is over: fail the waiters, close our side (never raises)."""
        err = self._session.closed_error()
        for fut in self._requests.values():
            if not fut.done():
                fut.set_exception(err)
                fut.exception()  # retrieved: an abandoned request logs nothing
        self._requests.clear()
        if not self._welcome.done():
            self._welcome.set_exception(err)
            self._welcome.exception()
        self._event_ready.set()
        self._progress.set()
        self._proto.can_write.set()
        if self._sync_timer is not None:
            self._sync_timer.cancel()
            self._sync_timer = None
        t = self._proto.transport
        if t is not None and not t.is_closing():
            t.close()

    # ---- frames out ------------------------------------------------------------------
    def _write(self, data: bytes) -> None:
        t = self._proto.transport
        if data and t is not None and not t.is_closing():
            t.write(data)

    def _flush(self) -> None:
        """Write the pending frames and keep a sync in flight; never raises (the pending
        messages stay pending, reported as not sent, when the connection is gone)."""
        self._flush_scheduled = False
        s = self._session
        if s.closed is not None:
            return
        t = self._proto.transport
        if t is None or t.is_closing():
            s.fail("closed", "connection to amcastd lost")
            self._ended()
            return
        frames = s.take()
        if not frames:
            return
        sync = s.sync_frame(lazy=True)  # taken frames count as written: a sync covers them
        if len(frames) == 1:  # one write (one syscall) for the frame and its sync
            t.write(frames[0][0] + sync)
        else:
            t.writelines([*(d for d, _ in frames), sync])
        if not sync:
            self._arm_sync_timer()

    def _sync_lazily(self) -> None:
        """Ask for confirmation of what was written: at once past ``lazy_sync_bytes`` in
        flight, else when the sync timer fires."""
        sync = self._session.sync_frame(lazy=True)
        if sync:
            self._write(sync)
        else:
            self._arm_sync_timer()

    def _arm_sync_timer(self) -> None:
        """Written messages no sync covers and none in flight (whose reply comes back
        here): confirm them within ``sync_interval``."""
        s = self._session
        if s.unsynced and not s.sync_pending and self._sync_timer is None:
            self._sync_timer = self._loop.call_later(self.sync_interval, self._sync_due)

    def _sync_due(self) -> None:
        """The sync timer: one sync for everything written so far (never raises)."""
        self._sync_timer = None
        if self._session.closed is None:
            self._write(self._session.sync_frame())

    def flush(self) -> None:
        """Write the pending messages now; raises refusals and ``ConnectionClosed``."""
        self._flush()
        if self._session.alarm:
            self._session.check()

    def send(self, payload: bytes, groups: str | Sequence[str], service: str = "agreed",
             clusters: str | Sequence[str] | None = None) -> int:
        """Queue one message; returns its number (0, 1, ... on this connection).

        ``clusters``: the clusters of a federation it goes to (names, or ``"a,b"``); the
        message is delivered in one order common to all of them, to the members of
        ``groups`` (one group) in each. ``None``, or this daemon's cluster alone: this
        cluster's order, as without it. A name the daemon's federation does not have
        raises ``ClientError`` ``unknown_cluster`` at once.

        Raises at once (nothing queued): ``TypeError`` for a payload that is not bytes,
        ``ClientError`` for bad groups/service or a payload over ``max_message_bytes``,
        ``WouldBlock`` when ``max_unconfirmed_bytes`` are unconfirmed, ``MessagesRefused``
        about earlier messages, ``ConnectionClosed`` after the end.
        """
        s = self._session
        last = s._last
        if (last is not None and groups is last.key_groups and service == last.service
                and type(payload) is bytes and not s.alarm and clusters is None
                and last.clusters is None):
            # the hot path, Session.add inlined: the same groups and service as the
            # previous message, and room in its frame and in the unconfirmed bytes
            size = len(payload)
            pending = s.pending_bytes + size
            if (size <= last.room and size <= s.max_message_bytes
                    and pending + s.inflight_bytes <= s.max_unconfirmed_bytes):
                last.payloads.append(payload)
                last.room -= size + PAYLOAD_OVERHEAD
                s.pending_bytes = pending
                seq = s.next_seq
                s.next_seq = seq + 1
                if pending >= self.max_batch_bytes:
                    self._flush()  # else: already scheduled with the frame's first message
                return seq
        seq = s.add(payload, groups, service, clusters)
        if s.pending_bytes >= self.max_batch_bytes:
            self._flush()
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)
        return seq

    async def send_wait(self, payload: bytes, groups: str | Sequence[str],
                        service: str = "agreed", *, timeout: float | None = None,
                        clusters: str | Sequence[str] | None = None) -> int:
        """``send``, waiting (up to ``timeout``) for room instead of raising ``WouldBlock``."""
        deadline = self._deadline(timeout)
        s = self._session
        size = len(payload)
        while True:
            try:
                return self.send(payload, groups, service, clusters)
            except WouldBlock:
                self._flush()
                await self._wait(lambda: s.has_room(size), deadline, "room to send")

    async def drain(self, timeout: float | None = None) -> None:
        """Flush, then wait (up to ``timeout``) while more than 3/4 of
        ``max_unconfirmed_bytes`` is unconfirmed (the last quarter is room for the sends
        between two drains) or the daemon is not reading."""
        self.flush()
        s = self._session
        deadline = self._deadline(timeout)
        low = s.max_unconfirmed_bytes * 3 // 4
        if s.inflight_bytes > low:
            await self._wait(lambda: s.inflight_bytes <= low, deadline, "drain")
        if not self._proto.can_write.is_set():
            try:
                await asyncio.wait_for(self._proto.can_write.wait(), self._left(deadline))
            except TimeoutError:
                raise self._timeout("drain", deadline) from None
        if s.alarm:
            s.check()

    async def sync(self, timeout: float | None = None) -> int:
        """Flush and wait until amcastd has handled every message sent so far; raises
        ``MessagesRefused`` if any was refused. Returns the number of messages sent."""
        self._flush()
        s = self._session
        target = s.next_seq
        if s.synced_seq < target:
            await self._wait(lambda: s.synced_seq >= target, self._deadline(timeout), "sync")
        if s.alarm:
            s.check()
        return target

    async def _wait(self, done: Callable[[], bool], deadline: float | None, what: str) -> None:
        s = self._session
        while not done():
            if s.closed is not None:
                raise s.closed_error()
            self._write(s.sync_frame(force=True))
            self._progress.clear()
            try:
                await asyncio.wait_for(self._progress.wait(), self._left(deadline))
            except TimeoutError:
                raise self._timeout(what, deadline) from None

    def _deadline(self, timeout: float | None) -> float | None:
        t = self.timeout if timeout is None else timeout
        return None if t is None or math.isinf(t) else time.monotonic() + t

    @staticmethod
    def _left(deadline: float | None) -> float | None:
        return None if deadline is None else max(0.0, deadline - time.monotonic())

    def _timeout(self, what: str, deadline: float | None) -> ClientTimeout:
        s = self._session
        n = s.unconfirmed_count()
        note = ""
        if self._proto.paused:
            note = (f"; {len(self._events)} deliveries unread: the client reads the socket "
                    "again once the application reads its events")
        return ClientTimeout(
            f"{what}: amcastd has not confirmed {n} message(s) in time: the cluster may be "
            f"stalled (check amcast status --health){note}", n,
        )

    # ---- requests --------------------------------------------------------------------
    async def _request(self, frame: dict[str, Any], timeout: float | None) -> dict[str, Any]:
        self._flush()
        s = self._session
        if s.closed is not None:
            raise s.closed_error()
        rid = s.request_id()
        fut: asyncio.Future[dict[str, Any]] = self._loop.create_future()
        self._requests[rid] = fut
        self._write(sp.encode_frame({**frame, "id": rid}))
        deadline = self._deadline(timeout)
        try:
            return await asyncio.wait_for(fut, self._left(deadline))
        except TimeoutError:
            self._requests.pop(rid, None)
            raise ClientTimeout(f"no reply to {frame['t']} from amcastd in time: it may be "
                                "stalled (check amcast status --health)") from None

    async def join(self, *groups: str, timeout: float | None = None,
                   members: bool = False) -> list[str]:
        """Join ``groups`` (returns once ordered); ``members``: also get ``MembersChange``
        events for them from ``next_event`` (the full list first)."""
        frame = {"t": "join", "groups": list(groups), **({"members": True} if members else {})}
        if members:
            self._session.watching.update(groups)
        reply = await self._request(frame, timeout)
        return list(reply["groups"])

    async def leave(self, *groups: str, timeout: float | None = None) -> list[str]:
        """Leave ``groups`` (returns once ordered); returns the groups still joined."""
        self._session.watching.difference_update(groups)
        reply = await self._request({"t": "leave", "groups": list(groups)}, timeout)
        return list(reply["groups"])

    async def status(self, timeout: float | None = None) -> dict[str, Any]:
        """The daemon's ``status`` reply (docs/api.md)."""
        return await self._request({"t": "status"}, timeout)

    # ---- start-up barriers -------------------------------------------------------------
    async def wait_for_members(self, group: str, expected: int | Iterable[str], *,
                               timeout: float | None = None) -> MembersChange:
        """Wait until ``group`` has the members ``expected`` (at least that many clients,
        or clients with every one of these ``hello`` names), as the last ``members``
        notice says; returns that notice. The group must have been joined with
        ``members=True``. Up to ``timeout`` (the client's unless given): ``ClientTimeout``.

        This is the start-up barrier: every message any member sends after its
        ``wait_for_members`` returned is ordered after the joins of all these members, so
        each of them receives it. Events read meanwhile (the notices included) stay queued
        for ``next_event``; a full queue raises ``ClientError("inbox_full")``."""
        want = expected_members(expected)
        s = self._session
        if group not in s.watching:
            raise ClientError("not_watching",
                              f"join({group!r}, members=True) before waiting for its members")
        await self._wait_state(lambda: members_satisfy(s.members.get(group), want), timeout,
                               f"{group!r} to have {expected_text(want)}")
        change = s.members[group]
        return change

    async def wait_for_view(self, nodes: int | Collection[int], *,
                            timeout: float | None = None) -> ViewChange:
        """Wait until this client's daemon is in a primary view of ``nodes`` (at least
        that many daemons, or every one of these node ids); returns that view. Up to
        ``timeout`` (the client's unless given): ``ClientTimeout``."""
        s = self._session
        await self._wait_state(lambda: view_satisfies(s.view, nodes), timeout,
                               f"a primary view of {expected_text(nodes, 'node')}")
        assert s.view is not None
        return s.view

    async def _wait_state(self, done: Callable[[], bool], timeout: float | None,
                          what: str) -> None:
        self._flush()
        s = self._session
        deadline = self._deadline(timeout)
        while not done():
            if s.closed is not None:
                raise s.closed_error()
            if self._proto.paused:
                raise ClientError("inbox_full", f"waiting for {what}: {len(self._events)} "
                                  "events unread: read them with next_event()")
            self._progress.clear()
            try:
                await asyncio.wait_for(self._progress.wait(), self._left(deadline))
            except TimeoutError:
                raise ClientTimeout(f"waiting for {what}: not reached in time") from None

    # ---- deliveries --------------------------------------------------------------------
    async def next_event(self, timeout: float | None = None) -> Event:
        """The next event (delivery batch, view change, order gap, undelivered report), in
        the daemon's frame order; ``timeout`` None waits for ever. After the end, the
        events already received, then ``ConnectionClosed``."""
        while not self._events:
            if self._session.closed is not None:
                raise self._session.closed_error()
            self._event_ready.clear()
            if timeout is None:  # no timer to arm: the wait itself
                await self._event_ready.wait()
                continue
            try:
                await asyncio.wait_for(self._event_ready.wait(), timeout)
            except TimeoutError:
                raise ClientTimeout(f"no delivery within {timeout} s") from None
        return self._events.popleft() if not self._proto.paused else self._pop_paused()

    def poll_event(self) -> Event | None:
        """The next event if one has arrived, else None (never waits); after the end,
        the events already received, then ``ConnectionClosed``."""
        if self._events:
            return self._events.popleft() if not self._proto.paused else self._pop_paused()
        if self._session.closed is not None:
            raise self._session.closed_error()
        return None

    def _pop_paused(self) -> Event:
        item = self._events.popleft()
        if len(self._events) <= self._max_events // 2:
            self._proto.paused = False
            t = self._proto.transport
            if t is not None and not t.is_closing():
                t.resume_reading()
        return item

    async def events(self) -> AsyncIterator[Event]:
        """Every event until the connection ends."""
        while True:
            try:
                yield await self.next_event()
            except ConnectionClosed:
                return

    async def batches(self, timeout: float | None = None) -> AsyncIterator[DeliveredBatch]:
        """The delivered batches (other events skipped); ``timeout`` as ``next_event``."""
        while True:
            item = await self.next_event(timeout)
            if isinstance(item, DeliveredBatch):
                yield item

    async def deliveries(self, timeout: float | None = None) -> AsyncIterator[Delivery]:
        """Every delivered message (other events skipped); ``timeout`` as ``next_event``."""
        async for batch in self.batches(timeout):
            for d in batch:
                yield d

    # ---- the end -----------------------------------------------------------------------
    async def close(self, timeout: float | None = None) -> None:
        """Flush, wait until every message is confirmed, close. Raises
        ``MessagesRefused``, ``ClientTimeout`` or (when the connection had already ended
        with messages unsent or of unknown outcome) ``ConnectionClosed``; the connection
        is closed in every case."""
        s = self._session
        try:
            if s.closed is None:
                await self.sync(timeout)
            else:
                err = s.closed_error()
                if err.unsent or err.unknown or err.refused:
                    raise err
        finally:
            self.abort()
            await asyncio.sleep(0)

    def abort(self) -> None:
        """Close now without waiting for confirmations (messages not yet confirmed are
        then of unknown outcome)."""
        s = self._session
        s.fail("closed", "the client closed the connection")
        self._ended()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None:
            await self.close()
        else:
            self.abort()
