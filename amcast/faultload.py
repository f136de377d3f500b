"""Load under faults: recording clients, and the virtual-synchrony verdict on real daemons.

Theory of operation. A ``Recorder`` is one client of one daemon that speaks the socket
protocol (``amcast.socket_protocol`` frames) itself, so it sees every frame the daemon
writes: ``deliver``, ``view`` (with ``primary``, ``previous``, ``left``, ``excluded``),
``gap``, ``error`` (a refused frame, or ``undelivered`` with ``first`` and ``count``),
and the end of the connection, each timestamped on arrival (``time.monotonic()``, the
clock ``LocalCluster``'s fault helpers return). It sends a paced load: every ``tick`` the
messages due at ``rate`` per second go out as one ``send`` frame whose ``id`` is the
number of its first message (0, 1, 2, ... per connection); every payload carries
``(tag, number, send time)``, so a message is recognised wherever it is delivered.
When its daemon stops reading (backpressure, a paused daemon) the sender waits and does
not catch up: the load is what the cluster accepts, never a burst.

``FaultRun`` holds a ``LocalCluster`` and its recorders (``connect`` a client to a node,
also after a restart), starts and stops the load (``stop_load`` ends with a ``sync``
per client still connected: every frame it wrote was handled, accepted or refused),
waits on the recorders' frames (``wait_view``: a primary view of given members at given
clients; ``settle``: every client still connected in one primary view, every message
owed delivered), all bounded in time and woken by arriving frames, never sleep-polled.

``verdict`` judges the histories of a run by the guarantees of docs/membership.md:

- views: one view id names the same members at every client; ids increase at each;
- within a view: positions are contiguous and start at 0 at a client that saw the
  view's ``view`` frame; the clients whose daemon *completed* the view (installed a
  primary view whose ``previous`` is it, or is still in it once the run settled)
  delivered the identical sequence; a client whose daemon did not complete it (killed,
  paused, cut off) delivered that sequence's prefix, except possibly a tail of
  ``agreed`` messages (non-uniform agreed delivery: counted and allowed);
- across views: a message is delivered in one view only, at most once by each client;
- exactly once: every message of a client that stayed connected and that was not
  reported back to it (``undelivered``, refused) is delivered in exactly one view, by
  every client whose daemon completed that view; a message reported back is delivered by
  no daemon that completed a view (unless the report said its outcome is unknown:
  ``undelivered`` with ``outcome`` ``unknown``).
- gaps: a ``gap`` frame's ``after`` is the ``(view, position)`` of the last message the
  client saw before it (``gap_problems``), where it saw one.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import struct
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from . import socket_protocol as sp
from .localcluster import LocalCluster

PAYLOAD = struct.Struct(">IId")  # tag, number, send time (monotonic)
DELIVER, VIEW, GAP, CLOSED = range(4)
Key = tuple[int, int]  # (tag, number): one message of one recorder


@dataclass
class Notice:
    """A ``view`` or ``gap`` frame, or the end of the connection, as one client saw it."""

    at: float
    kind: int  # VIEW, GAP or CLOSED
    frame: dict[str, Any]

    @property
    def primary(self) -> bool:
        return self.kind == VIEW and bool(self.frame.get("primary", True))


class Recorder:
    """One client of one daemon: paced sender, recorder of every frame it receives.

    ``keep``: record every delivered message (the verdict needs them); without it only
    ``arrivals`` are kept, (time, sending node, messages) per ``deliver`` frame, which
    a long benchmark clears as it goes."""

    def __init__(self, node: int, tag: int, *, group: str = "g", keep: bool = True,
                 on_frame: Callable[[Recorder, int], None] | None = None,
                 on_notice: Callable[[Recorder, Notice], None] | None = None) -> None:
        self.node = node
        self.tag = tag
        self.group = group
        self.keep = keep
        self.on_frame = on_frame
        self.on_notice = on_notice
        self.welcome: dict[str, Any] = {}
        self.timeline: list[tuple[Any, ...]] = []
        self.notices: list[Notice] = []
        self.arrivals: list[tuple[float, int, int]] = []  # (at, sending node, messages)
        self.delivered = 0
        self.next_number = 0
        self.frames: dict[int, int] = {}  # send frame id -> its message count
        self.reported: set[int] = set()  # numbers reported undelivered or refused
        self.unknown: set[int] = set()  # of them, undelivered with an unknown outcome
        self.delivered_away: set[int] = set()
        """Numbers reported ``undelivered`` with outcome ``delivered``: the primary
        component delivered them while this client's daemon was away (not reported
        back: they must be delivered exactly once, though not to this client)."""
        self.refusals: list[dict[str, Any]] = []
        self.errors: list[dict[str, Any]] = []
        self.closed_at: float | None = None
        self.close_code = ""
        self.connected_at = 0.0
        self._decoder = sp.FrameDecoder(1 << 30)
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._read_task: asyncio.Task[None] | None = None
        self._load_task: asyncio.Task[None] | None = None
        self._syncs: dict[int, asyncio.Future[None]] = {}
        self._next_sync = 0

    # ---- connection --------------------------------------------------------------
    async def open(self, path: str, timeout: float = 10.0) -> None:
        reader, writer = await asyncio.wait_for(asyncio.open_unix_connection(path), timeout)
        self._reader, self._writer = reader, writer
        writer.write(sp.encode_frame({"t": "hello", "v": sp.PROTOCOL_VERSION,
                                      "name": f"faultload-{self.tag}"}))
        writer.write(sp.encode_frame({"t": "join", "groups": [self.group], "id": -1}))
        got_groups = asyncio.get_running_loop().create_future()
        self._syncs[-1] = got_groups
        self.connected_at = time.monotonic()
        self._read_task = asyncio.create_task(self._read_loop())
        await asyncio.wait_for(asyncio.shield(got_groups), timeout)

    @property
    def open_(self) -> bool:
        return self.closed_at is None

    async def _read_loop(self) -> None:
        assert self._reader is not None
        try:
            while True:
                data = await self._reader.read(1 << 18)
                if not data:
                    break
                at = time.monotonic()
                for frame in self._decoder.feed(data):
                    if isinstance(frame, dict):
                        self._on_frame(frame, at)
        except (ConnectionError, OSError):
            pass
        self._closed(time.monotonic(), self.close_code or "closed")

    def _closed(self, at: float, code: str) -> None:
        if self.closed_at is not None:
            return
        self.closed_at = at
        self.close_code = code
        self.timeline.append((CLOSED, at, code))
        notice = Notice(at, CLOSED, {"code": code})
        self.notices.append(notice)
        for fut in self._syncs.values():
            if not fut.done():
                fut.set_exception(ConnectionError(f"connection to node {self.node} closed "
                                                  f"({code})"))
        if self.on_notice is not None:
            self.on_notice(self, notice)
        if self.on_frame is not None:
            self.on_frame(self, CLOSED)
        if self._writer is not None:
            self._writer.close()

    def _on_frame(self, f: dict[str, Any], at: float) -> None:
        kind = f.get("t")
        if kind == "deliver":
            self._on_deliver(f, at)
            code = DELIVER
        elif kind in ("view", "gap"):
            code = VIEW if kind == "view" else GAP
            notice = Notice(at, code, f)
            self.notices.append(notice)
            self.timeline.append((code, at, f))
            if self.on_notice is not None:
                self.on_notice(self, notice)
        elif kind == "welcome":
            self.welcome = f
            return
        elif kind in ("synced", "groups"):
            fut = self._syncs.pop(f.get("id", -1), None)
            if fut is not None and not fut.done():
                fut.set_result(None)
            return
        elif kind == "error":
            self._on_error(f)
            return
        else:
            return
        if self.on_frame is not None:
            self.on_frame(self, code)

    def _on_deliver(self, f: dict[str, Any], at: float) -> None:
        view, base, sender = f["view"], f["position"], f["sender"]
        n = 0
        for _client, _groups, index, payloads in f["batches"]:
            n += len(payloads)
            if self.keep:
                for i, p in enumerate(payloads):
                    tag, number, _sent = PAYLOAD.unpack_from(p)
                    pos = None if base is None else base + index + i
                    self.timeline.append((DELIVER, at, view, pos, tag, number))
        self.delivered += n
        self.arrivals.append((at, sender, n))

    def _on_error(self, f: dict[str, Any]) -> None:
        ref = f.get("id")
        code = f.get("code", "")
        if f.get("fatal"):
            self.close_code = code
        if type(ref) is int and ref >= 0 and ref in self.frames:
            size = self.frames[ref]
            if code == "undelivered":
                first = int(f.get("first", 0))
                count = int(f.get("count", size - first))
                if f.get("outcome") == "delivered":
                    self.delivered_away.update(range(ref + first, ref + first + count))
                    return
                self.reported.update(range(ref + first, ref + first + count))
                if f.get("outcome") == "unknown":
                    self.unknown.update(range(ref + first, ref + first + count))
            else:
                self.refusals.append(f)
                self.reported.update(range(ref, ref + size))
        else:
            self.errors.append(f)

    # ---- sending -------------------------------------------------------------------
    def send(self, count: int, *, service: str = "agreed", size: int = 32) -> None:
        """One ``send`` frame of ``count`` messages (numbered on)."""
        if self._writer is None or self.closed_at is not None or count <= 0:
            return
        first = self.next_number
        now = time.monotonic()
        pad = b"x" * max(0, size - PAYLOAD.size)
        payloads = [PAYLOAD.pack(self.tag, first + i, now) + pad for i in range(count)]
        self.frames[first] = count
        self.next_number = first + count
        self._write(sp.encode_frame({"t": "send", "id": first, "groups": [self.group],
                                     "service": service, "payloads": payloads}))

    def _write(self, data: bytes) -> None:
        """Write, or note the end: the daemon may have closed the socket before the read
        loop saw it (what was written then is delivered nowhere or of unknown outcome:
        such a client is not one that stayed connected)."""
        assert self._writer is not None
        try:
            self._writer.write(data)
        except (RuntimeError, ConnectionError, OSError):
            self._closed(time.monotonic(), self.close_code or "closed")

    def start_load(self, rate: float, *, tick: float = 0.01, service: str = "agreed",
                   size: int = 32) -> None:
        self._load_task = asyncio.create_task(self._load(rate, tick, service, size))

    async def _load(self, rate: float, tick: float, service: str, size: int) -> None:
        loop = asyncio.get_running_loop()
        start = loop.time()
        done = 0.0
        cap = max(1, int(rate * tick * 2))
        while self.closed_at is None and self._writer is not None:
            now = loop.time()
            due = (now - start) * rate - done
            if due < 1:
                await asyncio.sleep(tick)
                continue
            n = min(int(due), cap)
            done += n if n == int(due) else due  # never catch up after a stall
            self.send(n, service=service, size=size)
            try:
                await self._writer.drain()
            except (RuntimeError, ConnectionError, OSError):
                self._closed(time.monotonic(), self.close_code or "closed")
                return
            await asyncio.sleep(tick)

    async def stop_load(self) -> None:
        task, self._load_task = self._load_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def sync(self, timeout: float) -> None:
        """Every frame written so far was handled by the daemon (``ConnectionError`` if
        the connection ends first, ``TimeoutError`` after ``timeout``)."""
        if self._writer is None or self.closed_at is not None:
            raise ConnectionError(f"connection to node {self.node} closed ({self.close_code})")
        self._next_sync -= 1
        rid = self._next_sync - 1  # -1 is the join
        fut = asyncio.get_running_loop().create_future()
        self._syncs[rid] = fut
        self._write(sp.encode_frame({"t": "sync", "id": rid}))
        await asyncio.wait_for(fut, timeout)

    async def close(self) -> None:
        await self.stop_load()
        if self._writer is not None and self.closed_at is None:
            self._writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._writer.wait_closed(), 5)
        if self._read_task is not None:
            self._read_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._read_task

    # ---- what it saw ---------------------------------------------------------------
    def views(self) -> list[Notice]:
        return [n for n in self.notices if n.kind == VIEW]

    def gaps(self) -> list[Notice]:
        return [n for n in self.notices if n.kind == GAP]

    def first_view(self, members: Iterable[int], after: float = 0.0) -> Notice | None:
        want = sorted(members)
        for n in self.notices:
            if n.primary and n.at >= after and sorted(n.frame["members"]) == want:
                return n
        return None

    def last_view(self) -> Notice | None:
        views = self.views()
        return views[-1] if views else None

    def current_view(self) -> tuple[int, bool] | None:
        """``(view id, primary)`` of the view this client is in: the last ``view``
        frame's, else the ``welcome``'s (no view changed since it connected)."""
        last = self.last_view()
        if last is not None:
            return last.frame["view"], last.primary
        if self.welcome.get("view"):
            return self.welcome["view"], bool(self.welcome.get("primary"))
        return None

    def delivered_keys(self) -> set[Key]:
        return {(e[4], e[5]) for e in self.timeline if e[0] == DELIVER}

    def __repr__(self) -> str:
        return f"client {self.tag} of node {self.node}"


# ---------------------------------------------------------------------------- the run
class FaultRun:
    """A ``LocalCluster`` under a paced load from recording clients."""

    def __init__(self, cluster: LocalCluster, *, rate: float = 200.0, service: str = "agreed",
                 size: int = 32, keep: bool = True,
                 on_notice: Callable[[Recorder, Notice], None] | None = None) -> None:
        self.cluster = cluster
        self.rate = rate
        self.service = service
        self.size = size
        self.keep = keep
        self.on_notice = on_notice
        self.recorders: list[Recorder] = []
        self.loading = False
        self._activity = asyncio.Event()

    def _on_frame(self, _rec: Recorder, _kind: int) -> None:
        self._activity.set()

    async def connect(self, node: int, timeout: float = 10.0) -> Recorder:
        rec = Recorder(node, len(self.recorders), keep=self.keep, on_frame=self._on_frame,
                       on_notice=self.on_notice)
        await rec.open(self.cluster.nodes[node].socket, timeout)
        self.recorders.append(rec)
        if self.loading:
            rec.start_load(self.rate, service=self.service, size=self.size)
        return rec

    async def connect_all(self) -> list[Recorder]:
        return [await self.connect(i) for i in range(len(self.cluster.nodes))]

    def of(self, node: int) -> Recorder:
        """The latest client of ``node``."""
        return next(r for r in reversed(self.recorders) if r.node == node)

    def live(self) -> list[Recorder]:
        return [r for r in self.recorders if r.open_]

    def start_load(self) -> None:
        self.loading = True
        for r in self.live():
            r.start_load(self.rate, service=self.service, size=self.size)

    async def stop_load(self, timeout: float = 30.0) -> None:
        """Stop sending; ``sync`` every connected client (its frames were all handled)."""
        self.loading = False
        for r in self.recorders:
            await r.stop_load()
        await asyncio.gather(*(self._sync(r, timeout) for r in self.live()))

    @staticmethod
    async def _sync(r: Recorder, timeout: float) -> None:
        with contextlib.suppress(ConnectionError):  # it ended meanwhile: no longer owed
            await r.sync(timeout)

    async def until(self, done: Callable[[], Any], timeout: float, what: str) -> Any:
        """Wait, woken by arriving frames, until ``done()`` is truthy; its value.
        ``TimeoutError`` naming ``what`` after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            self._activity.clear()
            value = done()
            if value:
                return value
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{what}: not within {timeout} s")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._activity.wait(), min(left, 0.5))

    async def wait_view(self, members: Iterable[int], recorders: Iterable[Recorder],
                        after: float, timeout: float = 30.0) -> dict[Recorder, float]:
        """Arrival times of the first primary view of exactly ``members`` at each of
        ``recorders`` (received at or after ``after``)."""
        want = sorted(members)
        recs = list(recorders)

        def seen() -> dict[Recorder, float] | None:
            got = {r: n.at for r in recs if (n := r.first_view(want, after)) is not None}
            return got if len(got) == len(recs) else None

        return await self.until(seen, timeout, f"a primary view of {want} at {recs}")

    async def settle(self, timeout: float = 30.0) -> None:
        """Until every connected client is in one primary view (the last frame about
        membership it received), every message owed (sent by a connected client, not
        reported back and not reported delivered while its daemon was away) was
        delivered, and that view's sequences have one length."""
        try:
            await self.until(self._settled, timeout, "settling (one view, everything delivered)")
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}; {self.unsettled()}") from None

    def unsettled(self) -> str:
        """What ``_settled`` still waits for, per client: the view it is in, primary
        or not, how many messages it delivered in it, and how many owed messages no
        client delivered yet (with the first few of them)."""
        live = self.live()
        delivered: set[Key] = set()
        for r in live:
            delivered |= r.delivered_keys()
        parts = []
        for r in live:
            view = r.current_view()
            count = (sum(1 for e in r.timeline if e[0] == DELIVER and e[2] == view[0])
                     if view is not None else 0)
            missing = [k for k in range(r.next_number) if k not in r.reported
                       and k not in r.delivered_away and (r.tag, k) not in delivered]
            parts.append(f"{r}: view {view[0] if view else None}"
                         f"{'' if view is None or view[1] else ' (not primary)'}, "
                         f"{count} delivered in it, {len(missing)} of its own owed "
                         f"{missing[:5]}")
        return "; ".join(parts)

    def _settled(self) -> bool:
        live = self.live()
        current = [r.current_view() for r in live]
        if not live or any(v is None or not v[1] for v in current):
            return False
        if len({v[0] for v in current if v is not None}) != 1:
            return False
        final = current[0][0] if current[0] is not None else None
        delivered: set[Key] = set()
        lengths = set()
        for r in live:
            delivered |= r.delivered_keys()
            lengths.add(sum(1 for e in r.timeline if e[0] == DELIVER and e[2] == final))
        if len(lengths) != 1:
            return False
        # (a message reported delivered while its sender's daemon was away is not owed
        # to the live clients: those that delivered it may be gone since)
        return all((r.tag, k) in delivered for r in live for k in range(r.next_number)
                   if k not in r.reported and k not in r.delivered_away)

    def verdict(self, settled: bool = True) -> Verdict:
        return verdict(self.recorders, settled=settled)

    async def stop_and_judge(self, timeout: float = 30.0) -> Verdict:
        """Stop the load, wait for every delivery, and judge the whole history."""
        await self.stop_load(timeout)
        await self.settle(timeout)
        return self.verdict()

    async def close(self) -> None:
        for r in self.recorders:
            await r.close()


