"""One view's session: reliable causal multicast, total order and delivery.

Section 2 of the ToTo paper: "because of virtual synchrony, we only need to order the
messages that are delivered between configuration changes". A ``ViewSession`` is
everything that lives for one view: the reliable layer (``reliable.layer``: sequence
numbers from 1, the causality DAG's vertices, repair, stability), the ToTo engine
(sections 3-5) over the view's members, and the delivery pipeline:

- a released vertex updates the ack matrix and enters the store (reliable layer); a
  ``causal`` one is delivered once no ordered vertex of its causal past is undelivered
  (``reliable.holdback``); every vertex is inserted into the engine;
- engine deliveries queue in total order; an ``agreed`` one goes out at once, a
  ``safe`` one waits until every member holds it *and* everything this member had
  released when the engine ordered it (so a member that crashes after delivering a safe
  message has decided on a DAG every survivor holds: survivors deliver it at the same
  position, uniform delivery) and holds back what follows;
- positions count application payloads from 0 in each view; every delivery event
  carries the view id.

Closing the view (the flush of ``amcast.protocols.membership``): ``freeze`` when the
member promises, ``close_at(cut)`` once the cut is agreed (repair up to it), then
``finish`` once every vertex up to the cut is released: the engine closes the final
DAG deterministically (``TotalOrderEngine.close``) and everything left is delivered,
``safe`` messages included (every member of the next view holds them: Spread's
transitional configuration). ``abandon`` stops deliveries of a view this member was
excluded from (or lost its quorum in): it must not deliver decisions the survivors did
not make.

With ``config.ordering`` arrow, combining or hybrid a ``swap.engine.SwapOrdering`` takes
the engine's place (*Ordered Multicast and Distributed Swap*, docs/swap.md): an ordered
vertex is made once its swap found its predecessor, carries ``<pred, id>`` in the
session's framing of its items, and the chain of predecessors is the total order.
"""

from __future__ import annotations

import random
from collections import deque
from typing import Any, Protocol

from .errors import ConfigurationError, ProtocolViolation
from .events import BatchDelivered, Event, SwapGap
from .ordering import OrderingConfig, TotalOrderEngine
from .ordering.config import OrderingRule
from .ordering.messages import CausalMessage, MessageDelivered
from .ordering.native import engine_core, make_engine
from .reliable.batching import Batcher, Reassembler
from .reliable.config import ReliableConfig
from .reliable.flow import SendWindow
from .reliable.holdback import CausalHoldback
from .reliable.layer import Drop, ReliableCounters, ReliableLayer
from .reliable.native import layer_core, make_layer
from .reliable.ratelimit import PeerLimiter
from .reliable.repair import Lateness
from .swap.engine import HEADER_RESERVE, SwapOrdering
from .vocabulary import ServiceLevel
from .wire.codec import Datagram, Fragment, Kind, SwapDatagram, Vertex
from .wire.limits import overhead_bound

# per vertex on the hot path: a module global is read far faster than an enum member
_CAUSAL = ServiceLevel.CAUSAL
_SAFE = ServiceLevel.SAFE
_HEARTBEAT = Kind.HEARTBEAT


def ordering_for(rule: str, phi: float | None, n: int) -> OrderingConfig:
    """The ordering config of a view of ``n`` members: the configured phi while it is
    valid for ``n``, else the rule's default (n/2) for this view."""
    config = OrderingConfig(rule=OrderingRule(rule), phi=phi, ack_roots_leave=True)
    try:
        config.resolve_phi(n)
    except ConfigurationError:
        config = OrderingConfig(rule=OrderingRule(rule), phi=None, ack_roots_leave=True)
    return config


def prompt_ackers(n: int, phi: float) -> int:
    """How many members must ack a lone message at once for it to be ordered without the
    others: more than phi votes, the sender's included, and at most phi members unseen
    (sections 3 and 4). The rest ack after ``lazy_ack_delay``."""
    whole = int(phi)
    return max(0, min(n - 1, max(whole, n - 1 - whole)))


SWAP_PROMPT_ACKS = False
"""Whether a swap ordering's session acks as ToTo's does (the prompt ackers after
``ack_delay``, the rest after ``lazy_ack_delay``). It does not: a swap ordering places a
message by its predecessor, not by votes, so no member's ack orders anything, and every
sender's data is acked after ``lazy_ack_delay`` (or sooner, on the member's own data).
The acks still carry stability (safe delivery, the store, the send window), which
needs every member's and so waited for the lazy ones already. One sender at 1,000
msgs/s: 3.9 datagrams received per message instead of 9.1 at n = 4, 12.0 instead of
36.7 at n = 8, the same latency (docs/swap.md). True restores the ToTo timing, that of
the counterexamples found with it (tests/swap)."""


