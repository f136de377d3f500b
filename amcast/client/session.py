"""The protocol state of one client connection, without I/O: both clients drive a ``Session``.

Theory of operation.

Numbers and ids. ``add`` numbers messages 0, 1, 2, ... per connection (the number is what
``send()`` returns) and appends each to the pending *frame* when it has the same groups
and service as the previous message (and the frame stays under ``max_frame_bytes``).
A ``send`` frame's ``id`` is the number of its first message: ids increase, and an error
frame's ``id`` names the messages it refuses. Every other request (``join``, ``leave``,
``status``, ``sync``) carries a negative id (-1, -2, ...), so no reply or error is ever
taken for another request's.

Confirmation. ``take`` encodes the pending frames, which move to the *in-flight* list
with their payloads. A ``sync`` request (``sync_frame``) asks the daemon to answer
``synced`` once it has handled every earlier frame of the connection; any error about
those frames comes before that reply, so the reply *confirms* every in-flight frame
written before the sync (accepted, or already reported refused), and the session forgets
them. Memory is bounded by the unconfirmed bytes, which the clients bound (``has_room``).
The blocking client keeps one sync in flight while anything is unconfirmed
(``sync_frame()`` after each write and each ``synced``), so confirmation trails the
writes by one round trip. The asyncio client syncs *lazily* (``sync_frame(lazy=True)``):
at once only when the in-flight bytes reach ``lazy_sync_bytes`` (an eighth of the bound),
otherwise after a short timer (``aio.LAZY_SYNC_S``), so a light sender that flushes every
message does not make the daemon answer, and itself wake up for, one ``synced`` per
message. Anything that waits (for room, ``drain``, ``sync``, ``close``) forces a sync.

Refusals. An error frame carrying a send frame's id refuses that frame whole: it leaves
the in-flight list and becomes a ``Refusal``, raised once by ``check()`` (the clients call
it from ``send``, ``flush``, ``drain``, ``sync`` and ``close``). ``undelivered`` (a
stopping daemon had accepted messages ``id + first ..`` of the frame but did not deliver
them; or, with ``count``, the primary component did not deliver ``count`` messages from
``id + first`` of a view this daemon was excluded from) becomes an ``Undelivered`` event and
is kept for the ``ConnectionClosed`` that follows. Without ``count`` its end is the next
frame's first message, from a history of frame starts (8 bytes a frame, at most
``2 * HISTORY`` kept; for an older frame the end given is the oldest start still known, a
conservative range).

Views, gaps and members. ``view`` frames become ``ViewChange`` events, ``gap`` frames
``OrderGap`` events and ``members`` frames ``MembersChange`` events, in frame order with
the deliveries; ``view`` and ``gap`` keep the last of each (``welcome`` sets both: its
``view``, ``members``, ``primary`` and ``gap``), ``members`` the last notice of each
group: the barriers (``wait_for_members``, ``wait_for_view``) wait on these, never
taking an event from the application's queue.

Self-discard. With ``self_discard`` the session drops, from each ``deliver`` frame of
its own daemon, the entries whose client is this connection (``welcome``'s ``node`` and
``client``): the daemon sends them, the application never sees them. Service aliases:
``fifo`` and ``reliable`` are sent as ``causal``, which implies both.

A daemon that predates ``sync`` (same protocol version) answers it with the error
``unknown_type`` carrying the sync's id, after handling every earlier frame in order:
that is taken as the ``synced`` reply.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections import deque
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..protocols.errors import ClientError
from ..socket_protocol import DEFAULT_MAX_FRAME_BYTES, SERVICES, encode_frame
from .errors import (
    ConnectionClosed,
    MessageBatch,
    MessagesRefused,
    Refusal,
    WouldBlock,
)
from .records import (
    DeliveredBatch,
    Event,
    MembersChange,
    OrderGap,
    Undelivered,
    ViewChange,
    batch_from_frame,
    gap_from_frame,
    members_from_frame,
    view_from_frame,
)

HISTORY = 1 << 17
PAYLOAD_OVERHEAD = 5  # msgpack bin32 header
FRAME_OVERHEAD = 96  # the send frame's other fields, generous
MAX_ERRORS = 64

SERVICE_ALIASES = {"reliable": "causal", "fifo": "causal"}
"""Service levels a client may name that the daemon provides through a stronger one:
``fifo`` (one sender's messages in sending order) and ``reliable`` (delivered, in no
particular order) are both implied by ``causal``, which is sent instead."""

CLIENT_SERVICES = (*SERVICES, *SERVICE_ALIASES)
"""Every service level ``send()`` accepts."""


def expected_members(expected: int | Iterable[str]) -> int | frozenset[str]:
    """``wait_for_members``' argument checked: a count (>= 1) or a set of names."""
    if isinstance(expected, bool) or not isinstance(expected, int | Iterable) \
            or isinstance(expected, bytes):
        raise TypeError("expected: a number of members or an iterable of client names")
    if isinstance(expected, int):
        if expected < 1:
            raise ValueError(f"expected: at least 1 member, not {expected}")
        return expected
    names = frozenset([expected] if isinstance(expected, str) else expected)
    if not names or not all(isinstance(n, str) for n in names):
        raise TypeError("expected: a non-empty iterable of client names (str)")
    return names