@contextlib.asynccontextmanager
async def loaded(cluster: LocalCluster, *, rate: float = 200.0) -> AsyncIterator[FaultRun]:
    """Start ``cluster``, connect a recording client to every node and start their load;
    on the way out close the clients and stop the cluster (the real-process fault tests)."""
    await asyncio.to_thread(cluster.start, 60)
    run = FaultRun(cluster, rate=rate)
    try:
        await run.connect_all()
        run.start_load()
        yield run
    finally:
        await run.close()
        await asyncio.to_thread(cluster.stop, 20)


# ---------------------------------------------------------------------------- verdict
@dataclass(eq=False)
class History:
    """One client's deliveries by view, and which views its daemon completed."""

    rec: Recorder
    seqs: dict[int, list[tuple[int | None, Key]]] = field(default_factory=dict)
    observed: set[int] = field(default_factory=set)
    complete: set[int] = field(default_factory=set)
    primaries: list[tuple[int, list[int]]] = field(default_factory=list)
    keysets: dict[int, set[Key]] = field(default_factory=dict)

    def keys(self, view: int) -> set[Key]:
        if view not in self.keysets:
            self.keysets[view] = {k for _, k in self.seqs.get(view, [])}
        return self.keysets[view]


def history(rec: Recorder, settled: bool) -> History:
    h = History(rec)
    last: int | None = rec.welcome.get("view")
    lost = False
    for e in rec.timeline:
        if e[0] == DELIVER:
            h.seqs.setdefault(e[2], []).append((e[3], (e[4], e[5])))
        elif e[0] == VIEW:
            f = e[2]
            if f.get("primary", True):
                if last is not None and f.get("previous") == last:
                    h.complete.add(last)
                last = f["view"]
                lost = False
                h.observed.add(last)
                h.primaries.append((last, sorted(f["members"])))
            else:
                lost = True
    if settled and rec.open_ and last is not None and not lost:
        h.complete.add(last)
    for v, seq in h.seqs.items():  # connected before the view's first delivery
        if seq[0][0] == 0:
            h.observed.add(v)
    return h