FUSED_RELEASE = True
"""Whether a view whose reliable layer and ToTo engine are both native releases vertices
in one native call (``ReliableLayer.receive_release`` and ``release``: per vertex the
``on_release``, the ack vector the holdback reads, the engine's insert, then the
garbage collection), leaving to Python only the holdback's steps for vertices with
items and the deliveries the engine decided. The same run as the per-vertex loop
(``_released``, the reference, which False restores): tests/native compares them."""


def prompt_origins(members: tuple[int, ...], node_id: int, phi: float) -> frozenset[int]:
    """The senders whose data this member acks at once: it is among the ``prompt_ackers``
    members after the sender, in member order round the group."""
    n = len(members)
    k = prompt_ackers(n, phi)
    if node_id not in members:
        return frozenset()
    me = members.index(node_id)
    return frozenset(members[(me - step) % n] for step in range(1, k + 1))


class SessionConfig(ReliableConfig, Protocol):
    """What a view's session reads of its configuration: the reliable layer's settings,
    the ordering (``toto`` with its rule and threshold, or a swap ordering with its
    tree) (``NodeConfig``)."""

    @property
    def rule(self) -> str: ...
    @property
    def phi(self) -> float | None: ...
    @property
    def ordering(self) -> str: ...
    @property
    def swap_tree(self) -> str: ...
    @property
    def swap_fanout(self) -> int: ...
    @property
    def swap_root_group(self) -> int: ...
    @property
    def swap_window(self) -> float: ...