def members_satisfy(change: MembersChange | None, want: int | frozenset[str]) -> bool:
    """The group of ``change`` has ``want`` members (at least that many, or every name)."""
    if change is None:
        return False
    if isinstance(want, int):
        return len(change.members) >= want
    return want <= {name for _, _, name in change.members}


def view_satisfies(view: ViewChange | None, want: int | Collection[int]) -> bool:
    """``view`` is primary and has ``want`` nodes (at least that many, or every id)."""
    if view is None or not view.primary:
        return False
    if isinstance(want, int):
        return len(view.members) >= want
    return set(want) <= set(view.members)


@dataclass(frozen=True, slots=True)
class Reply:
    """The reply (or the error) to a request with a negative id."""

    id: int
    frame: dict[str, Any] | None
    error: ClientError | None


class _Frame:
    """Messages that share one ``send`` frame (``room``: the largest payload that still
    fits; ``nbytes``: payload bytes, set when the frame is written)."""

    __slots__ = ("clusters", "encoded_size", "first", "groups", "key_groups", "nbytes",
                 "payloads", "room", "service")

    def __init__(self, first: int, groups: tuple[str, ...], key_groups: object, service: str,
                 room: int, clusters: tuple[str, ...] | None = None) -> None:
        self.first = first
        self.clusters = clusters
        """Other clusters' names (``send(..., clusters=...)``); ``None``: this cluster."""
        self.groups = groups
        self.key_groups = key_groups  # the caller's object, for an identity fast path
        self.service = service
        self.payloads: list[bytes] = []
        self.nbytes = 0
        self.room = room
        self.encoded_size = 0

    def batch(self) -> MessageBatch:
        return MessageBatch(range(self.first, self.first + len(self.payloads)), self.groups,
                            self.service, self.payloads)


def as_payload(payload: object) -> bytes:
    if isinstance(payload, bytes | bytearray | memoryview):
        return bytes(payload)
    if isinstance(payload, str):
        raise TypeError("a payload is bytes, not str: encode the text first (text.encode())")
    raise TypeError(f"a payload is bytes, not {type(payload).__name__}")


def normalize_groups(groups: str | Sequence[str]) -> tuple[str, ...]:
    try:
        g = (groups,) if isinstance(groups, str) else tuple(groups)
    except TypeError:
        g = ()
    if not g or not all(isinstance(x, str) and x for x in g):
        raise ClientError("bad_field", "groups: one non-empty string or a non-empty list of them")
    return g


def normalize_clusters(clusters: str | Sequence[str] | None, welcome: dict[str, Any] | None
                       ) -> tuple[str, ...] | None:
    """``send``'s ``clusters`` checked against the daemon's federation (``welcome``'s
    ``cluster`` and ``clusters``): ``None`` when the message stays in this cluster (no
    ``clusters``, or this cluster alone), else the sorted names. ``ClientError``
    ``unknown_cluster`` for a name the federation does not have, ``bad_field`` for a
    malformed argument."""
    if clusters is None:
        return None
    c = tuple(x for x in clusters.split(",") if x) if isinstance(clusters, str) \
        else tuple(clusters)
    if not c or not all(isinstance(x, str) and x for x in c):
        raise ClientError("bad_field",
                          "clusters: a non-empty list of cluster names (or 'a,b')")
    own = "" if welcome is None else str(welcome.get("cluster") or "")
    known = () if welcome is None else welcome.get("clusters") or ()
    unknown = sorted(set(c) - set(known) - {own} if own else set(c))
    if unknown:
        raise ClientError("unknown_cluster",
                          f"clusters: {', '.join(unknown)} not in this daemon's federation "
                          f"({', '.join(known) or 'none: it runs no [federation]'})")
    if set(c) == {own}:
        return None
    return tuple(sorted(set(c)))