@dataclass
class Verdict:
    problems: list[str] = field(default_factory=list)
    views: dict[int, dict[str, Any]] = field(default_factory=dict)
    sent: int = 0
    """messages sent by clients that stayed connected"""
    reported: int = 0
    """... of which reported back to them (undelivered, refused)"""
    exactly_once: int = 0
    """... of which delivered exactly once, in one view, by every daemon completing it"""
    nonuniform_tail: int = 0
    """deliveries of a daemon that did not complete a view, after its common prefix"""
    nonuniform_only: int = 0
    """messages of connected clients delivered only in such a tail (not reported back)"""
    lost_clients: int = 0
    """clients whose daemon was killed or stopped (their messages: at most once)"""

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def accounted_for(self) -> bool:
        """Every message of a connected client: delivered exactly once, delivered only in
        a non-uniform tail, or reported back to it. Nothing lost silently."""
        return self.exactly_once + self.nonuniform_only == self.sent - self.reported

    def summary(self) -> dict[str, Any]:
        return {"ok": self.ok, "problems": self.problems[:20], "views": len(self.views),
                "sent": self.sent, "reported": self.reported, "exactly_once": self.exactly_once,
                "nonuniform_tail": self.nonuniform_tail,
                "nonuniform_only": self.nonuniform_only}


