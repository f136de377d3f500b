"""The Node: wire codec + reliable causal multicast + total-order engine, sans-IO.

Section 1 of the ToTo paper builds atomic multicast on a reliable causal multicast whose
acknowledgements form the causality DAG; sections 2-5 order that DAG. This class wires
the layers (see ``protocols.wire`` and ``protocols.reliable``) into one state machine
driven by its caller, aioquic-style:

- inputs: ``submit(payload, now)``, ``receive_datagram(data, now)``,
  ``handle_timer(now)`` (when ``next_timer()`` has passed);
- outputs, pulled: ``datagrams_to_send()`` (also the point where queued messages are
  batched into vertices) and ``events()``.

Receive path: authenticate and decode (a defect is a counted ``DatagramDropped``), learn
the sender's latest seq (every datagram is a heartbeat), schedule repairs for nacked
vertices we hold, offer vertices to the causal releaser; each released vertex updates
the ack matrix, enters the retransmission store until stable, is delivered for
``causal`` service once no ordered vertex of its causal past is undelivered
(``CausalHoldback``), and is inserted into the total-order engine. Engine deliveries queue
in total order; ``safe`` vertices wait there until stable, holding back what follows.
Send path: our own vertex carries the acks that changed since our previous vertex, is
released locally at once and enters the same pipeline.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from protocols.errors import BackpressureError, ClientError, DecodeError, ProtocolViolation
from protocols.events import (
    BackpressureApplied,
    BackpressureReleased,
    BatchDelivered,
    DatagramDropped,
    Event,
    ServiceLevel,
)
from protocols.node_config import NodeConfig
from protocols.ordering import OrderingConfig, TotalOrderEngine
from protocols.ordering.messages import CausalMessage, MessageDelivered
from protocols.reliable.batching import Batcher, Reassembler
from protocols.reliable.causal import DUPLICATE, HELD, CausalReleaser
from protocols.reliable.flow import SendWindow
from protocols.reliable.holdback import CausalHoldback
from protocols.reliable.repair import NackTimers, RepairTimers
from protocols.reliable.stability import AckMatrix
from protocols.wire.auth import Authenticator
from protocols.wire.codec import KIND_NAMES, Datagram, Fragment, Kind, Vertex, decode, encode
from protocols.wire.limits import NACK_RANGE_OVERHEAD, WireLimits, overhead_bound

VIEW_ID = 0  # membership (a later issue) will change views; the id is on the wire already


@dataclass(slots=True)
class NodeStats:
    """Cumulative counters (and two gauges) for metrics; read, never write."""

    datagrams_sent: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(KIND_NAMES.values(), 0)
    )
    datagrams_received: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(KIND_NAMES.values(), 0)
    )
    bytes_sent: int = 0
    data_bytes_sent: int = 0
    """Bytes of DATA datagrams (header, tag and payload)."""
    bytes_received: int = 0
    messages_submitted: int = 0
    messages_delivered: int = 0
    vertices_sent: int = 0
    vertices_released: int = 0
    retransmissions: int = 0
    nack_ranges_sent: int = 0
    duplicates: int = 0
    own_echoes: int = 0
    drops: dict[str, int] = field(default_factory=dict)
    backpressure_events: int = 0
    # gauges, refreshed when ``Node.stats`` is read
    pending_dag_size: int = 0
    window_occupancy: int = 0
    pending_bytes: int = 0
    retransmit_buffer: int = 0


class Node:
    def __init__(
        self,
        config: NodeConfig,
        *,
        node_id: int,
        members: Sequence[int],
        rng: random.Random,
        now: float,
    ) -> None:
        if node_id not in members or len(set(members)) != len(members):
            raise ClientError("bad_membership", "node_id must be one of distinct members")
        self.config = config
        self.node_id = node_id
        self.members = tuple(members)
        self._now = now
        self._auth = Authenticator(config.group_key)
        self._limits = WireLimits(
            max_members=max(len(members), 1),
            max_nack_ranges=config.max_nack_ranges,
            max_message_size=config.max_message_size,
        )
        self._engine = TotalOrderEngine(
            members=list(members), config=OrderingConfig(rule=config.rule, phi=config.phi)
        )
        self._releaser = CausalReleaser(
            members, receive_window=config.receive_window, max_held=config.max_held_vertices
        )
        self._acks = AckMatrix(members)
        self._nacks = NackTimers(rng, nack_delay=config.nack_delay, nack_retry=config.nack_retry)
        self._repairs = RepairTimers(
            rng, repair_delay=config.repair_delay, holdoff=config.repair_holdoff
        )
        self._window = SendWindow(
            window_size=config.window_size, max_pending_bytes=config.max_pending_bytes
        )
        self._batcher = Batcher()
        self._causal_reasm = Reassembler()
        self._ordered_reasm = Reassembler()
        self._store: dict[int, dict[int, Vertex]] = {m: {} for m in members}
        self._gc_floor: dict[int, int] = dict.fromkeys(members, 0)
        self._ordered: deque[tuple[Vertex, MessageDelivered]] = deque()
        self._holdback = CausalHoldback(members)
        self._position = 0
        self._seq = 0
        self._unacked_data = 0
        self._ack_deadline: float | None = None
        self._last_sent = now
        self._nack_queue: list[tuple[int, int, int]] = []
        self._outq: list[Datagram] = []
        self._events: list[Event] = []
        self._stats = NodeStats()
        self._max_nacks_per_datagram = max(
            1, min(config.max_nack_ranges, (config.datagram_budget // 2) // NACK_RANGE_OVERHEAD)
        )

    # ------------------------------------------------------------------ public API

    @property
    def stats(self) -> NodeStats:
        s = self._stats
        s.pending_dag_size = (
            self._releaser.held_count + len(self._ordered) + self._holdback.held_count
        )
        s.window_occupancy = self._unstable()
        s.pending_bytes = self._batcher.pending_bytes
        s.retransmit_buffer = sum(len(v) for v in self._store.values())
        return s

    def submit(
        self, payload: bytes, now: float, *, service: ServiceLevel = ServiceLevel.AGREED
    ) -> None:
        self._now = now
        if not isinstance(payload, bytes):
            raise ClientError("bad_payload", "payload must be bytes")
        if len(payload) > self.config.max_message_size:
            limit = self.config.max_message_size
            raise ClientError("message_too_large", f"{len(payload)} > {limit}")
        service = ServiceLevel(service)
        unstable = self._unstable()
        if not self._window.admits(len(payload), unstable, self._batcher.pending_bytes):
            self._stats.backpressure_events += 1
            if not self._window.blocked:
                self._window.blocked = True
                self._events.append(BackpressureApplied(unstable, self._batcher.pending_bytes))
            raise BackpressureError(
                f"window {unstable}/{self.config.window_size} vertices, "
                f"{self._batcher.pending_bytes} bytes queued"
            )
        self._batcher.add(payload, service)
        self._stats.messages_submitted += 1

    def receive_datagram(self, data: bytes, now: float) -> None:
        self._now = now
        stats = self._stats
        stats.bytes_received += len(data)
        try:
            dg = decode(data, self._auth, self._limits)
        except DecodeError as exc:
            self._drop(exc.reason, exc.detail)
            return
        if dg.sender == self.node_id:
            stats.own_echoes += 1
            return
        reason = self._foreign(dg)
        if reason is not None:
            self._drop(reason, f"from {dg.sender}")
            return
        stats.datagrams_received[KIND_NAMES[dg.kind]] += 1
        releaser = self._releaser
        releaser.note_known(dg.sender, dg.hb_seq)
        touched = {dg.sender}
        for node, first, last in dg.nacks:
            self._on_nack(node, first, last, now)
        released: list[Vertex] = []
        repair = dg.kind == Kind.REPAIR
        for v in dg.vertices:
            try:
                status = releaser.offer(v, released)
            except ProtocolViolation as exc:
                self._drop(exc.reason, exc.detail)
                continue
            if repair:
                self._repairs.heard_repair(v.id, now)
            if status == DUPLICATE:
                stats.duplicates += 1
            elif status != HELD:
                self._drop(status, f"vertex {v.id}")
            touched.add(v.origin)
            touched.update(node for node, _ in v.acks)
        for v in released:
            self._on_release(v)
        for node in touched:
            if node != self.node_id and releaser.has_gap(node):
                self._nacks.gap_noticed(node, now)
        if released:
            self._after_releases()

    def handle_timer(self, now: float) -> None:
        self._now = now
        releaser = self._releaser
        for node in self._nacks.due(now):
            ranges = releaser.missing(node, self.config.max_nack_ranges)
            if ranges:
                self._nack_queue.extend((node, first, last) for first, last in ranges)
                self._nacks.rearm(node, now)
            else:
                self._nacks.clear(node)
        for origin, seq in self._repairs.due(now):
            v = self._store[origin].get(seq)
            if v is not None:
                self._outq.append(Datagram(Kind.REPAIR, self.node_id, VIEW_ID, self._seq, (), (v,)))
                self._stats.retransmissions += 1
        if self._ack_deadline is not None and now >= self._ack_deadline:
            self._ack_deadline = None
            if self._unacked_data:
                self._new_vertex(ServiceLevel.AGREED, ())
        if not self._outq and now >= self._last_sent + self.config.heartbeat_interval:
            self._outq.append(Datagram(Kind.HEARTBEAT, self.node_id, VIEW_ID, self._seq))
            self._last_sent = now

    def next_timer(self) -> float | None:
        candidates = [self._last_sent + self.config.heartbeat_interval]
        if self._ack_deadline is not None:
            candidates.append(self._ack_deadline)
        nack = self._nacks.next_deadline()
        if nack is not None:
            candidates.append(nack)
        repair = self._repairs.next_deadline()
        if repair is not None:
            candidates.append(repair)
        return min(candidates)

    def datagrams_to_send(self) -> list[bytes]:
        self._flush_batches()
        if self._nack_queue:
            self._attach_nacks()
        if not self._outq:
            return []
        out = [encode(dg, self._auth) for dg in self._outq]
        sent, stats = self._stats.datagrams_sent, self._stats
        for dg, data in zip(self._outq, out, strict=True):
            sent[KIND_NAMES[dg.kind]] += 1
            stats.bytes_sent += len(data)
            if dg.kind is Kind.DATA:
                stats.data_bytes_sent += len(data)
            stats.nack_ranges_sent += len(dg.nacks)
        self._outq = []
        self._last_sent = self._now
        return out

    def events(self) -> list[Event]:
        events, self._events = self._events, []
        return events

    # ------------------------------------------------------------------ send side

    def _unstable(self) -> int:
        return self._seq - self._acks.stable(self.node_id)

    def _flush_batches(self) -> None:
        batcher, window = self._batcher, self._window
        budget = self.config.datagram_budget
        while batcher and window.can_send(self._unstable()):
            acks = self._acks.delta_for(self.node_id, self._releaser.released)
            nacks = min(len(self._nack_queue), self._max_nacks_per_datagram)
            room = budget - overhead_bound(len(acks), nacks)
            service, items = batcher.next_vertex(room)
            self._new_vertex(service, items, acks)
        if window.should_release(self._unstable(), batcher.pending_bytes):
            window.blocked = False
            self._events.append(BackpressureReleased(self._unstable(), batcher.pending_bytes))

    def _new_vertex(
        self,
        service: ServiceLevel,
        items: tuple,
        acks: tuple[tuple[int, int], ...] | None = None,
    ) -> None:
        if acks is None:
            acks = self._acks.delta_for(self.node_id, self._releaser.released)
        self._seq += 1
        v = Vertex(self.node_id, self._seq, acks, service, self._now, items)
        kind = Kind.DATA if items else Kind.ACK_ONLY
        self._outq.append(Datagram(kind, self.node_id, VIEW_ID, self._seq, (), (v,)))
        self._stats.vertices_sent += 1
        self._releaser.release_own(v)
        self._unacked_data = 0
        self._ack_deadline = None
        self._on_release(v)
        self._after_releases()

    def _attach_nacks(self) -> None:
        cap = self._max_nacks_per_datagram
        outq = self._outq
        for i, dg in enumerate(outq):
            if not self._nack_queue:
                return
            if dg.kind in (Kind.DATA, Kind.ACK_ONLY, Kind.HEARTBEAT) and not dg.nacks:
                take, self._nack_queue = self._nack_queue[:cap], self._nack_queue[cap:]
                outq[i] = Datagram(dg.kind, dg.sender, dg.view, dg.hb_seq, tuple(take), dg.vertices)
        while self._nack_queue:
            take, self._nack_queue = self._nack_queue[:cap], self._nack_queue[cap:]
            outq.append(Datagram(Kind.NACK, self.node_id, VIEW_ID, self._seq, tuple(take)))

    # ------------------------------------------------------------------ receive side

    def _foreign(self, dg: Datagram) -> str | None:
        members = self._releaser.released
        if dg.view != VIEW_ID:
            return "wrong_view"
        if dg.sender not in members:
            return "unknown_sender"
        for node, _, _ in dg.nacks:
            if node not in members:
                return "unknown_member"
        for v in dg.vertices:
            if v.origin not in members:
                return "unknown_member"
        return None

    def _drop(self, reason: str, detail: str = "") -> None:
        drops = self._stats.drops
        drops[reason] = drops.get(reason, 0) + 1
        self._events.append(DatagramDropped(reason, detail))

    def _on_nack(self, node: int, first: int, last: int, now: float) -> None:
        first_missing = self._releaser.first_missing(node) if node != self.node_id else None
        if first_missing is not None and first <= first_missing <= last:
            self._nacks.heard_nack(node, now)
        store = self._store[node]
        last = min(last, first + self.config.max_repair_per_nack - 1)
        origin = node == self.node_id
        for seq in range(max(first, self._gc_floor[node] + 1), last + 1):
            if seq in store:
                self._repairs.nacked((node, seq), now, origin=origin)

    def _on_release(self, v: Vertex) -> None:
        """``v`` was released in causal order (received, or our own)."""
        self._acks.apply(v)
        self._store[v.origin][v.seq] = v
        self._stats.vertices_released += 1
        mine = v.origin == self.node_id
        if v.items and not mine:
            self._unacked_data += 1
            if self._ack_deadline is None:
                self._ack_deadline = self._now + self.config.ack_delay
        ordered = v.items and v.service is not ServiceLevel.CAUSAL
        if ordered:
            self._holdback.ordered_released(v.origin, v.seq)
        elif v.items and self._holdback.offer(v, self._acks.vectors[v.origin]):
            self._deliver(v, self._causal_reasm, None)
        for delivered in self._engine.insert(
            CausalMessage(v.origin, v.seq, v.acks, v if ordered else None)
        ):
            self._ordered.append((delivered.payload, delivered))

    def _after_releases(self) -> None:
        for node, stable in self._acks.refresh():
            store = self._store[node]
            for seq in range(self._gc_floor[node] + 1, stable + 1):
                store.pop(seq, None)
                self._repairs.forget((node, seq))
            self._gc_floor[node] = stable
        ordered = self._ordered
        stable_of = self._acks.stable
        holdback = self._holdback
        while ordered:
            v, delivered = ordered[0]
            if v.service is ServiceLevel.SAFE and stable_of(v.origin) < v.seq:
                break
            ordered.popleft()
            self._deliver(v, self._ordered_reasm, delivered)
            holdback.ordered_delivered(v.origin, v.seq)
            for held in holdback.ready():  # before the next ordered one: it may follow them
                self._deliver(held, self._causal_reasm, None)

    def _deliver(self, v: Vertex, reasm: Reassembler, d: MessageDelivered | None) -> None:
        payloads: list[bytes] = []
        for item in v.items:
            if isinstance(item, Fragment):
                try:
                    whole = reasm.add(v.origin, item)
                except ProtocolViolation as exc:
                    self._drop(exc.reason, exc.detail)
                    continue
                if whole is not None:
                    payloads.append(whole)
            else:
                payloads.append(item)
        if not payloads:
            return
        self._stats.messages_delivered += len(payloads)
        if d is None:
            event = BatchDelivered(
                v.origin, v.seq, tuple(payloads), v.service, None, None, None, None, None, None,
                v.send_ts,
            )
        else:
            event = BatchDelivered(
                v.origin, v.seq, tuple(payloads), v.service, self._position, d.activation,
                d.rule, d.ntail, d.unseen, d.nvt, v.send_ts,
            )
            self._position += len(payloads)
        self._events.append(event)