_NO_KEY = object()


def _key(groups: object) -> object:
    """The caller's groups object when immutable (identity then implies equality); else a
    sentinel no argument can be."""
    return groups if type(groups) is str or type(groups) is tuple else _NO_KEY


def merge(ranges: list[range]) -> list[range]:
    out: list[range] = []
    for r in sorted((r for r in ranges if len(r)), key=lambda r: r.start):
        if out and r.start <= out[-1].stop:
            if r.stop > out[-1].stop:
                out[-1] = range(out[-1].start, r.stop)
        else:
            out.append(r)
    return out


class Session:
    """Send bookkeeping, request ids and incoming-frame handling of one connection."""

    def __init__(self, *, max_unconfirmed_bytes: int, self_discard: bool = False) -> None:
        self.max_unconfirmed_bytes = max_unconfirmed_bytes
        self.self_discard = self_discard
        """Drop deliveries of this connection's own messages (see ``on_frame``)."""
        self.members: dict[str, MembersChange] = {}
        """The last ``members`` notice of each watched group."""
        self.watching: set[str] = set()
        """Groups joined with ``members=True`` (and not left since)."""
        self.max_frame_bytes = DEFAULT_MAX_FRAME_BYTES
        self.max_message_bytes = DEFAULT_MAX_FRAME_BYTES - FRAME_OVERHEAD
        self.welcome: dict[str, Any] | None = None
        self.view: ViewChange | None = None
        self.gap: OrderGap | None = None  # the last gap (from a gap frame or welcome)
        self.errors: deque[ClientError] = deque(maxlen=MAX_ERRORS)
        self.next_seq = 0  # the number the next message gets
        self.written_seq = 0  # messages < written_seq were handed to the socket
        self.synced_seq = 0  # messages < synced_seq were handled by the daemon
        self.pending_bytes = 0
        self.inflight_bytes = 0
        self.lazy_sync_bytes = max(1, max_unconfirmed_bytes // 8)
        """In-flight bytes from which a lazy ``sync_frame`` asks at once."""
        self._pending: list[_Frame] = []
        self._last: _Frame | None = None
        self._inflight: deque[_Frame] = deque()
        self._syncs: deque[tuple[int, int]] = deque()  # (request id, covers messages < n)
        self._starts = array("q")  # first message of each written send frame
        self._next_request = 0
        self.refused: list[Refusal] = []
        self.undelivered: list[range] = []
        self.closed: ClientError | None = None
        self.alarm = False  # closed, or refusals to raise: send() checks only this

    # ---- sending ----------------------------------------------------------------------
    def has_room(self, size: int) -> bool:
        used = self.pending_bytes + self.inflight_bytes
        return used == 0 or used + size <= self.max_unconfirmed_bytes

    def add(self, payload: bytes, groups: str | Sequence[str], service: str,
            clusters: str | Sequence[str] | None = None) -> int:
        """Queue one message; returns its number. Raises at once, queuing nothing: what
        ``check`` raises, ``WouldBlock`` without room, errors for bad arguments (an
        unknown cluster: ``unknown_cluster``)."""
        if self.alarm:
            self.check()
        if clusters is not None:
            return self._add_global(payload, groups, service,
                                    normalize_clusters(clusters, self.welcome))
        if type(payload) is not bytes:
            payload = as_payload(payload)
        size = len(payload)
        pending = self.pending_bytes
        used = pending + self.inflight_bytes
        if used + size > self.max_unconfirmed_bytes and used:
            raise WouldBlock(used, self.max_unconfirmed_bytes)
        last = self._last
        if (last is not None and groups is last.key_groups and service == last.service
                and size <= last.room and size <= self.max_message_bytes
                and last.clusters is None):
            last.payloads.append(payload)
            last.room -= size + PAYLOAD_OVERHEAD
        else:
            self._open(payload, groups, service)
        self.pending_bytes = pending + size
        seq = self.next_seq
        self.next_seq = seq + 1
        return seq

    def _add_global(self, payload: bytes, groups: str | Sequence[str], service: str,
                    clusters: tuple[str, ...] | None) -> int:
        if clusters is None:  # this cluster alone: exactly as without ``clusters``
            return self.add(payload, groups, service)
        if len(normalize_groups(groups)) != 1:
            raise ClientError("bad_field", "a cross-cluster message goes to one group")
        if type(payload) is not bytes:
            payload = as_payload(payload)
        size = len(payload)
        used = self.pending_bytes + self.inflight_bytes
        if used + size > self.max_unconfirmed_bytes and used:
            raise WouldBlock(used, self.max_unconfirmed_bytes)
        self._open(payload, groups, service, clusters)
        self.pending_bytes += size
        seq = self.next_seq
        self.next_seq = seq + 1
        return seq

    def _open(self, payload: bytes, groups: str | Sequence[str], service: str,
              clusters: tuple[str, ...] | None = None) -> None:
        size = len(payload)
        if size > self.max_message_bytes:
            raise ClientError("message_too_large",
                              f"{size}-byte payload > max_message_bytes {self.max_message_bytes}")
        if service not in SERVICES:
            if service not in SERVICE_ALIASES:
                raise ClientError("bad_service",
                                  f"service must be one of {', '.join(CLIENT_SERVICES)}")
            service = SERVICE_ALIASES[service]
        g = normalize_groups(groups)
        last = self._last
        if last is not None and g == last.groups and service == last.service \
                and size <= last.room and clusters == last.clusters:
            frame = last
            frame.key_groups = _key(groups)
        else:
            room = (self.max_frame_bytes - FRAME_OVERHEAD - PAYLOAD_OVERHEAD
                    - sum(len(x.encode()) + 5 for x in g))
            if size > room:
                raise ClientError("message_too_large", f"{size}-byte payload and the group "
                                  f"names exceed max_frame_bytes {self.max_frame_bytes}")
            frame = _Frame(self.next_seq, g, _key(groups), service, room, clusters)
            self._pending.append(frame)
            self._last = frame
        frame.payloads.append(payload)
        frame.room -= size + PAYLOAD_OVERHEAD

    def take(self) -> list[tuple[bytes, _Frame]]:
        """Encode the pending frames (they become in-flight), in order."""
        pending = self._pending
        if not pending:
            return []
        out = []
        inflight = self._inflight
        starts = self._starts
        single = self.pending_bytes if len(pending) == 1 else 0
        for f in pending:
            fields = {"t": "send", "id": f.first, "groups": f.groups,
                      "service": f.service, "payloads": f.payloads}
            if f.clusters is not None:
                fields["clusters"] = f.clusters
            data = encode_frame(fields)
            f.encoded_size = len(data)
            f.nbytes = single or sum(map(len, f.payloads))
            out.append((data, f))
            inflight.append(f)
            starts.append(f.first)
            self.inflight_bytes += f.nbytes
        self.written_seq = self.next_seq
        self._pending = []
        self._last = None
        self.pending_bytes = 0
        if len(starts) > 2 * HISTORY:
            del starts[:HISTORY]
        return out

    def unwrite(self, frames: list[_Frame]) -> None:
        """Frames ``take`` returned that never fully reached the socket (the last ones):
        they go back to pending, to be reported as not sent."""
        if not frames:
            return
        for f in reversed(frames):
            if self._inflight and self._inflight[-1] is f:
                self._inflight.pop()
                self.inflight_bytes -= f.nbytes
                if self._starts and self._starts[-1] == f.first:
                    self._starts.pop()
        self._pending[:0] = frames
        self.pending_bytes += sum(f.nbytes for f in frames)
        self.written_seq = frames[0].first

    def request_id(self) -> int:
        self._next_request -= 1
        return self._next_request

    def sync_frame(self, force: bool = False, *, lazy: bool = False) -> bytes:
        """A ``sync`` request when written messages are not covered by one yet; without
        ``force``, only when no sync is in flight (one round trip at a time); ``lazy``,
        only once the in-flight bytes reach ``lazy_sync_bytes`` (``unsynced`` then says
        that one is still owed)."""
        if not self.unsynced or (self._syncs and not force):
            return b""
        if lazy and self.inflight_bytes < self.lazy_sync_bytes:
            return b""
        rid = self.request_id()
        self._syncs.append((rid, self.written_seq))
        return encode_frame({"t": "sync", "id": rid})

    @property
    def sync_pending(self) -> bool:
        return bool(self._syncs)

    @property
    def unsynced(self) -> bool:
        """Messages were written that no sync, in flight or answered, covers."""
        covered = self._syncs[-1][1] if self._syncs else self.synced_seq
        return self.written_seq > covered

    @property
    def confirmed(self) -> bool:
        """Every message added so far was handled by the daemon (or refused)."""
        return self.synced_seq >= self.next_seq

    def unconfirmed_count(self) -> int:
        return sum(len(f.payloads) for f in self._inflight) + sum(
            len(f.payloads) for f in self._pending)

    # ---- incoming frames --------------------------------------------------------------
    def on_frame(self, frame: dict[str, Any]) -> Event | Reply | None:
        """Handle one frame; returns an event (delivery, view, gap, undelivered), a
        request's reply, or None."""
        kind = frame.get("t")
        if kind == "deliver":
            batch = batch_from_frame(frame)
            if self.self_discard and self.welcome is not None:
                return self._discard_own(batch)
            return batch
        if kind == "view":
            self.view = view_from_frame(frame)
            return self.view
        if kind == "gap":
            self.gap = gap_from_frame(frame)
            return self.gap
        if kind == "members":
            change = members_from_frame(frame)
            self.members[change.group] = change
            return change
        rid = frame.get("id")
        if type(rid) is not int:
            rid = None
        if kind == "synced":
            if rid is not None:
                self._on_synced(rid)
            return None
        if kind == "error":
            return self._on_error(frame, rid)
        if kind == "welcome":
            self._on_welcome(frame)
            return None
        if rid is not None and rid < 0:
            return Reply(rid, frame, None)
        return None

    def _discard_own(self, batch: DeliveredBatch) -> DeliveredBatch | None:
        """``batch`` without this connection's own messages (None when nothing is left)."""
        assert self.welcome is not None
        if batch.sender != self.welcome.get("node") or (
                batch.cluster and batch.cluster != self.welcome.get("cluster")):
            return batch
        me = self.welcome.get("client")
        kept = [b for b in batch.batches if b[0] != me]
        if len(kept) == len(batch.batches):
            return batch
        return replace(batch, batches=kept) if kept else None

    def _on_welcome(self, frame: dict[str, Any]) -> None:
        self.welcome = frame
        self.max_frame_bytes = int(frame.get("max_frame_bytes", self.max_frame_bytes))
        self.max_message_bytes = int(frame.get("max_message_bytes", self.max_message_bytes))
        self.view = view_from_frame(frame)
        gap = frame.get("gap")
        if isinstance(gap, dict) and "view" in gap:
            self.gap = gap_from_frame(gap)

    def _on_synced(self, rid: int) -> None:
        syncs = self._syncs
        if not any(r == rid for r, _ in syncs):
            return
        covered = 0
        while syncs:
            r, covered = syncs.popleft()
            if r == rid:
                break
        inflight = self._inflight
        while inflight and inflight[0].first < covered:
            self.inflight_bytes -= inflight.popleft().nbytes
        if covered > self.synced_seq:
            self.synced_seq = covered

    def _on_error(self, frame: dict[str, Any],
                  rid: int | None) -> Reply | Undelivered | None:
        code = str(frame.get("code", "error"))
        detail = str(frame.get("detail", ""))
        if frame.get("fatal"):
            self.fail(code, detail)
            return None
        if rid is None:
            self.errors.append(ClientError(code, detail))
            return None
        if rid >= 0:
            return self._on_send_error(rid, code, detail, frame)
        if code == "unknown_type" and any(r == rid for r, _ in self._syncs):
            self._on_synced(rid)  # a daemon without sync: see the module docstring
            return None
        return Reply(rid, None, ClientError(code, detail))

    def _on_send_error(self, rid: int, code: str, detail: str,
                       frame: dict[str, Any]) -> Undelivered | None:
        if code == "undelivered":
            first = frame.get("first", 0)
            first = first if type(first) is int and first >= 0 else 0
            count = frame.get("count")
            if type(count) is int and count >= 0:
                end = rid + first + count
            else:
                i = bisect_right(self._starts, rid)
                end = self._starts[i] if i < len(self._starts) else self.written_seq
            if rid + first >= end:
                return None
            messages = range(rid + first, end)
            self.undelivered.append(messages)
            outcome = frame.get("outcome")
            reason = frame.get("reason")
            clusters = frame.get("clusters")
            names = (tuple(sorted(c for c in clusters if type(c) is str))
                     if type(clusters) is list else ())
            return Undelivered(messages, detail, outcome if type(outcome) is str else "",
                               reason if type(reason) is str else "", names)
        for f in self._inflight:
            if f.first == rid:
                self._inflight.remove(f)
                self.inflight_bytes -= f.nbytes
                self.refused.append(Refusal(code, detail, f.batch()))
                self.alarm = True
                return None
        self.errors.append(ClientError(code, f"{detail} (send frame {rid})"))
        return None

    # ---- the end, and what the application must hear ---------------------------------
    def fail(self, code: str, detail: str) -> None:
        if self.closed is None:
            self.closed = ClientError(code, detail)
            self.alarm = True

    def closed_error(self) -> ConnectionClosed:
        assert self.closed is not None
        unknown = [range(f.first, f.first + len(f.payloads)) for f in self._inflight]
        return ConnectionClosed(
            self.closed.code, self.closed.detail,
            unsent=[f.batch() for f in self._pending],
            unknown=merge(unknown + self.undelivered), refused=list(self.refused),
        )

    def check(self) -> None:
        """Raise what the application has not heard yet: the end, or refusals (once)."""
        if self.closed is not None:
            raise self.closed_error()
        if self.refused:
            refused, self.refused = self.refused, []
            self.alarm = False
            raise MessagesRefused(refused)
        self.alarm = False


class SessionState:
    """What both clients (asyncio and blocking) tell about their session: the daemon's
    ``welcome``, the last view and gap, errors about no request, and message counts."""

    _session: Session

    @property
    def welcome(self) -> dict[str, Any]:
        return self._session.welcome or {}

    @property
    def node(self) -> int:
        return int(self.welcome["node"])

    @property
    def client_id(self) -> int:
        return int(self.welcome["client"])

    @property
    def cluster(self) -> str:
        """The daemon's cluster in a federation (``""``: it runs none)."""
        return str(self.welcome.get("cluster") or "")

    @property
    def clusters(self) -> tuple[str, ...]:
        """Every cluster of the daemon's federation (``()``: it runs none): what
        ``send(..., clusters=...)`` may name."""
        return tuple(map(str, self.welcome.get("clusters") or ()))

    @property
    def view(self) -> ViewChange | None:
        """The last view (from ``welcome`` or a ``view`` frame)."""
        return self._session.view

    @property
    def gap(self) -> OrderGap | None:
        """The last order gap (from a ``gap`` frame, or ``welcome`` when the daemon
        rejoined before this client connected); None when there was none."""
        return self._session.gap

    def members(self, group: str) -> MembersChange | None:
        """The last ``members`` notice of ``group`` (joined with ``members=True``), or None
        before the first: who is in the group now, as far as this client has read."""
        return self._session.members.get(group)

    @property
    def watching(self) -> frozenset[str]:
        """The groups joined with ``members=True`` (and not left since)."""
        return frozenset(self._session.watching)

    @property
    def unconfirmed_bytes(self) -> int:
        """Payload bytes of the messages amcastd has not confirmed yet."""
        s = self._session
        return s.pending_bytes + s.inflight_bytes

    @property
    def max_unconfirmed_bytes(self) -> int:
        """The bound on ``unconfirmed_bytes`` (``send`` waits, or raises, past it)."""
        return self._session.max_unconfirmed_bytes

    @property
    def self_discard(self) -> bool:
        """Deliveries of this connection's own messages are dropped (a ``connect``
        option): the application never reads them back."""
        return self._session.self_discard

    @property
    def errors(self) -> deque[ClientError]:
        """Errors the daemon reported about no particular request (the last 64)."""
        return self._session.errors

    @property
    def sent(self) -> int:
        """Messages accepted by ``send()`` so far (the next message's number)."""
        return self._session.next_seq

    @property
    def confirmed(self) -> int:
        """Every message numbered below this was handled by amcastd (accepted or refused)."""
        return self._session.synced_seq