def gap_problems(rec: Recorder) -> list[str]:
    """A ``gap`` frame's ``after`` must name the last ordered message this client saw
    before it: an application transfers state from there (docs/api.md, ``gap``). Every
    message of these runs goes to the one group all clients join, so once its join took
    effect a client sees every message its daemon delivers. A client that saw none
    before the gap (it connected after a restart) cannot tell what its daemon saw."""
    out: list[str] = []
    last: tuple[int, int] | None = None
    for e in rec.timeline:
        if e[0] == DELIVER and e[3] is not None:
            last = (e[2], e[3])
        elif e[0] == GAP and last is not None:
            after = e[2].get("after")
            said = None if after is None else (int(after[0]), int(after[1]))
            if said != last:
                out.append(f"{rec}: the gap before view {e[2].get('view')} is after "
                           f"{said}, but the last message it delivered was at {last}")
    return out


def _context(h: History, view: int, ref_h: History, start: int, i: int,
             info: dict[str, Any]) -> str:
    """What a report of differing deliveries needs to be read: how each side held the
    view, and the messages around the first difference."""
    def around(seq: list[tuple[int | None, Key]], at: int) -> list[Key]:
        return [k for _, k in seq[max(0, at - 2):at + 3]]

    how = [("observed" if view in x.observed else "joined late")
           + (", complete" if view in x.complete else "") for x in (h, ref_h)]
    return (f"{'nobody completed it from its start; ' if 'unchecked' in info else ''}"
            f"{h.rec}: {how[0]}, from position {start}, "
            f"{around(h.seqs.get(view, []), i)}; {ref_h.rec}: {how[1]}, "
            f"{around(ref_h.seqs.get(view, []), start + i)}")


