"""Test helpers: ``Raw``, a hand-driven API connection, ``FakeNode``, and
``group_config`` / ``running`` for real daemons sharing the test's event loop.

``FakeNode`` is a scriptable stand-in for ``amcast.protocols.node.Node``: it has the
``Node`` surface the daemon uses (``submit``, ``receive_datagram``, ``handle_timer``,
``next_timer``, ``datagrams_to_send``, ``events``, ``stats``, ``phi``) and lets a test
decide what the engine does: how many envelopes its window admits, which events come
out, which call raises.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import msgpack
from amcast.daemon.config import DaemonConfig
from amcast.daemon.runner import Daemon
from amcast.protocols.errors import BackpressureError, ClientError
from amcast.protocols.events import (
    BackpressureReleased,
    BatchDelivered,
    Event,
    ServiceLevel,
)
from amcast.protocols.node import NodeStats
from amcast.protocols.vocabulary import DeliveryRule

from amcast.localcluster import free_port
from amcast.socket_protocol import FrameDecoder, encode_envelope, encode_frame


def loopback_group() -> tuple[str, int]:
    """A random 239.255.x.y group and a free port: daemons of one test, nobody else's."""
    return f"239.255.{random.randrange(1, 255)}.{random.randrange(1, 255)}", free_port()


def group_config(tmp_path: Path, node: int, group: tuple[str, int], *,
                 members: Sequence[int] = (0, 1, 2), **tables: dict[str, Any]) -> DaemonConfig:
    """Node ``node`` of ``members`` on loopback multicast ``group`` (``loopback_group``),
    its files under ``tmp_path``, fast failure detection (``suspect_timeout`` 0.4 s);
    ``tables`` add to or replace whole config tables (``security``, ``protocol``...)."""
    protocol = {"suspect_timeout": 0.4, **tables.pop("protocol", {})}
    return DaemonConfig.model_validate({
        "node": {"id": node, "members": list(members), "seed": node + 1,
                 "state_dir": str(tmp_path / f"state{node}")},
        "network": {"group": group[0], "port": group[1], "ttl": 0},
        "api": {"socket": str(tmp_path / f"n{node}.sock")},
        "metrics": {"port": 0},
        "logs": {"dir": str(tmp_path / f"logs{node}"), "format": "json", "level": "warning"},
        "protocol": protocol,
        "shutdown": {"grace_s": 0.5},
        **tables,
    })


async def until(done: Callable[[], bool], what: str, timeout: float = 30) -> None:
    """Wait on this loop until ``done()``; ``timeout`` s (a few seconds; a loaded CI
    machine more) fails the test with ``what``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not done():
        assert loop.time() < deadline, what
        await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def running(daemons: Sequence[Daemon]) -> AsyncIterator[None]:
    """Run ``daemons`` on this loop: ready within 15 s, stopped (within 20 s) after."""
    tasks = [asyncio.create_task(d.run()) for d in daemons]
    try:
        await asyncio.wait_for(asyncio.gather(*(d.ready.wait() for d in daemons)), 15)
        yield
    finally:
        for d in daemons:
            d.request_stop("test")
        await asyncio.wait_for(asyncio.gather(*tasks), 20)


class FakeTransport:
    """A ``ClientConnection``'s transport, kept in memory; ``sock`` is what it reports as
    its socket (``None``: no socket, no credentials)."""

    def __init__(self, sock: Any = None) -> None:
        self.sock = sock
        self.out = bytearray()
        self.reading = True
        self.closed = False

    def get_extra_info(self, name: str) -> Any:
        return self.sock if name == "socket" else None

    def set_write_buffer_limits(self, high: int) -> None:
        return

    def write(self, data: bytes) -> None:
        self.out += data

    def get_write_buffer_size(self) -> int:
        return 0

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def can_write_eof(self) -> bool:
        return False

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True


class Backend:
    """The daemon side of an ``ApiServer`` driven by hand: records sends and disconnects."""

    def __init__(self) -> None:
        self.sent: list[list[bytes]] = []
        self.disconnects: list[str] = []
        self.requests: list[tuple[Any, ...]] = []

    def welcome(self) -> dict[str, Any]:
        return {}

    def status(self) -> dict[str, Any]:
        return {}

    def send(
        self, conn: Any, groups: list[str], service: str, payloads: list[bytes], ref: Any = None
    ) -> str | None:
        self.sent.append(payloads)
        return None

    def count_client_error(self, code: str) -> None:
        return

    def count_disconnect(self, reason: str) -> None:
        self.disconnects.append(reason)

    def count_denied(self, request: str) -> None:
        return

    def forget_client(self, client_id: int) -> None:
        return

    def flow_hold(self, on: bool) -> None:
        return

    def group_request(self, *args: Any) -> None:
        self.requests.append(args)


NOTICES = ("view", "gap")
"""Frames a daemon may send at any time when membership changes."""


class Raw:
    """A hand-driven connection: write arbitrary bytes, read decoded frames."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.decoder = FrameDecoder(1 << 30)
        self.frames: list[dict[str, Any]] = []
        self.notices: list[dict[str, Any]] = []

    @classmethod
    async def open(cls, path: str, hello: bool = True) -> Raw:
        raw = cls(*await asyncio.open_unix_connection(path))
        if hello:
            raw.write(encode_frame({"t": "hello", "v": 1, "name": "raw"}))
            assert (await raw.next())["t"] == "welcome"
        return raw

    def write(self, data: bytes) -> None:
        self.writer.write(data)

    def send(self, frame: dict[str, Any]) -> None:
        self.writer.write(encode_frame(frame))

    async def next(self, timeout: float = 10) -> dict[str, Any]:
        """The next frame; membership notices (``view``, ``gap``) go to ``notices``."""
        while not self.frames:
            data = await asyncio.wait_for(self.reader.read(1 << 16), timeout)
            if not data:
                self.writer.close()  # the daemon said goodbye: so do we
                raise EOFError
            for item in self.decoder.feed(data):
                assert isinstance(item, dict), item
                if item.get("t") in NOTICES:
                    self.notices.append(item)
                else:
                    self.frames.append(item)
        return self.frames.pop(0)

    async def until(self, kind: str, timeout: float = 10) -> list[dict[str, Any]]:
        """Frames up to and including the first of type ``kind``."""
        got = []
        while True:
            frame = await self.next(timeout)
            got.append(frame)
            if frame["t"] == kind:
                return got

    async def sync(self, ref: int, timeout: float = 10) -> list[dict[str, Any]]:
        """Send ``sync``; the frames before ``synced`` (which must carry ``ref``)."""
        self.send({"t": "sync", "id": ref})
        got = await self.until("synced", timeout)
        assert got[-1] == {"t": "synced", "id": ref}
        return got[:-1]

    async def closed(self, timeout: float = 10) -> bool:
        try:
            while True:
                await self.next(timeout)
        except EOFError:
            return True


