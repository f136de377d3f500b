"""The unix-socket API server: frames in, deliveries out, bounded everywhere.

Theory of operation (the protocol itself is ``docs/api.md``): one ``ClientConnection``
(an asyncio ``Protocol``) per connected application. Bytes go through a bounded
``FrameDecoder``; each frame is dispatched by its type. Frames that break the rules get
an ``error`` frame with a code (``ClientError`` in ``protocols.errors``) and the
connection is kept where the stream is still in sync; only a missing ``hello``, a wrong
version or a slow reader close it.

Deliveries (``ApiServer.deliver``) are grouped per client and per vertex: a client gets
*one* ``deliver`` frame per delivered vertex holding every envelope addressed to one of
its groups, written with one ``transport.write``; identical frames for several clients
are encoded once.

Backpressure, the slow-reader policy:

1. a client whose unread deliveries exceed ``client_queue_high_bytes`` (the transport's
   high-water mark) has its *reading paused*: its own sends stop until it catches up;
2. past ``client_queue_max_bytes`` it gets an ``error`` frame ``slow_reader`` and is
   disconnected (counted in ``amcast_clients_disconnected_total{reason="slow_reader"}``).

Deliveries are never delayed for a slow client, so it cannot stall the cluster, and
its queue is bounded, so it cannot exhaust memory. When the engine's window is full,
the daemon calls ``pause_sends``: every client's reading is paused (their sends are
flow-controlled at the socket) until ``resume_sends``.
"""

from __future__ import annotations

import asyncio
import contextlib
import grp
import os
from collections.abc import Callable
from typing import Any, Protocol, cast

import msgpack

from daemon import frames
from daemon.config import ApiSection
from daemon.frames import FrameDecoder, FrameError
from protocols.errors import ConfigurationError

SERVICES = ("causal", "agreed", "safe")
_packb = msgpack.packb


class Backend(Protocol):
    """What the API needs from the daemon."""

    def welcome(self) -> dict[str, Any]: ...

    def status(self) -> dict[str, Any]: ...

    def send(
        self, conn: ClientConnection, groups: list[str], service: str, payloads: list[bytes]
    ) -> str | None:
        """Submit; returns an error code when the frame is refused."""
        ...

    def count_client_error(self, code: str) -> None: ...

    def count_disconnect(self, reason: str) -> None: ...


