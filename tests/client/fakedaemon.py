"""A small scripted amcastd for client and CLI tests: the socket protocol, no cluster.

It runs its own event loop in a thread (so blocking clients and CLI subprocesses can
talk to it from the test's thread) and speaks the protocol of ``docs/api.md`` with the
sync contract: ``send`` frames are accepted (or refused by ``refuse(frame)``), ``sync``
gets ``synced`` after every earlier frame, joined clients get their messages delivered
back when ``echo`` is on. ``stall()`` stops reading every connection (a cluster whose
window is full), ``old_daemon`` answers ``sync`` like a daemon that predates it
(``unknown_type``), ``stall_after_hello`` stops reading a connection right after its ``welcome``,
``stop(undelivered_from=...)`` says ``undelivered`` then the fatal
``shutting_down``, ``kill()`` drops every connection without a word. Membership:
``welcome_extra`` adds fields to ``welcome`` (``primary``, ``gap``), ``emit(frame)`` writes
a frame (``view``, ``gap``) to every connection in order with the deliveries,
``in_doubt(id, first, count)`` reports a send frame's messages ``undelivered`` with a
``count``, and ``on_join(conn)`` runs after each ``join`` reply.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from amcast.socket_protocol import FrameDecoder, FrameError, encode_frame


class _Conn(asyncio.Protocol):
    def __init__(self, fake: FakeDaemon) -> None:
        self.fake = fake
        self.decoder = FrameDecoder(1 << 20)
        self.transport: asyncio.Transport | None = None
        self.client_id = 0
        self.groups: set[str] = set()
        self.accepted: list[tuple[int, int]] = []  # (send frame id, message count)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.fake.conns.append(self)
        self.fake._next_client += 1
        self.client_id = self.fake._next_client
        if self.fake.stalled:
            transport.pause_reading()  # type: ignore[attr-defined]

    def connection_lost(self, exc: Exception | None) -> None:
        if self in self.fake.conns:
            self.fake.conns.remove(self)

    def write(self, frame: dict[str, Any]) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(encode_frame(frame))

    def data_received(self, data: bytes) -> None:
        for item in self.decoder.feed(data):
            if isinstance(item, FrameError):
                self.write({"t": "error", "code": item.code, "detail": item.detail,
                            "fatal": False})
                continue
            self.fake.received.append(item)
            self.handle(item)

    def handle(self, f: dict[str, Any]) -> None:
        fake = self.fake
        kind, rid = f["t"], f.get("id")
        ref = {} if rid is None else {"id": rid}
        if kind == "hello":
            self.write({"t": "welcome", "v": 1, "node": 0, "client": self.client_id,
                        "view": 0, "members": [0], "max_frame_bytes": fake.max_frame_bytes,
                        "max_message_bytes": fake.max_message_bytes, **fake.welcome_extra})
            if fake.stall_after_hello and self.transport is not None:
                self.transport.pause_reading()
        elif kind in ("join", "leave"):
            gs = f["groups"] if isinstance(f["groups"], list) else [f["groups"]]
            self.groups = self.groups | set(gs) if kind == "join" else self.groups - set(gs)
            self.write({"t": "groups", "groups": sorted(self.groups), **ref})
            if kind == "join":
                fake.joined.set()
                if fake.on_join is not None:
                    fake.on_join(self)
        elif kind == "status":
            self.write({"t": "status", "node": 0, "view": 0, "members": [0], "position": 0,
                        **({"health": fake.health} if fake.health is not None else {}),
                        **ref})
        elif kind == "sync":
            if fake.old_daemon:
                self.write({"t": "error", "code": "unknown_type", "detail": "sync",
                            "fatal": False, **ref})
            else:
                self.write({"t": "synced", **ref})
        elif kind == "send":
            code = fake.refuse(f) if fake.refuse else None
            if code is not None:
                self.write({"t": "error", "code": code, "detail": "refused by the fake",
                            "fatal": False, **ref})
                return
            self.accepted.append((rid, len(f["payloads"])))
            if fake.echo:
                fake._deliver(self, f)
        else:
            self.write({"t": "error", "code": "unknown_type", "detail": kind, "fatal": False,
                        **ref})


class FakeDaemon:
    def __init__(self, path: Path | str, *, echo: bool = True, old_daemon: bool = False,
                 refuse: Callable[[dict[str, Any]], str | None] | None = None,
                 max_message_bytes: int = 65536, max_frame_bytes: int = 1 << 20,
                 health: dict[str, Any] | None = None, stall_after_hello: bool = False,
                 welcome_extra: dict[str, Any] | None = None,
                 on_join: Callable[[_Conn], None] | None = None) -> None:
        self.path = str(path)
        self.echo = echo
        self.old_daemon = old_daemon
        self.refuse = refuse
        self.max_message_bytes = max_message_bytes
        self.max_frame_bytes = max_frame_bytes
        self.health = health
        self.stall_after_hello = stall_after_hello
        self.welcome_extra = welcome_extra or {}
        self.on_join = on_join
        self.stalled = False
        self.conns: list[_Conn] = []
        self.received: list[dict[str, Any]] = []
        self.joined = threading.Event()  # set at the first join
        self._next_client = 0
        self._position = 0
        self._seq = 0
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.AbstractServer | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def __enter__(self) -> FakeDaemon:
        self._thread.start()
        self.call(self._start)
        return self

    def __exit__(self, *exc: object) -> None:
        self.call(self._close)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _start(self) -> None:
        self._server = await self._loop.create_unix_server(lambda: _Conn(self), self.path)

    async def _close(self) -> None:
        for c in list(self.conns):
            if c.transport is not None:
                c.transport.abort()
        if self._server is not None:
            self._server.close()

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(*args)`` (or a coroutine function) in the fake's loop; its result."""
        async def run() -> Any:
            out = fn(*args)
            return await out if asyncio.iscoroutine(out) else out

        fut: concurrent.futures.Future[Any] = asyncio.run_coroutine_threadsafe(run(), self._loop)
        return fut.result(10)

    def deliver(self, sender: _Conn, groups: list[str], payloads: list[bytes]) -> None:
        """Deliver messages as if ``sender`` had sent them (call in the fake's loop)."""
        self._deliver(sender, {"groups": groups, "payloads": payloads})

    def _deliver(self, sender: _Conn, f: dict[str, Any]) -> None:
        groups = f["groups"] if isinstance(f["groups"], list) else [f["groups"]]
        ordered = f.get("service", "agreed") != "causal"
        frame = {"t": "deliver", "sender": 0, "seq": self._seq,
                 "service": f.get("service", "agreed"),
                 "position": self._position if ordered else None, "view": 0,
                 "send_ts": time.time(),
                 "batches": [[sender.client_id, groups, 0, f["payloads"]]]}
        self._seq += 1
        if ordered:
            self._position += len(f["payloads"])
        for c in self.conns:
            if c.groups & set(groups):
                c.write(frame)

    # ---- scripted behaviours -------------------------------------------------------
    def stall(self) -> None:
        def go() -> None:
            self.stalled = True
            for c in self.conns:
                if c.transport is not None:
                    c.transport.pause_reading()
        self.call(go)

    def resume(self) -> None:
        def go() -> None:
            self.stalled = False
            for c in self.conns:
                if c.transport is not None:
                    c.transport.resume_reading()
        self.call(go)

    def kill(self) -> None:
        """Drop every connection without a word (a daemon that died)."""
        def go() -> None:
            for c in list(self.conns):
                if c.transport is not None:
                    c.transport.abort()
        self.call(go)

    def stop(self, undelivered_from: int | None = None) -> None:
        """A clean stop: ``undelivered`` for accepted messages numbered from
        ``undelivered_from`` on (send frame ids are first message numbers), then the
        fatal ``shutting_down``."""
        def go() -> None:
            for c in list(self.conns):
                if undelivered_from is not None:
                    for rid, n in c.accepted:
                        if rid + n > undelivered_from:
                            c.write({"t": "error", "code": "undelivered", "fatal": False,
                                     "detail": "stopped", "id": rid,
                                     "first": max(0, undelivered_from - rid)})
                c.write({"t": "error", "code": "shutting_down", "fatal": True,
                         "detail": "the daemon is stopping"})
                if c.transport is not None:
                    c.transport.close()
        self.call(go)

    def emit(self, frame: dict[str, Any]) -> None:
        """Write ``frame`` to every connection (after what was written before)."""
        self.call(lambda: [c.write(frame) for c in self.conns])

    def in_doubt(self, rid: int, first: int, count: int,
                 outcome: str = "not_delivered") -> None:
        """``undelivered`` with ``count``, as for messages of a view this daemon was
        excluded from: messages ``rid + first`` .. ``+ count`` of send frame ``rid``."""
        self.emit({"t": "error", "code": "undelivered", "fatal": False, "id": rid,
                   "first": first, "count": count, "detail": "excluded",
                   "outcome": outcome})

    def clients(self) -> int:
        return int(self.call(lambda: len(self.conns)))
