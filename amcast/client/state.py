"""State transfer over ordered messages: how a member that joins late, or whose daemon
missed part of the total order (``OrderGap``), gets the state the others hold.

The pattern (JGroups' STATE_TRANSFER, Spread applications): the members of one group
keep a state built from the messages of that group, delivered in total order. The
application gives ``snapshot() -> bytes`` and ``restore(bytes)``; ``StateTransfer`` does
the rest, over messages of the group itself, and hands the application's messages of
the group to its ``apply(Delivery)`` in order (their ``payload`` unwrapped):

1. A member that has no state (it joined and the group was not empty, or it saw an
   ``OrderGap``) multicasts a *state request* (ordered, like every message here).
2. An existing member that holds the state delivers the request at the same place of
   the total order as everyone, takes ``snapshot()`` right there (its state as of the
   request's position) and multicasts it (in parts when larger than a message may be).
3. The newcomer discards the group's messages ordered before its request (the snapshot
   holds their effect), keeps those ordered after it, and when the whole snapshot has
   arrived calls ``restore(snapshot)`` and hands out the kept messages, in order: from
   then on it applies messages like every member. Because ``apply`` is called from
   within ``handle``, a snapshot is always taken after exactly the messages ordered
   before the request were applied.

A member whose first ``members`` notice of the group shows it alone starts *ready*,
with the application's initial state (it founds the group's state). Every member that
holds the state answers a request and the first complete snapshot wins (``ask_one``:
the request names one responder, the lowest other member by node and client id, and
only that one answers). If no snapshot is complete ``retry_after`` seconds later (the
responder left, or holds no state either) the member asks again, of every member; when
it is alone in the group by then, it becomes ready with the state it has. The group
must be joined with ``members=True``; the application's messages are sent wrapped
(``wrap``), and ``handle`` unwraps them.

``StateTransfer.handle`` is sans-IO (events in; ``apply``/``restore`` calls and
``outbox`` out); ``next`` (blocking client) and ``next_async`` (asyncio client) read one
event, handle it and send what it produced. Deliveries of other groups are returned
unchanged, for the application.
A client with ``self_discard`` cannot use it: it must see its own request.
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from ..protocols.errors import ClientError
from .errors import ClientTimeout
from .records import DeliveredBatch, Delivery, Event, MembersChange, OrderGap

if TYPE_CHECKING:
    from .aio import Client
    from .blocking import BlockingClient

APP = 0
REQUEST = 1
STATE = 2
NONCE_BYTES = 16
_REQ = struct.Struct(">B16sbqq")  # tag, nonce, has responder, responder node, client
_PART = struct.Struct(">B16sII")  # tag, nonce, part, parts
DEFAULT_PART_BYTES = 512 * 1024
"""Snapshot bytes per message (a message is at most ``max_message_bytes``, 1 MiB less
a little by default)."""

JOINING = "joining"
REQUESTING = "requesting"
READY = "ready"


@dataclass(slots=True)
class _Parts:
    parts: list[bytes | None]
    have: int = 0


@dataclass(slots=True)
class TransferStats:
    """What the state transfer did so far (for logs and tests)."""

    requests: int = 0
    """State requests this member multicast."""
    snapshots_sent: int = 0
    """Snapshots this member took and multicast for another member."""
    restored: int = 0
    """Snapshots this member restored."""
    discarded: int = 0
    """Application messages discarded: ordered before this member's request."""
    replayed: int = 0
    """Application messages kept while waiting for the snapshot, handed out after it."""
    gaps: int = 0
    """``OrderGap`` events that made this member ask for the state again."""
    snapshot_bytes: list[int] = field(default_factory=list)
    """Size of each snapshot restored."""