class ClientConnection(asyncio.Protocol):
    def __init__(self, server: ApiServer, client_id: int) -> None:
        self.server = server
        self.id = client_id
        self.name = ""
        self.groups: set[str] = set()
        self.greeted = False
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._decoder = FrameDecoder(server.config.max_frame_bytes)
        self._paused_by: set[str] = set()

    # ---- asyncio callbacks -------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        cfg = self.server.config
        transport.set_write_buffer_limits(high=cfg.client_queue_high_bytes)
        if len(self.server.clients) >= cfg.max_clients:
            self.fail("too_many_clients", f"max_clients = {cfg.max_clients}", fatal=True)
            return
        self.server.clients[self.id] = self
        if self.server.sends_paused:
            self._pause("window")

    def data_received(self, data: bytes) -> None:
        for item in self._decoder.feed(data):
            if self.closed:
                return
            if isinstance(item, FrameError):
                self.fail(item.code, item.detail)
            else:
                self._dispatch(item)

    def eof_received(self) -> bool | None:
        truncated = self._decoder.truncated()
        if truncated is not None:
            self.fail(truncated.code, truncated.detail, fatal=True)
        return False  # close our side once our writes are flushed

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.server.forget(self)

    def pause_writing(self) -> None:  # unread deliveries above the high-water mark
        self._pause("slow_reader")

    def resume_writing(self) -> None:
        self._resume("slow_reader")

    # ---- flow control --------------------------------------------------------------
    def _pause(self, why: str) -> None:
        if not self._paused_by and self.transport is not None and not self.closed:
            self.transport.pause_reading()
        self._paused_by.add(why)

    def _resume(self, why: str) -> None:
        self._paused_by.discard(why)
        if not self._paused_by and self.transport is not None and not self.closed:
            self.transport.resume_reading()

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
        self.write(frames.encode(frame))

    def fail(
        self, code: str, detail: str, *, fatal: bool = False, ref: Any = None,
        counted: bool = False,
    ) -> None:
        """Send an ``error`` frame; close the connection if ``fatal``."""
        self.server.backend.count_client_error(code)
        if self.closed or self.transport is None:
            return
        frame: dict[str, Any] = {"t": "error", "code": code, "detail": detail, "fatal": fatal}
        if ref is not None:
            frame["id"] = ref
        self.transport.write(frames.encode(frame))
        if fatal:
            if not counted:
                self.server.backend.count_disconnect(code)
            self.closed = True
            self.server.forget(self)
            self.transport.close()  # flushes queued deliveries and the error frame first
            # ... but a client that never reads must not pin that memory: abort later
            asyncio.get_running_loop().call_later(
                self.server.config.close_grace_s, self.transport.abort
            )

    # ---- frames --------------------------------------------------------------------
    def _dispatch(self, frame: dict[str, Any]) -> None:
        kind = frame["t"]
        ref = frame.get("id")
        if not self.greeted:
            if kind != "hello":
                self.fail("hello_required", "the first frame must be hello", fatal=True)
                return
            version = frame.get("v")
            if version != frames.PROTOCOL_VERSION:
                self.fail(
                    "unsupported_version",
                    f"this daemon speaks version {frames.PROTOCOL_VERSION}, not {version!r}",
                    fatal=True,
                )
                return
            name = frame.get("name", "")
            self.name = name if isinstance(name, str) else ""
            self.greeted = True
            self.reply({"t": "welcome", "v": frames.PROTOCOL_VERSION, "client": self.id,
                        **self.server.backend.welcome()})
            return
        handler = _HANDLERS.get(kind)
        if handler is None:
            self.fail("unknown_type", f"unknown frame type {kind!r}", ref=ref)
            return
        handler(self, frame, ref)

    def _groups_field(self, frame: dict[str, Any], ref: Any) -> list[str] | None:
        cfg = self.server.config
        groups = frame.get("groups")
        if isinstance(groups, str):
            groups = [groups]
        if (
            not isinstance(groups, list)
            or not groups
            or not all(isinstance(g, str) and g for g in groups)
        ):
            self.fail("bad_field", "groups must be a non-empty list of non-empty strings", ref=ref)
            return None
        if len(groups) > cfg.max_groups:
            self.fail("too_many_groups", f"at most {cfg.max_groups} groups", ref=ref)
            return None
        if any(len(g.encode()) > cfg.max_group_name_bytes for g in groups):
            self.fail("bad_field", f"group names are at most {cfg.max_group_name_bytes} bytes",
                      ref=ref)
            return None
        return groups

    def _on_join(self, frame: dict[str, Any], ref: Any) -> None:
        groups = self._groups_field(frame, ref)
        if groups is None:
            return
        if len(self.groups | set(groups)) > self.server.config.max_groups:
            self.fail("too_many_groups", f"at most {self.server.config.max_groups} groups",
                      ref=ref)
            return
        for g in groups:
            if g not in self.groups:
                self.groups.add(g)
                self.server.members_of.setdefault(g, set()).add(self.id)
        self._ack_groups(ref)

    def _on_leave(self, frame: dict[str, Any], ref: Any) -> None:
        groups = self._groups_field(frame, ref)
        if groups is None:
            return
        for g in groups:
            if g in self.groups:
                self.groups.discard(g)
                self.server.leave(g, self.id)
        self._ack_groups(ref)

    def _ack_groups(self, ref: Any) -> None:
        reply: dict[str, Any] = {"t": "groups", "groups": sorted(self.groups)}
        if ref is not None:
            reply["id"] = ref
        self.reply(reply)

    def _on_send(self, frame: dict[str, Any], ref: Any) -> None:
        cfg = self.server.config
        groups = self._groups_field(frame, ref)
        if groups is None:
            return
        service = frame.get("service", "agreed")
        if service not in SERVICES:
            self.fail("bad_service", f"service must be one of {', '.join(SERVICES)}", ref=ref)
            return
        payloads = frame.get("payloads")
        if payloads is None and "payload" in frame:
            payloads = [frame["payload"]]
        if (
            not isinstance(payloads, list)
            or not payloads
            or not all(type(p) is bytes for p in payloads)
        ):
            self.fail("bad_field", "payloads must be a non-empty list of bin", ref=ref)
            return
        if max(map(len, payloads)) > cfg.max_message_bytes:
            self.fail("message_too_large",
                      f"a payload exceeds max_message_bytes {cfg.max_message_bytes}", ref=ref)
            return
        refused = self.server.backend.send(self, groups, service, payloads)
        if refused is not None:
            self.fail(refused, "the message was not sent", ref=ref)

    def _on_status(self, frame: dict[str, Any], ref: Any) -> None:
        reply = {"t": "status", **self.server.backend.status()}
        if ref is not None:
            reply["id"] = ref
        self.reply(reply)

    def info(self) -> dict[str, Any]:
        return {"client": self.id, "name": self.name, "groups": sorted(self.groups),
                "queued_bytes": self.queued_bytes, "paused": sorted(self._paused_by)}


_HANDLERS: dict[str, Callable[[ClientConnection, dict[str, Any], Any], None]] = {
    "join": ClientConnection._on_join,
    "leave": ClientConnection._on_leave,
    "send": ClientConnection._on_send,
    "status": ClientConnection._on_status,
}


class ApiServer:
    """The listening socket, the connected clients and the group index."""

    def __init__(self, config: ApiSection, backend: Backend) -> None:
        self.config = config
        self.backend = backend
        self.clients: dict[int, ClientConnection] = {}
        self.members_of: dict[str, set[int]] = {}
        self.sends_paused = False
        self._next_id = 1
        self._server: asyncio.AbstractServer | None = None
        self.path = config.socket

    async def start(self) -> None:
        path = self.path
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        if os.path.exists(path):
            os.unlink(path)  # a stale socket file from a previous run
        loop = asyncio.get_running_loop()
        old_umask = os.umask(0o177)  # never world-accessible, not even for a moment
        try:
            self._server = await loop.create_unix_server(self._new_connection, path)
        finally:
            os.umask(old_umask)
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

    def forget(self, conn: ClientConnection) -> None:
        if self.clients.pop(conn.id, None) is None:
            return
        for g in conn.groups:
            self.leave(g, conn.id)

    def leave(self, group: str, client_id: int) -> None:
        members = self.members_of.get(group)
        if members is not None:
            members.discard(client_id)
            if not members:
                del self.members_of[group]

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
                data = frames.encode_body(body)
                encoded[key] = data
            conn.write(data)
        return len(per_client)

    def broadcast(self, frame: dict[str, Any]) -> None:
        data = frames.encode(frame)
        for conn in list(self.clients.values()):
            if conn.greeted:
                conn.write(data)

    def close_listener(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    def close_clients(self, code: str = "shutting_down", detail: str = "") -> None:
        for conn in list(self.clients.values()):
            conn.fail(code, detail or "the daemon is stopping", fatal=True)