def verdict(recorders: list[Recorder], *, settled: bool = True) -> Verdict:
    """Judge recorded histories (module docstring); needs ``keep=True`` recorders."""
    out = Verdict()
    hs = [history(r, settled) for r in recorders]
    problems = out.problems
    for r in recorders:
        problems.extend(gap_problems(r))
    # views: same members everywhere, increasing ids at each client
    members: dict[int, list[int]] = {}
    for h in hs:
        ids = [v for v, _ in h.primaries]
        if ids != sorted(set(ids)):
            problems.append(f"{h.rec}: view ids not increasing: {ids}")
        for v, m in h.primaries:
            if members.setdefault(v, m) != m:
                problems.append(f"view {v}: members {m} at {h.rec}, {members[v]} elsewhere")
    # within each view
    delivered_by_ref: dict[Key, set[int]] = defaultdict(set)
    delivered_anywhere: dict[Key, set[int]] = defaultdict(set)
    all_views = sorted({v for h in hs for v in h.seqs} | set(members))
    for v in all_views:
        refs = [h for h in hs if v in h.complete and v in h.observed]
        holders = [h for h in hs if v in h.seqs or h in refs]
        info: dict[str, Any] = {"members": members.get(v), "complete": [h.rec.tag for h in refs],
                                "messages": 0}
        out.views[v] = info
        ref: list[Key] = []
        if refs:
            ref_h = refs[0]
            ref = [k for _, k in ref_h.seqs.get(v, [])]
            info["messages"] = len(ref)
        elif holders:
            ref_h = max(holders, key=lambda h: len(h.seqs[v]))
            ref = [k for _, k in ref_h.seqs[v]]
            info["messages"] = len(ref)
            info["unchecked"] = True  # nobody completed it from its start
        for h in holders:
            seq = h.seqs.get(v, [])
            positions = [p for p, _ in seq]
            if any(p is None for p in positions):
                continue  # causal deliveries: not used by these runs
            start = 0 if v in h.observed or not positions else positions[0]
            if positions != list(range(start, start + len(positions))):
                problems.append(f"view {v}: {h.rec}'s positions are not contiguous from "
                                f"{start}")
                continue
            keys = [k for _, k in seq]
            if h in refs:
                if keys != ref:
                    i = next((i for i, (a, b) in enumerate(zip(keys, ref, strict=False))
                              if a != b), min(len(keys), len(ref)))
                    problems.append(f"view {v}: {h.rec} and {ref_h.rec} completed it with "
                                    f"different sequences (first difference at position {i}, "
                                    f"lengths {len(keys)} and {len(ref)})")
                for k in keys:
                    delivered_by_ref[k].add(v)
            else:
                common = ref[start:start + len(keys)]
                i = next((i for i, (a, b) in enumerate(zip(keys, common, strict=False))
                          if a != b), len(common))
                if i < len(keys):
                    if v in h.complete or "unchecked" in info:
                        problems.append(f"view {v}: {h.rec} delivered {keys[i]} at position "
                                        f"{start + i}, {ref_h.rec} "
                                        f"{common[i] if i < len(common) else 'nothing'}"
                                        f" ({_context(h, v, ref_h, start, i, info)})")
                    else:
                        out.nonuniform_tail += len(keys) - i
                if v in h.complete or not refs:
                    for k in keys:
                        delivered_by_ref[k].add(v)
            for k in keys:
                delivered_anywhere[k].add(v)
    # at most once per client, one view per message
    for h in hs:
        counts = Counter(k for seq in h.seqs.values() for _, k in seq)
        dup = [k for k, n in counts.items() if n > 1]
        if dup:
            problems.append(f"{h.rec} delivered {len(dup)} messages more than once, e.g. "
                            f"{dup[:3]}")
    multi = [k for k, vs in delivered_anywhere.items() if len(vs) > 1]
    if multi:
        problems.append(f"{len(multi)} messages delivered in more than one view, e.g. "
                        f"{multi[:3]} in {sorted(delivered_anywhere[multi[0]])}")
    # exactly once for the clients that stayed connected
    refs_of: dict[int, list[History]] = {
        v: [h for h in hs if v in h.complete and v in h.observed] for v in all_views}
    for h in hs:
        r = h.rec
        if not r.open_:
            out.lost_clients += 1
            continue
        out.sent += r.next_number
        out.reported += len(r.reported)
        lost: list[int] = []
        for n in range(r.next_number):
            k = (r.tag, n)
            if n in r.reported:
                if delivered_by_ref.get(k) and n not in r.unknown:
                    problems.append(f"{r}: message {n} reported back to the client but "
                                    f"delivered in view {sorted(delivered_by_ref[k])}")
                continue
            vs = delivered_by_ref.get(k)
            if not vs:
                if delivered_anywhere.get(k):
                    out.nonuniform_only += 1
                else:
                    lost.append(n)
                continue
            (v,) = vs if len(vs) == 1 else (min(vs),)
            missing = [x.rec for x in refs_of[v] if k not in x.keys(v)]
            if missing:
                problems.append(f"{r}: message {n} of view {v} not delivered by {missing}")
            else:
                out.exactly_once += 1
        if lost:
            problems.append(f"{r}: {len(lost)} messages accepted, not reported back and "
                            f"delivered nowhere, e.g. {lost[:5]}")
    return out


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) by the nearest-rank method; 0.0 for no values."""
    if not values:
        return 0.0
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]