class FakeNode:
    def __init__(self, node_id: int = 0, *, window: int | None = None, phi: float = 1.5) -> None:
        self.node_id = node_id
        self.window = window  # envelopes admitted until ``release``; None = unlimited
        self.submitted: list[tuple[bytes, ServiceLevel]] = []
        self.pending: deque[Event] = deque()
        self.raise_in: dict[str, int] = {}  # method name -> raise that many more times
        self.refuse_larger_than: int | None = None  # ClientError like the real engine
        self.timer_at: float | None = 1e12
        self.stats = NodeStats()
        self.phi = phi
        self.core = {"decode": "pure", "seal": "pure", "order": "pure",
                     "reliable": "pure"}  # (Node.core)
        self.incarnation = 1  # the daemon's delivery log records it (Node.incarnation)
        self.outbox: list[bytes] = []  # what the next datagrams_to_send() hands out
        self.records: deque[bytes] = deque()  # state_to_persist() hands out one per call
        self._seq = 0
        self._position = 0

    # -- scripting ------------------------------------------------------------------
    def _maybe_raise(self, name: str) -> None:
        left = self.raise_in.get(name, 0)
        if left:
            self.raise_in[name] = left - 1
            raise RuntimeError(f"fake failure in {name}")

    def release(self, n: int | None = None) -> None:
        """Open the window by ``n`` envelopes (None: unlimited) and say so."""
        self.window = None if n is None else (self.window or 0) + n
        self.pending.append(BackpressureReleased(0, 0))

    def deliver(self, payloads: list[bytes], *, sender: int | None = None,
                service: ServiceLevel = ServiceLevel.AGREED) -> BatchDelivered:
        """Queue a delivery of ``payloads`` (raw envelope bytes) as one vertex."""
        self._seq += 1
        ordered = service is not ServiceLevel.CAUSAL
        ev = BatchDelivered(
            self.node_id if sender is None else sender, self._seq, tuple(payloads), service,
            self._position if ordered else None, 1 if ordered else None,
            DeliveryRule.EARLY if ordered else None, 2 if ordered else None,
            0 if ordered else None, 1 if ordered else None, 1.0,
        )
        self.pending.append(ev)
        return ev

    def deliver_submitted(self, k: int | None = None) -> None:
        """Deliver the first ``k`` (all) envelopes submitted and not yet delivered."""
        take = self.submitted[: len(self.submitted) if k is None else k]
        del self.submitted[: len(take)]
        for envelope, service in take:
            self.deliver([envelope], service=service)

    # -- the Node surface -------------------------------------------------------------
    primary = True
    unsent = 0
    left = False

    def state_to_persist(self) -> bytes | None:
        return self.records.popleft() if self.records else None

    def peers(self) -> dict[int, dict[str, float | int | bool | None]]:
        return {}  # a one-node cluster: no other daemon

    @property
    def quorum(self) -> dict[str, int]:
        return {"needed": 1, "listed": 1, "reachable": 1}

    def leave(self, now: float) -> None:
        self.left = True

    holding = False
    holds: tuple[bool, ...] = ()

    def hold_deliveries(self, on: bool, now: float) -> None:
        self.holding = on
        self.holds = (*self.holds, on)

    def submit(self, payload: bytes, now: float, *, service: ServiceLevel = ServiceLevel.AGREED
               ) -> None:
        self._maybe_raise("submit")
        if self.refuse_larger_than is not None and len(payload) > self.refuse_larger_than:
            raise ClientError("message_too_large", f"{len(payload)} > {self.refuse_larger_than}")
        if self.window is not None:
            if self.window <= 0:
                raise BackpressureError("fake window full")
            self.window -= 1
        self.submitted.append((payload, ServiceLevel(service)))

    def receive_datagram(self, data: bytes, now: float) -> bool:
        self._maybe_raise("receive_datagram")
        return False

    def handle_timer(self, now: float) -> None:
        self._maybe_raise("handle_timer")

    def next_timer(self) -> float | None:
        self._maybe_raise("next_timer")
        return self.timer_at

    def datagrams_to_send(self) -> list[bytes]:
        self._maybe_raise("datagrams_to_send")
        out, self.outbox = self.outbox, []
        return out

    def events(self) -> list[Event]:
        self._maybe_raise("events")
        out = list(self.pending)
        self.pending.clear()
        return out


def envelope(client: int, groups: list[str], payloads: list[bytes]) -> bytes:
    return encode_envelope(client, groups, payloads)


def raw_envelope(obj: Any) -> bytes:
    """Any msgpack object as envelope bytes (malformed ones included)."""
    return msgpack.packb(obj, use_bin_type=True)
