"""The reliable causal multicast of one view: send, receive, repair, stability.

Section 1 of the ToTo paper (Trans / Transis): every vertex carries its sender's
sequence number and acknowledgements (its causal past); gaps seen in sequence numbers,
acks or heartbeats become nacks; any holder retransmits; a vertex goes up only once its
causal past went up (``causal.CausalReleaser``); stability (every member acknowledged a
vertex, ``stability.AckMatrix``) frees the retransmission store and opens the window.

One ``ReliableLayer`` serves one view (section 2: "we only need to order the messages
that are delivered between configuration changes"): its sequence numbers start at 1
and its datagrams carry its view id. It owns the per-view state that used to live in
the Node: the store and its GC floor, the ack deadline of ack-only vertices, the nack
queue, the last-sent time behind heartbeats and the outgoing datagrams. It knows
nothing of the total order: ``receive``/``new_vertex``/``handle_timer`` return the
vertices released in causal order, and the caller (``amcast.protocols.session``) hands
them to the engine.

View changes: ``freeze`` stops own vertices and caps releases at what was released when
the member promised; ``close_at(cut)`` sets the agreed cut (releases up to it, nacks
what is missing up to it, refuses what lies beyond); ``availability`` describes what
the member holds for the coordinator. A closed (retired) layer keeps answering nacks
for members still completing the view.

Nacks are served within the requesting member's buckets (``ratelimit.PeerLimiter``,
shared by the node's views): nack ranges per second and retransmitted bytes per second,
ranges capped at ``max_repair_per_nack`` vertices, nacks of own vertices never sent
refused whole; each refusal is a counted drop (once per datagram and reason).

Heartbeats go on a grid: at the first multiple of ``heartbeat_interval`` of the caller's
clock at least half an interval after the last datagram sent (``heartbeat_due``), not
``heartbeat_interval`` after it. So a member is never silent longer than one and a half
intervals, one that sends more often than every half interval sends no heartbeat, and an
idle member beats exactly once an interval on the grid: members that share a clock
(daemons on one host: the monotonic clock) beat at the same instants, and an idle daemon
takes its peers' heartbeats and sends its own in one wake-up instead of one each.
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Callable

from ..errors import ProtocolViolation
from ..vocabulary import ServiceLevel
from ..wire.codec import Datagram, Item, Kind, Vertex
from ..wire.limits import (
    ACK_OVERHEAD,
    FIXED_OVERHEAD,
    FRAGMENT_OVERHEAD,
    ITEM_OVERHEAD,
    NACK_RANGE_OVERHEAD,
)
from ..wire.membership import Availability, HeldVertex
from .causal import DUPLICATE, HELD, CausalReleaser
from .config import ReliableConfig
from .ratelimit import PeerLimiter
from .repair import Lateness, NackTimers, RepairTimers
from .stability import AckMatrix

Drop = Callable[[str, str], None]

# per datagram on the hot path: a module global is read far faster than an enum member
_DATA, _ACK_ONLY, _REPAIR = Kind.DATA, Kind.ACK_ONLY, Kind.REPAIR


def repair_size(v: Vertex) -> int:
    """Upper bound of the bytes of a REPAIR datagram carrying ``v`` alone."""
    size = FIXED_OVERHEAD + ACK_OVERHEAD * len(v.acks)
    for it in v.items:
        if isinstance(it, bytes):
            size += ITEM_OVERHEAD + len(it)
        else:
            size += ITEM_OVERHEAD + FRAGMENT_OVERHEAD + len(it.chunk)
    return size


GRID_EPSILON = 1e-6
"""Relative slack of ``next_beat``: a time on a grid point (to float rounding) counts as
that point, so the next beat is one interval later, not at once."""


def next_beat(after: float, interval: float) -> float:
    """The first multiple of ``interval`` after ``after``: at most ``interval`` later."""
    return (math.floor(after / interval + GRID_EPSILON) + 1) * interval


def heartbeat_due(last_sent: float, interval: float) -> float:
    """When a member that last sent at ``last_sent`` heartbeats: on the grid, between half
    an interval and one and a half intervals later."""
    return next_beat(last_sent + interval / 2, interval)


class ReliableCounters:
    """Counters the layer bumps (shared with the Node's stats)."""

    __slots__ = ("duplicates", "loss_signals", "own_bytes_stable", "own_losses",
                 "retransmissions", "vertices_released", "vertices_sent")

    def __init__(self) -> None:
        self.duplicates = 0
        self.retransmissions = 0
        self.vertices_released = 0
        self.vertices_sent = 0
        self.own_losses = 0
        """Nacks of our own data vertices (another member missed them): loss signals."""
        self.loss_signals: dict[int, int] = {}
        """Members whose nacks of our data are loss signals not yet handed to the send
        window (member -> how many members besides us the view has, so how many could
        have nacked): the window judges each member's word against the others'
        (``flow.SendWindow.on_loss``). The node drains it after every input; one entry
        per member however many nacks came, so it stays small if nobody drains it."""
        self.own_bytes_stable = 0
        """Bytes of own data vertices that became stable (the window's clock)."""


class ReliableLayer:
    def __init__(
        self,
        view_id: int,
        node_id: int,
        members: tuple[int, ...],
        *,
        config: ReliableConfig,
        rng: random.Random,
        now: float,
        drop: Drop,
        counters: ReliableCounters,
        limiter: PeerLimiter | None = None,
        lateness: Lateness | None = None,
    ) -> None:
        """``limiter``: the per-peer nack and repair buckets, shared by the node's views
        (``None``: this layer's own, from ``config.repair_limits``); ``lateness``: how
        late copies come, shared the same way (``None``: this layer's own)."""
        cfg = config
        self.view_id = view_id
        self.node_id = node_id
        self.members = members
        self.cfg = cfg
        self._drop = drop
        self.counters = counters
        self.releaser = CausalReleaser(
            members, receive_window=cfg.receive_window, max_held=cfg.max_held_vertices
        )
        self.acks = AckMatrix(members)
        self._nacks = NackTimers(rng, nack_delay=cfg.nack_delay, nack_retry=cfg.nack_retry,
                                 lateness=lateness or Lateness(cfg.nack_reorder_max))
        self._repairs = RepairTimers(rng, repair_delay=cfg.repair_delay,
                                     holdoff=cfg.repair_holdoff)
        self.limiter = limiter or PeerLimiter(cfg.repair_limits(len(members)))
        self.store: dict[int, dict[int, Vertex]] = {m: {} for m in members}
        self._gc_floor: dict[int, int] = dict.fromkeys(members, 0)
        self.seq = 0
        self._unacked_data = 0
        self._ack_deadline: float | None = None
        self.prompt_origins: frozenset[int] | None = None
        """Senders whose data this member acks after ``ack_delay``; the others' data after
        ``lazy_ack_delay`` (None: every sender's after ``ack_delay``). Set by the session
        from the ordering threshold."""
        self._last_data_at = -math.inf
        """When we last sent data of our own: a member that has not within a
        ``heartbeat_interval`` only receives and acks prompt data after
        ``quiet_ack_delay`` instead of ``ack_delay`` (no own data for the ack to ride on)."""
        self.last_sent = now
        self._beat_for: float | None = None
        """``last_sent`` when ``_beat_at`` (its ``heartbeat_due``) was computed."""
        self._beat_at = 0.0
        self._nack_queue: list[tuple[int, int, int]] = []
        self.outq: list[Datagram] = []
        self.frozen = False
        """No own vertices any more: the view is being closed."""
        self.retired = False
        """Closed: only answers nacks (for members still completing the view)."""
        self.quiet = False
        """Abandoned: no heartbeats (the member announces itself with JOIN instead)."""
        self._flight: deque[tuple[int, int]] = deque()  # own data vertices: (seq, bytes)
        self._flight_bytes = 0
        self.holding = False
        """Releases held back (a local client reads slowly): see ``hold_releases``."""
        self._released_count = 0
        self._reported_count = 0
        self._report_due: float | None = None
        self._max_nacks_per_datagram = max(
            1, min(cfg.max_nack_ranges, (cfg.datagram_budget // 2) // NACK_RANGE_OVERHEAD)
        )

    # ------------------------------------------------------------------ queries

    def unstable(self) -> int:
        """Own vertices sent but not yet acknowledged by every member."""
        return self.seq - self.acks.stable(self.node_id)

    def unstable_bytes(self) -> int:
        """Bytes of own data vertices sent but not yet acknowledged by every member."""
        flight = self._flight
        if flight:
            stable = self.acks.stable(self.node_id)
            freed = 0
            while flight and flight[0][0] <= stable:
                freed += flight.popleft()[1]
            if freed:
                self._flight_bytes -= freed
                self.counters.own_bytes_stable += freed
        return self._flight_bytes

    def acks_delta(self) -> tuple[tuple[int, int], ...]:
        return self.acks.delta_for(self.node_id, self.releaser.released)

    def nack_reservation(self) -> int:
        """Nack ranges the next datagram will carry (the batcher leaves room for them)."""
        return min(len(self._nack_queue), self._max_nacks_per_datagram)

    def foreign(self, dg: Datagram) -> str | None:
        """Why ``dg`` cannot belong to this view (a drop reason), or ``None``."""
        members = self.releaser.released
        if dg.sender not in members:
            return "unknown_sender"
        for node, _, _ in dg.nacks:
            if node not in members:
                return "unknown_member"
        for v in dg.vertices:
            if v.origin not in members:
                return "unknown_member"
        return None

    # ------------------------------------------------------------------ receive side

    def receive(self, dg: Datagram, now: float) -> list[Vertex]:
        """Process one datagram of this view; return the vertices it released, in causal
        order. The caller hands each one to ``on_release`` (then to the order), one at a
        time: a vertex's full ack vector is ``acks.vectors[origin]`` right after it."""
        releaser = self.releaser
        releaser.note_known(dg.sender, dg.hb_seq)
        if dg.acks:
            self.acks.report(dg.sender, dg.acks)
        if dg.nacks:
            refused: dict[str, int] = {}
            counters = self.counters
            losses = counters.own_losses
            for node, first, last in dg.nacks:
                reason = self._on_nack(dg.sender, node, first, last, now)
                if reason is not None:
                    refused[reason] = refused.get(reason, 0) + 1
            if counters.own_losses != losses:  # one loss signal per nacking datagram
                counters.loss_signals[dg.sender] = len(self.members) - 1
            for reason, n in refused.items():
                self._drop(reason, f"{n} nack ranges from {dg.sender}")
        released: list[Vertex] = []
        if self.retired:
            return released
        touched = {dg.sender}
        repair = dg.kind == _REPAIR
        me = self.node_id
        for v in dg.vertices:
            if v.origin == me and v.seq > releaser.released[me]:
                # ours by its origin but never sent by us: a forgery, or an impostor's
                # under our id; released, it would take the place of our own next vertex
                self._drop("own_vertex_not_sent", f"vertex {v.id} from {dg.sender}")
                continue
            try:
                status = releaser.offer(v, released)
            except ProtocolViolation as exc:
                self._drop(exc.reason, exc.detail)
                continue
            if repair:
                self._repairs.heard_repair(v.id, now)
            if status == DUPLICATE:
                self.counters.duplicates += 1
            elif status != HELD:
                self._drop(status, f"vertex {v.id}")
            add = touched.add  # one add per node, in order: the same set (and order)
            add(v.origin)
            for node, _ in v.acks:
                add(node)
        members = releaser.released
        has_gap = releaser.has_gap
        nacks = self._nacks
        open_gaps = nacks.noticed
        for node in touched:
            # a duplicate's acks were never checked (``offer`` stops at the duplicate):
            # one naming a non-member must not reach the per-member tables
            if node == me or node not in members:
                continue
            if has_gap(node):
                nacks.gap_noticed(node, now, self._shown_by_origin(dg, node), members[node])
            elif open_gaps and node in open_gaps:
                nacks.gap_closed(node, now, late_copy=not repair)
        return released

    def _shown_by_origin(self, dg: Datagram, node: int) -> bool:
        """``node``'s gap lies below a sequence number that ``node``'s own datagram (or a
        retransmitted vertex of ``node``) carries: a copy was lost. Otherwise the gap is
        known only from others' acks (``repair.NackTimers``: perhaps a late copy)."""
        first = self.releaser.first_missing(node)
        if first is None:
            return True
        if node == dg.sender and dg.hb_seq > first:
            return True
        return any(v.origin == node and v.seq > first for v in dg.vertices)

    def on_release(self, v: Vertex, now: float) -> None:
        """``v`` was released in causal order (received, or our own)."""
        acks = self.acks
        acks.apply(v)
        if v.origin != self.node_id:
            acks.report_one(self.node_id, v.origin, v.seq)  # we hold what we released
        self.store[v.origin][v.seq] = v
        self.counters.vertices_released += 1
        self._released_count += 1
        if v.items and v.origin != self.node_id:
            self._unacked_data += 1
            prompt = self.prompt_origins
            cfg = self.cfg
            if prompt is None or v.origin in prompt:
                due = now + (cfg.ack_delay if now - self._last_data_at < cfg.heartbeat_interval
                             else cfg.quiet_ack_delay)
            else:
                due = now + cfg.lazy_ack_delay
            if self._ack_deadline is None or due < self._ack_deadline:
                self._ack_deadline = due

    def collect_garbage(self) -> None:
        """Forget vertices every member holds (stable: nobody will nack them)."""
        for node, stable in self.acks.refresh():
            store = self.store[node]
            for seq in range(self._gc_floor[node] + 1, stable + 1):
                store.pop(seq, None)
                self._repairs.forget((node, seq))
            self._gc_floor[node] = stable

    def _on_nack(self, peer: int, node: int, first: int, last: int,
                 now: float) -> str | None:
        """``peer`` misses ``node``'s vertices ``first..last``: schedule the repairs this
        node can make, within ``peer``'s buckets. Returns why (part of) the range was
        refused, or ``None``."""
        limiter = self.limiter
        if not limiter.allow_nack(peer, now):
            return "nack_rate_limited"
        own = node == self.node_id
        if own and last > self.seq:
            # no member can know of own vertices never sent: forged (or from a member with
            # the key that lies), refused whole: no repair, no loss signal
            return "nack_beyond_sent"
        held = self.acks.held.get(peer, {}).get(node, 0)
        if first <= held:
            # the requester acknowledged these already, it cannot miss them: a stale nack
            # (sent with the heartbeat that reports the repair) or a lie; not counted, as
            # nacks of stable vertices are not
            first = held + 1
            if first > last:
                return None
        reason = None
        if not self.retired:
            if own:
                self.counters.own_losses += 1
            else:
                first_missing = self.releaser.first_missing(node)
                if first_missing is not None and first <= first_missing <= last:
                    self._nacks.heard_nack(node, now)
        low = max(first, self._gc_floor[node] + 1)
        high = min(last, self.releaser.released[node])  # the store holds what was released
        if high - low >= self.cfg.max_repair_per_nack:
            high = low + self.cfg.max_repair_per_nack - 1
            reason = "nack_range_truncated"
        store = self.store[node]
        repairs = self._repairs
        for seq in range(low, high + 1):
            v = store.get(seq)
            if v is None or not repairs.wants(v.id, now):
                continue
            if not limiter.allow_repair(peer, repair_size(v), now):
                return "repair_rate_limited"
            repairs.nacked(v.id, now, origin=own)
        return reason

    # ------------------------------------------------------------------ send side

    def new_vertex(self, service: ServiceLevel, items: tuple[Item, ...], now: float,
                   acks: tuple[tuple[int, int], ...] | None = None) -> Vertex:
        """Create, queue and locally release our next vertex (the caller hands it to
        ``on_release``)."""
        if acks is None:
            acks = self.acks_delta()
        self.seq += 1
        v = Vertex(self.node_id, self.seq, acks, service, now, items)
        kind = _DATA if items else _ACK_ONLY
        if items:
            size = sum(len(it) if isinstance(it, bytes) else len(it.chunk) for it in items)
            size += FIXED_OVERHEAD + ITEM_OVERHEAD * len(items)
            self._flight.append((self.seq, size))
            self._flight_bytes += size
            self._last_data_at = now
        self.outq.append(Datagram(kind, self.node_id, self.view_id, self.seq, (), (v,)))
        self.counters.vertices_sent += 1
        self.releaser.release_own(v)
        self._unacked_data = 0
        self._ack_deadline = None
        return v

    def handle_timer(self, now: float) -> list[Vertex]:
        """Due nacks, repairs, ack-only vertex and heartbeat; return own released vertex."""
        releaser = self.releaser
        nacks = self._nacks
        for node in [] if self.retired else nacks.due(now):
            ranges = releaser.missing(node, self.cfg.max_nack_ranges)
            if ranges and nacks.still_arriving(node, releaser.released[node], now):
                continue
            if ranges:
                self._nack_queue.extend((node, first, last) for first, last in ranges)
                nacks.rearm(node, now, releaser.released[node])
            else:
                self._nacks.clear(node)
        for origin, seq in self._repairs.due(now):
            v = self.store[origin].get(seq)
            if v is not None:
                self.outq.append(
                    Datagram(Kind.REPAIR, self.node_id, self.view_id, self.seq, (), (v,))
                )
                self.counters.retransmissions += 1
        released: list[Vertex] = []
        if self._ack_deadline is not None and now >= self._ack_deadline:
            self._ack_deadline = None
            if self._unacked_data and not self.frozen:
                released.append(self.new_vertex(ServiceLevel.AGREED, (), now))
        report = self._report_due is not None and now >= self._report_due
        if report or (not self.retired and not self.quiet and not self.outq
                      and now >= heartbeat_due(self.last_sent, self.cfg.heartbeat_interval)):
            self._report_due = None
            self._reported_count = self._released_count
            holds = tuple(sorted(self.releaser.released.items()))
            self.outq.append(
                Datagram(Kind.HEARTBEAT, self.node_id, self.view_id, self.seq, (), (), holds)
            )
            self.last_sent = now
        return released

    def want_report(self, now: float) -> None:
        """A safe message waits for stability: tell the others soon what we hold."""
        if self._report_due is None and self._released_count != self._reported_count:
            self._report_due = now + self.cfg.ack_delay

    def next_timer(self) -> float | None:
        """The earliest deadline: heartbeat, ack-only vertex, report, nack or repair.
        Called after every input, so it builds nothing: the heartbeat time is cached
        per ``last_sent`` (a pure function of it) and the timer tables are read only
        when non-empty (``min`` of the same values, so the same float)."""
        best: float | None = None
        if not (self.retired or self.quiet):
            last = self.last_sent
            if last != self._beat_for:
                self._beat_for = last
                self._beat_at = heartbeat_due(last, self.cfg.heartbeat_interval)
            best = self._beat_at
        t = self._ack_deadline
        if t is not None and not self.frozen and (best is None or t < best):
            best = t
        t = self._report_due
        if t is not None and (best is None or t < best):
            best = t
        nacks = self._nacks.deadlines
        if nacks:
            t = min(nacks.values())
            if best is None or t < best:
                best = t
        repairs = self._repairs.pending
        if repairs:
            t = min(repairs.values())
            if best is None or t < best:
                best = t
        return best

    def take_datagrams(self, now: float) -> list[Datagram]:
        """The datagrams to send now (nacks attached), in order."""
        if self._nack_queue:
            self._attach_nacks()
        out = self.outq
        if not out:
            return []
        self.outq = []
        self.last_sent = now
        return out

    def _attach_nacks(self) -> None:
        cap = self._max_nacks_per_datagram
        outq = self.outq
        for i, dg in enumerate(outq):
            if not self._nack_queue:
                return
            if dg.kind in (Kind.DATA, Kind.ACK_ONLY, Kind.HEARTBEAT) and not dg.nacks:
                take, self._nack_queue = self._nack_queue[:cap], self._nack_queue[cap:]
                outq[i] = Datagram(dg.kind, dg.sender, dg.view, dg.hb_seq, tuple(take),
                                   dg.vertices)
        while self._nack_queue:
            take, self._nack_queue = self._nack_queue[:cap], self._nack_queue[cap:]
            outq.append(Datagram(Kind.NACK, self.node_id, self.view_id, self.seq, tuple(take)))

    # ------------------------------------------------------------------ flow control

    def hold_releases(self, on: bool) -> list[Vertex]:
        """End-to-end backpressure from a slow local consumer: while ``on``, nothing more
        is released (received vertices wait in the hold buffer, bounded by the senders'
        windows), so nothing more is acknowledged and every sender's window closes
        within one window. Off: release what waited (returned, in causal order). A view
        change's freeze and cut take precedence (the flush always completes)."""
        released: list[Vertex] = []
        if on == self.holding:
            return released
        self.holding = on
        if self.frozen:
            return released
        if on:
            self.releaser.set_limit(dict(self.releaser.released), released, final=False)
        else:
            self.releaser.set_limit_off(released)
        return released

    # ------------------------------------------------------------------ view changes

    def freeze(self) -> None:
        """Promised a view change: no own vertices; release nothing past what we hold."""
        if not self.frozen:
            self.frozen = True
            self._ack_deadline = None
            self.releaser.set_limit(dict(self.releaser.released), [], final=False)

    def close_at(self, cut: dict[int, int], now: float) -> list[Vertex]:
        """The agreed cut: release up to it, nack what is missing, refuse what lies beyond."""
        self.freeze()
        released: list[Vertex] = []
        self.releaser.set_limit(dict(cut), released, final=True)
        for node in self.members:
            if node != self.node_id and self.releaser.released[node] < cut[node]:
                self.releaser.note_known(node, cut[node])
                self._nacks.gap_noticed(node, now, True, self.releaser.released[node])
        return released

    def holds(self, cut: dict[int, int]) -> bool:
        return self.releaser.holds(cut)

    def exceeds(self, cut: dict[int, int]) -> bool:
        """Released a vertex beyond ``cut`` (a member the deciding quorum did not hear
        from before it gave its view up): the view cannot be closed at the cut here."""
        released = self.releaser.released
        return any(seq > cut.get(node, 0) for node, seq in released.items())

    def availability(self, max_held: int) -> Availability:
        """What we hold of this view: released seqs, and held vertices (bounded)."""
        released = tuple(sorted(self.releaser.released.items()))
        held = tuple(
            HeldVertex(v.origin, v.seq, v.acks)
            for v in self.releaser.held_vertices()[:max_held]
        )
        return Availability(self.view_id, released, held)

    def retire(self) -> None:
        """The view is closed: from now on only answer nacks from laggards."""
        self.retired = True
        self.frozen = True
        self._ack_deadline = None
        self._nacks.cancel_all()
        self._nack_queue = []
