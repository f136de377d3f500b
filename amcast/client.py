"""Python client of amcastd's unix-socket API (``docs/api.md``): asyncio and blocking.

Theory of operation: ``Client`` (asyncio) speaks frames through the same bounded
``FrameDecoder`` as the daemon. ``send()`` is synchronous and *batches transparently*:
messages for the same groups and service level are appended to one pending ``send``
frame, written at the end of the current event-loop iteration (``call_soon``) or as
soon as the batch reaches ``max_batch_bytes``. ``await drain()`` waits while the
socket's write buffer is above its high-water mark, so a sender loop that awaits it
every few thousand messages is flow-controlled by the daemon (which stops reading
when the cluster's window is full).

Incoming frames are queued per kind: replies (``groups``, ``status``) resolve the
pending request, ``deliver`` frames become ``DeliveredBatch`` objects (one per delivered
vertex; iterate it for per-message ``Delivery`` records, built lazily) and ``view``
frames ``ViewChange`` objects, both read with ``await next_event()`` or the
``events()``/``deliveries()`` iterators. The event queue is bounded: when the
application does not read, the client stops reading the socket, and the daemon's
slow-reader policy applies. A fatal ``error`` frame (or a closed socket) ends the
streams with ``ClientError``; non-fatal ones are collected in ``errors``.

``BlockingClient`` is the same protocol over a blocking socket, for scripts.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections import deque
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

from daemon import frames
from daemon.frames import FrameDecoder, FrameError
from protocols.errors import ClientError

SERVICES = ("causal", "agreed", "safe")
DEFAULT_MAX_BATCH_BYTES = 16 * 1024
DEFAULT_SOCKET = "/run/amcast/amcastd.sock"


@dataclass(frozen=True, slots=True)
class Delivery:
    """One application message as delivered to this client."""

    position: int | None  # total-order position (None for the causal service)
    sender: int  # node id of the sending daemon
    client: int  # the sending client's id at that daemon
    groups: tuple[str, ...]
    service: str
    payload: bytes
    view: int
    message_id: str  # "{sender}:{seq}:{index}", the same on every node


@dataclass(frozen=True, slots=True)
class DeliveredBatch:
    """One ``deliver`` frame: the part of one delivered vertex addressed to us."""

    sender: int
    seq: int
    service: str
    position: int | None
    view: int
    send_ts: float
    batches: list[list[Any]]  # [client, groups, index, [payload, ...]] per envelope

    @property
    def count(self) -> int:
        return sum(len(b[3]) for b in self.batches)

    def __iter__(self) -> Iterator[Delivery]:
        pos = self.position
        for client, groups, index, payloads in self.batches:
            g = tuple(groups)
            for i, payload in enumerate(payloads):
                k = index + i
                yield Delivery(
                    None if pos is None else pos + k, self.sender, client, g, self.service,
                    payload, self.view, f"{self.sender}:{self.seq}:{k}",
                )


@dataclass(frozen=True, slots=True)
class ViewChange:
    view: int
    members: list[int]


def _batch(frame: dict[str, Any]) -> DeliveredBatch:
    return DeliveredBatch(
        frame["sender"], frame["seq"], frame["service"], frame["position"], frame["view"],
        frame["send_ts"], frame["batches"],
    )


def _error(frame: dict[str, Any]) -> ClientError:
    return ClientError(str(frame.get("code", "error")), str(frame.get("detail", "")))


def _check_send(groups: str | Sequence[str], service: str) -> tuple[str, ...]:
    if service not in SERVICES:
        raise ClientError("bad_service", f"service must be one of {', '.join(SERVICES)}")
    return (groups,) if isinstance(groups, str) else tuple(groups)


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
        for item in self.decoder.feed(data):
            if isinstance(item, FrameError):
                self.client._on_frame({"t": "error", "code": item.code, "detail": item.detail,
                                       "fatal": True})
            else:
                self.client._on_frame(item)

    def connection_lost(self, exc: Exception | None) -> None:
        self.can_write.set()
        self.client._on_closed(exc)

    def pause_writing(self) -> None:
        self.can_write.clear()

    def resume_writing(self) -> None:
        self.can_write.set()


class Client:
    """asyncio client; create with ``await Client.connect(path)``."""

    def __init__(self, max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
                 max_queued_events: int = 4096) -> None:
        self.max_batch_bytes = max_batch_bytes
        self.welcome: dict[str, Any] = {}
        self.errors: list[ClientError] = []
        self.view: ViewChange | None = None
        self._proto = _Protocol(self)
        self._loop = asyncio.get_running_loop()
        self._events: deque[DeliveredBatch | ViewChange] = deque()
        self._max_events = max_queued_events
        self._event_ready = asyncio.Event()
        self._replies: deque[asyncio.Future[dict[str, Any]]] = deque()
        self._welcome: asyncio.Future[dict[str, Any]] = self._loop.create_future()
        # consecutive messages with the same (groups, service) share one send frame
        self._pending: list[tuple[tuple[tuple[str, ...], str], list[bytes]]] = []
        self._pending_bytes = 0
        self._flush_scheduled = False
        self._closed: ClientError | None = None
        self.sent = 0

    @classmethod
    async def connect(cls, path: str = DEFAULT_SOCKET, *, name: str = "",
                      max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
                      timeout: float = 10.0) -> Client:
        self = cls(max_batch_bytes)
        try:
            await asyncio.wait_for(
                self._loop.create_unix_connection(lambda: self._proto, path), timeout
            )
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            raise ClientError("not_running", f"no amcastd listening on {path}: {exc}") from None
        self._write({"t": "hello", "v": frames.PROTOCOL_VERSION, "name": name})
        self.welcome = await asyncio.wait_for(self._welcome, timeout)
        self.view = ViewChange(self.welcome["view"], self.welcome["members"])
        return self

    @property
    def node(self) -> int:
        return int(self.welcome["node"])

    @property
    def client_id(self) -> int:
        return int(self.welcome["client"])

    # ---- frames in -------------------------------------------------------------------
    def _on_frame(self, frame: dict[str, Any]) -> None:
        kind = frame["t"]
        if kind == "deliver":
            self._push(_batch(frame))
        elif kind == "view":
            self.view = ViewChange(frame["view"], frame["members"])
            self._push(self.view)
        elif kind == "welcome":
            if not self._welcome.done():
                self._welcome.set_result(frame)
        elif kind == "error":
            err = _error(frame)
            if frame.get("fatal"):
                self._closed = err
                if not self._welcome.done():
                    self._welcome.set_exception(err)
                self._fail_waiters(err)
            elif "id" in frame and self._replies:
                fut = self._replies.popleft()
                if not fut.done():
                    fut.set_exception(err)
            else:
                self.errors.append(err)
        elif self._replies:
            fut = self._replies.popleft()
            if not fut.done():
                fut.set_result(frame)

    def _push(self, item: DeliveredBatch | ViewChange) -> None:
        self._events.append(item)
        self._event_ready.set()
        t = self._proto.transport
        if len(self._events) >= self._max_events and t is not None and not self._proto.paused:
            self._proto.paused = True
            t.pause_reading()

    def _on_closed(self, exc: Exception | None) -> None:
        if self._closed is None:
            self._closed = ClientError("closed", f"connection to amcastd closed {exc or ''}")
        self._fail_waiters(self._closed)

    def _fail_waiters(self, err: ClientError) -> None:
        while self._replies:
            fut = self._replies.popleft()
            if not fut.done():
                fut.set_exception(err)
        if not self._welcome.done():
            self._welcome.set_exception(err)
        self._event_ready.set()

    # ---- frames out ------------------------------------------------------------------
    def _write(self, frame: dict[str, Any]) -> None:
        if self._closed is not None:
            raise self._closed
        t = self._proto.transport
        assert t is not None
        t.write(frames.encode(frame))

    async def _request(self, frame: dict[str, Any], timeout: float = 10.0) -> dict[str, Any]:
        self.flush()
        fut: asyncio.Future[dict[str, Any]] = self._loop.create_future()
        self._replies.append(fut)
        self._write({**frame, "id": len(self._replies)})
        return await asyncio.wait_for(fut, timeout)

    async def join(self, *groups: str) -> list[str]:
        return list((await self._request({"t": "join", "groups": list(groups)}))["groups"])

    async def leave(self, *groups: str) -> list[str]:
        return list((await self._request({"t": "leave", "groups": list(groups)}))["groups"])

    async def status(self) -> dict[str, Any]:
        return await self._request({"t": "status"})

    def send(self, payload: bytes, groups: str | Sequence[str], service: str = "agreed") -> None:
        """Queue one message; it is written with others at the end of this loop turn."""
        key = (_check_send(groups, service), service)
        pending = self._pending
        if pending and pending[-1][0] == key:
            pending[-1][1].append(payload)
        else:
            pending.append((key, [payload]))
        self.sent += 1
        self._pending_bytes += len(payload)
        if self._pending_bytes >= self.max_batch_bytes:
            self.flush()
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self.flush)

    def flush(self) -> None:
        self._flush_scheduled = False
        if not self._pending:
            return
        pending, self._pending, self._pending_bytes = self._pending, [], 0
        for (groups, service), payloads in pending:
            self._write({"t": "send", "groups": list(groups), "service": service,
                         "payloads": payloads})

    async def drain(self) -> None:
        """Flush, then wait while the daemon is not reading (flow control)."""
        self.flush()
        await self._proto.can_write.wait()
        if self._closed is not None:
            raise self._closed

    # ---- deliveries --------------------------------------------------------------------
    async def next_event(self, timeout: float | None = None) -> DeliveredBatch | ViewChange:
        while not self._events:
            if self._closed is not None:
                raise self._closed
            self._event_ready.clear()
            await asyncio.wait_for(self._event_ready.wait(), timeout)
        item = self._events.popleft()
        if self._proto.paused and len(self._events) <= self._max_events // 2:
            self._proto.paused = False
            if self._proto.transport is not None:
                self._proto.transport.resume_reading()
        return item

    async def events(self) -> AsyncIterator[DeliveredBatch | ViewChange]:
        while True:
            try:
                yield await self.next_event()
            except ClientError:
                return

    async def batches(self, timeout: float | None = None) -> AsyncIterator[DeliveredBatch]:
        while True:
            item = await self.next_event(timeout)
            if isinstance(item, DeliveredBatch):
                yield item

    async def deliveries(self, timeout: float | None = None) -> AsyncIterator[Delivery]:
        async for batch in self.batches(timeout):
            for d in batch:
                yield d

    async def close(self) -> None:
        with contextlib.suppress(ClientError):
            self.flush()
        t = self._proto.transport
        if t is not None and not t.is_closing():
            t.close()
        await asyncio.sleep(0)

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class BlockingClient:
    """The same protocol over a blocking socket (no event loop), batching sends."""

    def __init__(self, path: str = DEFAULT_SOCKET, *, name: str = "",
                 max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES, timeout: float = 10.0) -> None:
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout)
        try:
            self._sock.connect(path)
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            self._sock.close()
            raise ClientError("not_running", f"no amcastd listening on {path}: {exc}") from None
        self._decoder = FrameDecoder(1 << 30)
        self._inbox: deque[dict[str, Any]] = deque()
        # consecutive messages with the same (groups, service) share one send frame
        self._pending: list[tuple[tuple[tuple[str, ...], str], list[bytes]]] = []
        self._pending_bytes = 0
        self.max_batch_bytes = max_batch_bytes
        self.errors: list[ClientError] = []
        self._sock.sendall(frames.encode({"t": "hello", "v": frames.PROTOCOL_VERSION,
                                          "name": name}))
        self.welcome = self._wait_for("welcome")

    def _read_frame(self, timeout: float | None) -> dict[str, Any]:
        while not self._inbox:
            self._sock.settimeout(timeout)
            data = self._sock.recv(1 << 16)
            if not data:
                raise ClientError("closed", "connection to amcastd closed")
            for item in self._decoder.feed(data):
                if isinstance(item, FrameError):
                    raise ClientError(item.code, item.detail)
                self._inbox.append(item)
        frame = self._inbox.popleft()
        if frame["t"] == "error":
            if frame.get("fatal") or "id" in frame:
                raise _error(frame)
            self.errors.append(_error(frame))
        return frame

    def _wait_for(self, kind: str, timeout: float = 10.0) -> dict[str, Any]:
        skipped: list[dict[str, Any]] = []
        try:
            while True:
                frame = self._read_frame(timeout)
                if frame["t"] == kind:
                    return frame
                if frame["t"] in ("deliver", "view"):
                    skipped.append(frame)
        finally:
            self._inbox.extendleft(reversed(skipped))

    def _request(self, frame: dict[str, Any], kind: str) -> dict[str, Any]:
        self.flush()
        self._sock.sendall(frames.encode({**frame, "id": 1}))
        return self._wait_for(kind)

    def join(self, *groups: str) -> list[str]:
        return list(self._request({"t": "join", "groups": list(groups)}, "groups")["groups"])

    def leave(self, *groups: str) -> list[str]:
        return list(self._request({"t": "leave", "groups": list(groups)}, "groups")["groups"])

    def status(self) -> dict[str, Any]:
        return self._request({"t": "status"}, "status")

    def send(self, payload: bytes, groups: str | Sequence[str], service: str = "agreed") -> None:
        key = (_check_send(groups, service), service)
        if self._pending and self._pending[-1][0] == key:
            self._pending[-1][1].append(payload)
        else:
            self._pending.append((key, [payload]))
        self._pending_bytes += len(payload)
        if self._pending_bytes >= self.max_batch_bytes:
            self.flush()

    def flush(self) -> None:
        if not self._pending:
            return
        pending, self._pending, self._pending_bytes = self._pending, [], 0
        self._sock.sendall(b"".join(
            frames.encode({"t": "send", "groups": list(g), "service": s, "payloads": p})
            for (g, s), p in pending
        ))

    def next_event(self, timeout: float | None = 10.0) -> DeliveredBatch | ViewChange:
        self.flush()
        while True:
            frame = self._read_frame(timeout)
            if frame["t"] == "deliver":
                return _batch(frame)
            if frame["t"] == "view":
                return ViewChange(frame["view"], frame["members"])

    def deliveries(self, timeout: float | None = 10.0) -> Iterator[Delivery]:
        while True:
            item = self.next_event(timeout)
            if isinstance(item, DeliveredBatch):
                yield from item

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.flush()
        self._sock.close()

    def __enter__(self) -> BlockingClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