class ViewSession:
    def __init__(
        self,
        view_id: int,
        members: tuple[int, ...],
        *,
        node_id: int,
        config: SessionConfig,
        rng: random.Random,
        now: float,
        drop: Drop,
        counters: ReliableCounters,
        limiter: PeerLimiter | None = None,
        lateness: Lateness | None = None,
        core: str | None = None,
        tree: tuple[int, ...] = (),
    ) -> None:
        """``core``: the ToTo engine's and the reliable layer's (``pure``, ``native``,
        ``auto``; ``None``: ``AMCAST_CORE``; ``ordering.native``, ``reliable.native``)."""
        self.view_id = view_id
        self.members = members
        self.node_id = node_id
        self.config = config
        self.reliable: ReliableLayer = make_layer(
            view_id, node_id, members, config=config, rng=rng, now=now, drop=drop,
            counters=counters, limiter=limiter, lateness=lateness, core=core)
        self.swap: SwapOrdering | None = None
        """The swap ordering of this view (``protocols/swap/engine.py``), in place of the
        ToTo engine when ``config.ordering`` is not ``toto``."""
        self.engine: TotalOrderEngine | SwapOrdering
        if config.ordering != "toto":
            self.swap = self.engine = SwapOrdering(
                view_id, members, node_id, ordering=config.ordering, shape=config.swap_tree,
                fanout=config.swap_fanout, root_group=config.swap_root_group,
                window=config.swap_window, rto=config.nack_retry, drop=drop, tree=tree)
        else:
            self.engine = make_engine(
                list(members), ordering_for(config.rule, config.phi, len(members)), core)
        if self.swap is not None and not SWAP_PROMPT_ACKS:
            self.reliable.prompt_origins = frozenset()
        elif config.lazy_ack_delay > config.ack_delay:
            self.reliable.prompt_origins = prompt_origins(members, node_id, self.engine.phi)
        self._fused: Any = None
        """The native reliable layer, where it and the engine are native and
        ``FUSED_RELEASE``: releases go through its fused calls."""
        if (FUSED_RELEASE and self.swap is None and layer_core(self.reliable) == "native"
                and engine_core(self.engine) == "native"):
            self._fused = self.reliable
        self._drop = drop
        self.events: list[Event] = []
        """What this session raised (its deliveries), until its membership layer collects
        them (``MembershipLayer.take_events``)."""
        self._holdback = CausalHoldback(members)
        self._ordered: deque[tuple[Vertex, MessageDelivered, dict[int, int] | None]] = deque()
        self._causal_reasm = Reassembler()
        self._ordered_reasm = Reassembler()
        self.position = 0
        """Next total-order position in this view, counted in application payloads."""
        self.delivering = True
        self.messages_delivered = 0
        self.finished = False
        self._now = now
        self.last_position: int | None = None
        """Position of the last ordered message delivered in this view."""

    # ------------------------------------------------------------------ queries

    @property
    def phi(self) -> float:
        return self.engine.phi

    @property
    def undelivered(self) -> int:
        """Application vertices received or released here and not delivered yet."""
        return (self.reliable.releaser.held_count + len(self._ordered)
                + self._holdback.held_count + self.engine.pending_payloads)

    @property
    def pending(self) -> int:
        """Vertices released or received but not yet delivered."""
        return (self.reliable.releaser.held_count + len(self._ordered)
                + self._holdback.held_count + self.engine.pending)

    # ------------------------------------------------------------------ inputs

    def receive(self, dg: Datagram, now: float) -> bool:
        """One datagram of this view from another member. ``True``: it was a heartbeat
        without nacks, applied in full, that released nothing (a repeat of it may be a
        no-op: ``repeat_is_noop``)."""
        self._now = now
        if self._fused is not None:
            step = self._fused.receive_release(dg, now, self.engine)
            if step is not None:
                self._apply(step)
                return False
            if dg.acks:  # the native call collected the garbage (after_stability's first step)
                self._deliver_ready(flush=False)
                return dg.kind is _HEARTBEAT and not dg.nacks
            return False
        released = self.reliable.receive(dg, now)
        if released:
            self._released(released)
            return False
        if dg.acks:  # a heartbeat's report may have made something stable
            self.after_stability()
            return dg.kind is _HEARTBEAT and not dg.nacks
        return False

    def repeat_is_noop(self, sender: int) -> bool:
        """Applying a heartbeat ``receive`` applied from ``sender`` again would change
        nothing: its
        reports only raise what they already raised (``note_known``, ``acks.report``
        take maxima), it carries no nacks or vertices, and what ``receive`` then does
        has nothing to act on: no gap of the sender to nack, no stability change
        waiting to be collected, no ordered message waiting for stability."""
        return not (self._ordered or self.reliable.acks.dirty
                    or self.reliable.releaser.has_gap(sender))

    def handle_timer(self, now: float) -> None:
        self._now = now
        if self.swap is not None and not self.reliable.frozen:
            self.swap.tick(now)  # once frozen no vertex goes out: swaps are moot
        released = self.reliable.handle_timer(now)
        if released:
            self._released(released)

    def swap_receive(self, dg: SwapDatagram, now: float) -> None:
        """A swap datagram of this view, for this member."""
        self._now = now
        if self.swap is not None:
            self.swap.receive(dg, now)

    def next_swap_timer(self) -> float | None:
        if self.swap is None or self.reliable.frozen:
            return None
        return self.swap.next_deadline()

    def take_swap_datagrams(self) -> list[SwapDatagram]:
        return self.swap.take_datagrams() if self.swap is not None else []

    def send_batches(self, batcher: Batcher, window: SendWindow, now: float,
                     sent: list[tuple[int, list[tuple[bytes, ServiceLevel]]]]) -> None:
        """Turn queued messages into vertices while the window allows; append to ``sent``
        each vertex's seq and the messages it completed."""
        reliable = self.reliable
        self._now = now
        if reliable.frozen:
            return
        budget = self.config.datagram_budget
        swap = self.swap
        while batcher and window.can_send(reliable.unstable(), reliable.unstable_bytes()):
            framed = swap is not None and batcher.queue[0][1] is not _CAUSAL
            if framed and swap is not None and swap.header(
                    now, len(batcher.queue), self._holdback.held_count == 0) is None:
                break  # its swap is in flight: the vertex waits for its predecessor
            acks = reliable.acks_delta()
            room = budget - overhead_bound(len(acks), reliable.nack_reservation())
            if framed:
                room -= HEADER_RESERVE
            if framed and swap is not None:
                service, items = batcher.next_vertex(room, swap.limit)
                items = swap.frame(items)
            else:
                service, items = batcher.next_vertex(room)
            v = reliable.new_vertex(service, items, now, acks)
            if batcher.completed:
                sent.append((v.seq, batcher.completed))
                batcher.completed = []
            self._released([v])

    # ------------------------------------------------------------------ view change

    def freeze(self) -> None:
        self.reliable.freeze()

    def hold_releases(self, on: bool, now: float) -> None:
        """Flow control from a slow local consumer (``ReliableLayer.hold_releases``)."""
        self._now = now
        released = self.reliable.hold_releases(on)
        if released:
            self._released(released)

    def close_at(self, cut: dict[int, int], now: float) -> None:
        released = self.reliable.close_at(cut, now)
        if released:
            self._released(released)

    def finish(self) -> None:
        """Every vertex up to the cut is released: deliver the rest of the view."""
        if self.finished:
            return
        self.finished = True
        self.delivering = True
        self.reliable.quiet = False
        for delivered in self.engine.close():
            self._ordered.append((delivered.payload, delivered, None))
        self._deliver_ready(flush=True)
        self.reliable.retire()

    def abandon(self) -> None:
        """Excluded, or no quorum: deliver nothing more of this view."""
        self.delivering = False
        self.reliable.freeze()
        self.reliable.quiet = True

    # ------------------------------------------------------------------ pipeline

    def _released(self, vertices: list[Vertex]) -> None:
        if self._fused is not None:
            self._apply(self._fused.release(vertices, self._now, self.engine))
            return
        reliable = self.reliable
        on_release = reliable.on_release
        now = self._now
        vectors = reliable.acks.vectors
        holdback = self._holdback
        insert = self.engine.insert
        ordered_queue = self._ordered
        for v in vertices:
            on_release(v, now)  # now vectors[v.origin] is v's full ack vector
            ordered = bool(v.items) and v.service is not _CAUSAL
            if ordered:
                holdback.ordered_released(v.origin, v.seq)
            elif v.items and holdback.offer(v, vectors[v.origin]):
                self._deliver(v, self._causal_reasm, None)
            try:
                decided = insert(CausalMessage(v.origin, v.seq, v.acks, v if ordered else None))
            except ProtocolViolation as exc:  # cannot happen for causally released input
                self._drop(exc.reason, exc.detail)
                continue
            for d in decided:
                frontier = None
                if d.payload.service is _SAFE:
                    frontier = dict(reliable.releaser.released)
                ordered_queue.append((d.payload, d, frontier))
        reliable.collect_garbage()
        self._deliver_ready(flush=False)

    def _apply(self, step: tuple[list[tuple[Any, Any]], list[Any], BaseException | None]
               ) -> None:
        """The rest of ``_released`` after a fused native release (``_fused.release``):
        the holdback's steps for the vertices with items, in release order, the
        engine's decisions queued, then what is ready delivered."""
        work, decided, error = step
        if work:
            holdback = self._holdback
            for v, vector in work:
                if vector is None:
                    holdback.ordered_released(v.origin, v.seq)
                elif v is None:  # a refused insert: cannot happen for causally released input
                    self._drop(vector.reason, vector.detail)
                elif holdback.offer(v, vector):
                    self._deliver(v, self._causal_reasm, None)
        if decided:
            self._ordered.extend(decided)
        if error is not None:
            raise error
        self._deliver_ready(flush=False)

    def after_stability(self) -> None:
        """Stability may have advanced (acks applied): safe messages may go now."""
        self.reliable.collect_garbage()
        self._deliver_ready(flush=False)

    def _deliver_ready(self, *, flush: bool) -> None:
        ordered = self._ordered
        if not ordered or not self.delivering:
            return
        fused = self._fused
        stable_of = self.reliable.acks.stable if fused is None else None
        holdback = self._holdback
        while ordered:
            v, delivered, frontier = ordered[0]
            if frontier is not None and not flush and (
                fused.frontier_unstable(frontier) if stable_of is None
                else any(stable_of(node) < seq for node, seq in frontier.items())
            ):
                self.reliable.want_report(self._now)
                break
            ordered.popleft()
            self._deliver(v, self._ordered_reasm, delivered)
            holdback.ordered_delivered(v.origin, v.seq)
            for held in holdback.ready():  # before the next ordered one: it may follow them
                self._deliver(held, self._causal_reasm, None)

    def _emit(self, v: Vertex, payloads: list[bytes], d: MessageDelivered | None,
              count: int) -> None:
        self.messages_delivered += count
        if d is None:
            event = BatchDelivered(
                v.origin, v.seq, tuple(payloads), v.service, None, None, None, None, None,
                None, v.send_ts, self.view_id,
            )
        else:
            event = BatchDelivered(
                v.origin, v.seq, tuple(payloads), v.service, self.position, d.activation,
                d.rule, d.ntail, d.unseen, d.nvt, v.send_ts, self.view_id,
            )
            self.position += count
            self.last_position = self.position - 1
        self.events.append(event)

    def _deliver(self, v: Vertex, reasm: Reassembler, d: MessageDelivered | None) -> None:
        payloads: list[bytes] = []
        items = v.items
        swap = self.swap
        if swap is not None and d is not None:
            if swap.gap_before and (v.origin, v.seq) in swap.gap_before:
                swap.gap_before.discard((v.origin, v.seq))
                self.events.append(SwapGap(self.view_id, self.position))
            try:
                items = swap.unframe(items)
            except (ProtocolViolation, ValueError, TypeError) as exc:
                self._drop("bad_swap_header", str(exc))
                return
        for item in items:
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
        self._emit(v, payloads, d, len(payloads))