class StateTransfer:
    """One member's side of state transfer in ``group`` (see the module docstring).

    ``snapshot``, ``restore`` and ``apply`` are the application's; ``service`` the level
    of every
    message of the protocol (``agreed`` or ``safe``: the pattern needs the total order);
    ``me``: this client's ``(node, client id)`` (set from the client by ``next`` and
    ``next_async`` when not given)."""

    def __init__(self, group: str, snapshot: Callable[[], bytes],
                 restore: Callable[[bytes], None], apply: Callable[[Delivery], None], *,
                 service: str = "agreed", retry_after: float = 5.0, ask_one: bool = False,
                 part_bytes: int = DEFAULT_PART_BYTES,
                 me: tuple[int, int] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if service not in ("agreed", "safe"):
            raise ValueError("state transfer needs the total order: service agreed or safe")
        if part_bytes < 1:
            raise ValueError("part_bytes must be positive")
        self.group = group
        self.snapshot = snapshot
        self.restore = restore
        self.apply = apply
        self.ask_one = ask_one
        self.service = service
        self.retry_after = retry_after
        self.part_bytes = part_bytes
        self.me = me
        self.clock = clock
        self.state = JOINING
        """``joining`` (no ``members`` notice yet), ``requesting`` or ``ready``."""
        self.outbox: list[bytes] = []
        """Payloads to multicast to ``group`` at ``service`` (``next``/``next_async`` do)."""
        self.stats = TransferStats()
        self._nonce = b""
        self._requested_at = 0.0
        self._request_seen = False
        self._kept: list[Delivery] = []
        self._parts: dict[tuple[int, int], _Parts] = {}
        self._members: list[tuple[int, int, str]] = []

    # ---- the application's side -------------------------------------------------------
    @property
    def ready(self) -> bool:
        """This member holds the group's state (the application's messages are applied)."""
        return self.state == READY

    @staticmethod
    def wrap(payload: bytes) -> bytes:
        """An application message as it is sent in the group (``handle`` unwraps it)."""
        return b"\x00" + payload

    # ---- events in ------------------------------------------------------------------
    def handle(self, event: Event) -> list[Delivery]:
        """Handle one event: the group's application messages go to ``apply`` (now, or
        after the snapshot); returns the deliveries of other groups. May queue messages
        in ``outbox``."""
        other: list[Delivery] = []
        if isinstance(event, DeliveredBatch):
            for d in event:
                if self.group in d.groups:
                    self._on_delivery(d)
                else:
                    other.append(d)
        elif isinstance(event, MembersChange) and event.group == self.group:
            self._on_members(event)
        elif isinstance(event, OrderGap):
            self._on_gap()
        return other

    def due(self, now: float | None = None) -> float | None:
        """Seconds until a request without a complete snapshot is asked again (0: now),
        or None when none is waiting."""
        if self.state != REQUESTING:
            return None
        now = self.clock() if now is None else now
        return max(0.0, self._requested_at + self.retry_after - now)

    def tick(self, now: float | None = None) -> None:
        """Ask again if the current request is overdue (see ``due``): of every member
        that holds the state, or, when this member is now alone in the group, become
        ready with the application's current state."""
        left = self.due(now)
        if left is None or left > 0:
            return
        if self.me is not None and self._alone():
            self._become_ready()
            return
        self._request(responder=None)

    # ---- the protocol ----------------------------------------------------------------
    def _alone(self) -> bool:
        return all((n, c) == self.me for n, c, _ in self._members)

    def _on_members(self, change: MembersChange) -> None:
        self._members = list(change.members)
        if self.state != JOINING or self.me is None:
            return
        if not any((n, c) == self.me for n, c, _ in change.members):
            return
        if self._alone():
            self._become_ready()  # what came before the notice (a rejoining daemon) too
            return
        others = sorted((n, c) for n, c, _ in change.members if (n, c) != self.me)
        self._request(responder=others[0] if self.ask_one else None)

    def _on_gap(self) -> None:
        if self.state == JOINING:
            return  # the first members notice decides
        self.stats.gaps += 1
        self._request(responder=None)

    def _request(self, responder: tuple[int, int] | None) -> None:
        self.state = REQUESTING
        self._nonce = os.urandom(NONCE_BYTES)
        self._requested_at = self.clock()
        self._request_seen = False
        self.stats.discarded += len(self._kept)
        self._kept = []
        self._parts = {}
        node, client = responder if responder is not None else (0, 0)
        self.outbox.append(_REQ.pack(REQUEST, self._nonce, responder is not None, node, client))
        self.stats.requests += 1

    def _become_ready(self) -> None:
        self.state = READY
        self._parts = {}
        kept, self._kept = self._kept, []
        self.stats.replayed += len(kept)
        for d in kept:
            self.apply(d)

    def _on_delivery(self, d: Delivery) -> None:
        payload = d.payload
        if not payload:
            return
        tag = payload[0]
        if tag == APP:
            app = replace(d, payload=payload[1:])
            if self.state == READY:
                self.apply(app)
            elif self.state == JOINING or self._request_seen:
                self._kept.append(app)
            else:
                self.stats.discarded += 1
        elif tag == REQUEST and len(payload) == _REQ.size:
            _, nonce, named, node, client = _REQ.unpack(payload)
            if nonce == self._nonce and self.state == REQUESTING:
                self._request_seen = True
            elif (self.state == READY and (d.sender, d.client) != self.me
                  and (not named or (node, client) == self.me)):
                self._send_snapshot(nonce)
        elif tag == STATE and len(payload) >= _PART.size:
            _, nonce, part, parts = _PART.unpack_from(payload)
            if nonce == self._nonce and self.state == REQUESTING and self._request_seen:
                self._on_part((d.sender, d.client), part, parts, payload[_PART.size:])

    def _send_snapshot(self, nonce: bytes) -> None:
        data = self.snapshot()
        step = self.part_bytes
        chunks = [data[i:i + step] for i in range(0, len(data), step)] or [b""]
        for i, chunk in enumerate(chunks):
            self.outbox.append(_PART.pack(STATE, nonce, i, len(chunks)) + chunk)
        self.stats.snapshots_sent += 1

    def _on_part(self, sender: tuple[int, int], part: int, parts: int,
                 chunk: bytes) -> None:
        if parts < 1 or part >= parts:
            return
        got = self._parts.get(sender)
        if got is None or len(got.parts) != parts:
            got = self._parts[sender] = _Parts([None] * parts)
        if got.parts[part] is None:
            got.parts[part] = chunk
            got.have += 1
        if got.have < parts:
            return
        data = b"".join(p for p in got.parts if p is not None)
        self.restore(data)
        self.stats.restored += 1
        self.stats.snapshot_bytes.append(len(data))
        self._become_ready()

    # ---- drivers ---------------------------------------------------------------------
    def _attach(self, client: Client | BlockingClient) -> None:
        """Check that ``client`` can carry the transfer; take ``me`` from it."""
        if client.self_discard:
            raise ClientError("self_discard", "state transfer needs the client's own "
                              "messages: connect without self_discard")
        if self.group not in client.watching:
            raise ClientError("not_watching", f"join({self.group!r}, members=True) "
                              "before the state transfer reads its events")
        if self.me is None:
            self.me = (client.node, client.client_id)

    def _wait(self, timeout: float | None) -> tuple[float | None, bool]:
        """How long to wait for the next event, and whether that is a retry's wait."""
        due = self.due()
        if due is None or (timeout is not None and timeout <= due):
            return timeout, False
        return due, True

    def next(self, client: BlockingClient, timeout: float | None = 10.0) -> Event:
        """Read one event from ``client`` (up to ``timeout``: ``ClientTimeout``), handle
        it (``apply`` gets the group's messages) and send what it produced; returns the
        event. Asks again meanwhile when a request is overdue (``tick``)."""
        self._attach(client)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            wait, retry = self._wait(left)
            try:
                event: Event | None = client.next_event(wait)
            except ClientTimeout:
                if not retry:
                    raise
                event = None
            if event is None:
                self.tick()
            else:
                self.handle(event)
            for p in self._take():
                client.send(p, self.group, self.service)
            if event is not None:
                return event

    async def next_async(self, client: Client, timeout: float | None = None) -> Event:
        """``next`` for the asyncio client (``timeout`` None waits for ever)."""
        self._attach(client)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            wait, retry = self._wait(left)
            try:
                event: Event | None = await client.next_event(wait)
            except ClientTimeout:
                if not retry:
                    raise
                event = None
            if event is None:
                self.tick()
            else:
                self.handle(event)
            for p in self._take():
                await client.send_wait(p, self.group, self.service)
            if event is not None:
                return event

    def _take(self) -> list[bytes]:
        out, self.outbox = self.outbox, []
        return out
