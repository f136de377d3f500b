"""The Node: wire codec + membership + per-view sessions, sans-IO.

Section 1 of the ToTo paper builds atomic multicast on a reliable causal multicast whose
acknowledgements form the causality DAG; sections 3-5 order that DAG; section 2 assumes
a membership service with virtual synchrony. The Node composes the layers and is driven
by its caller, aioquic-style:

- inputs: ``submit(payload, now)``, ``receive_datagram(data, now)``,
  ``handle_timer(now)`` (when ``next_timer()`` has passed), ``leave(now)``;
- outputs, pulled: ``state_to_persist()`` (write it durably *before* sending what the
  same step produced), ``datagrams_to_send()`` (also where queued messages become
  vertices of the current view) and ``events()``.

Layers (``amcast.protocols``): ``wire`` authenticates and decodes (a defect is a
counted ``DatagramDropped``); ``membership`` runs views, failure detection and the flush
and owns one ``session.ViewSession`` per view (``reliable`` causal multicast, the ToTo
engine, delivery). The Node itself keeps what outlives a view: the send queue
(``Batcher``), the window, and the own messages sent but not yet known to be delivered
everywhere: messages not yet sent go out in the next view; sent ones that the primary
component's cut left out (this member was excluded) are reported, ``MessagesInDoubt``
(nothing a surviving daemon accepted is lost silently).
"""

from __future__ import annotations

import os
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from .errors import (
    BackpressureError,
    ClientError,
    ConfigurationError,
    DecodeError,
)
from .events import (
    BackpressureApplied,
    BackpressureReleased,
    BatchDelivered,
    DatagramDropped,
    Event,
    MessagesInDoubt,
    PeerClockRefused,
    ViewInstalled,
)
from .membership.durable import DurableState
from .membership.layer import MembershipLayer
from .membership.quorum import needed
from .node_config import NodeConfig
from .ordering import OrderingConfig
from .ordering.config import OrderingRule
from .ordering.native import engine_core, engine_core_for
from .reliable.batching import Batcher
from .reliable.flow import SendWindow
from .reliable.layer import ReliableCounters
from .reliable.native import layer_core, layer_core_for
from .reliable.ratelimit import PeerLimiter
from .reliable.repair import Lateness
from .repeats import HeartbeatRepeats
from .session import ViewSession
from .swap.engine import settings_text, tree_problem, view_tree
from .vocabulary import ServiceLevel
from .wire.auth import Authenticator, Sealed
from .wire.clock import ClockWatch, PeerClock
from .wire.codec import (
    KIND_NAMES,
    AnyDatagram,
    Datagram,
    Kind,
    MembershipDatagram,
    SwapDatagram,
    encode,
    open_body,
)
from .wire.keys import Keyring
from .wire.limits import FRAGMENT_OVERHEAD, WireLimits, overhead_bound
from .wire.membership import Settings, ViewRecord
from .wire.native import (  # the selected core's decoder, encoder and sealer
    Decode,
    Encode,
    NativeSealer,
    decoder_name,
    encode_plain,
    make_decoder,
    make_encoder,
    make_sealer,
)
from .wire.replay import SessionState

_REPAIR = Kind.REPAIR  # per datagram sent: a global is read faster than an enum member
_CLOCK_REFUSALS = frozenset(("stale", "future"))
"""Drop reasons of a datagram refused for its send time (``wire.clock``)."""


@dataclass(slots=True)
class NodeStats:
    """Cumulative counters (and some gauges) for metrics; read, never write."""

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
    repair_bytes_sent: int = 0
    """Bytes of REPAIR datagrams (retransmissions; what nacks made this node send)."""
    messages_submitted: int = 0
    messages_delivered: int = 0
    vertices_sent: int = 0
    vertices_released: int = 0
    retransmissions: int = 0
    late_copies: int = 0
    """Gaps a late copy closed before any repair (``reliable.repair``: not losses)."""
    nacks_waited: int = 0
    """Nack timers that waited again because the gap's origin was still arriving."""
    nack_ranges_sent: int = 0
    duplicates: int = 0
    own_echoes: int = 0
    drops: dict[str, int] = field(default_factory=dict)
    backpressure_events: int = 0
    views_installed: int = 0
    flushes: int = 0
    flush_deliveries: int = 0
    messages_in_doubt: int = 0
    messages_outcome_unknown: int = 0
    """Of ``messages_in_doubt``, those of views whose cut this member never learned."""
    # gauges, refreshed when ``Node.stats`` is read
    pending_dag_size: int = 0
    window_occupancy: int = 0
    window_bytes_used: int = 0
    """Bytes of own data vertices sent and not yet stable."""
    window_bytes: int = 0
    """The byte window now (shrinks on loss, grows back with stability)."""
    nack_reorder_allowance: float = 0.0
    """Seconds a gap known only from others' acks waits before its first nack, now."""
    window_losses: int = 0
    """Times another member's nack of our data halved the byte window (cumulative)."""
    window_losses_uncorroborated: int = 0
    """Loss signals (nacks of our data) from one member that no other member's nack
    corroborated: they halve the byte window at most to half its maximum (cumulative)."""
    loss_signals_unbound: int = 0
    """Nacks of our data that claimed a member's id from a session other than the one
    that speaks for it (a key holder posing as a live member): answered, but no loss
    signal (cumulative)."""
    holding_releases: int = 0
    """1 while releases are held back for a slow local consumer (``hold_deliveries``)."""
    pending_bytes: int = 0
    retransmit_buffer: int = 0
    view_id: int = 0
    primary: int = 0


def _agreed_rule(config: NodeConfig) -> str:
    """The ordering settings the members must share, as ``Settings.rule``: the ToTo rule,
    or the swap ordering with its tree (``swap.engine.settings_text``)."""
    return settings_text(config.rule, config.ordering, config.swap_tree, config.swap_fanout,
                         config.swap_root_group)


def check_budget(config: NodeConfig, members: int) -> None:
    """A vertex may acknowledge every other member: its datagram must still have room for
    a nack range and a byte of payload (``ConfigurationError`` otherwise, at start-up or
    on a member-list reload, rather than a failure on the first large ack vector)."""
    need = overhead_bound(members - 1, 1) + FRAGMENT_OVERHEAD + 1
    if config.datagram_budget < need:
        raise ConfigurationError(
            f"datagram_budget {config.datagram_budget} cannot carry the acknowledgements of "
            f"{members} members (it needs at least {need} bytes): raise datagram_budget "
            "(up to about 65000 on loopback or with jumbo frames) or list fewer members"
        )


class Node:
    def __init__(
        self,
        config: NodeConfig,
        *,
        node_id: int,
        members: Sequence[int],
        rng: random.Random,
        now: float,
        durable: DurableState | None = None,
        incarnation_floor: int = 0,
        initial_view: ViewRecord | None = None,
        session: bytes | None = None,
        wall_offset: float = 0.0,
        core: str | None = None,
        seal: str | None = None,
    ) -> None:
        """``members`` are the potential members (the configured list); the node forms
        or joins views with them. ``durable`` is the state a previous incarnation
        persisted (``None``: first start); ``incarnation_floor`` (the wall clock in ms in
        the daemon) keeps incarnations and view ids increasing even without it.
        ``initial_view`` starts the node already installed in a view every member was
        given out of band (tests and benchmarks; the daemon always joins).
        ``session``: the 16 random bytes that key this start's sealing (``auth``);
        ``None`` draws them from ``os.urandom``, never from ``rng`` (a seeded RNG would
        repeat them, and with them the AEAD nonces, at the next start).
        ``wall_offset``: the wall clock minus the caller's clock, in seconds (``now +
        wall_offset`` stamps and checks send times for replay protection); the daemon
        refreshes it (``wall_offset`` attribute), the simulator leaves it 0.
        ``core``: the data path's core (``pure``, ``native``, ``auto``; ``None``:
        ``AMCAST_CORE``); ``seal``: whether sealing, opening and the replay guard follow
        it (``None``: ``AMCAST_SEAL``; ``amcast.protocols.wire.native.seal_core``)."""
        if node_id not in members or len(set(members)) != len(members):
            raise ClientError("bad_membership", "node_id must be one of distinct members")
        # an explicit phi must suit the full member list (a smaller view that it does not
        # suit uses the rule's default, ``session.ordering_for``): ConfigurationError
        OrderingConfig(rule=OrderingRule(config.rule), phi=config.phi).resolve_phi(len(members))
        check_budget(config, len(members))
        if config.expected_votes is not None and config.expected_votes < len(members):
            raise ConfigurationError(
                f"expected_votes {config.expected_votes} is below the {len(members)} listed "
                "members: two partitions could then both hold a majority of the votes"
            )
        self.config = config
        self.node_id = node_id
        self.members = tuple(sorted(members))
        self._core = core
        """The core asked for (``None``: ``AMCAST_CORE``): the data path's and the ToTo
        engine's of every view (``ordering.native``)."""
        self._now = now
        self._rng = rng
        self._auth: Authenticator | NativeSealer = make_sealer(
            config.keys(), session if session is not None else os.urandom(16),
            replay_window_s=config.replay_window, max_sessions=max(256, 8 * len(members)),
            core=core, seal=seal,
        )
        self.wall_offset = wall_offset
        self._clocks = ClockWatch(self.members)
        """Peers' clock offsets, refused datagrams' included (``wire.clock``)."""
        self._limits = WireLimits(
            max_members=max(len(members), 64),
            max_nack_ranges=config.max_nack_ranges,
            max_message_size=config.max_message_size,
        )
        self._decode: Decode = make_decoder(self._limits, core)
        """``codec.decode_body`` with this node's limits, by the selected core."""
        self._encode: Encode = make_encoder(core)
        """``encode_plain`` (an outgoing datagram's body) by the selected core."""
        self._window = SendWindow(
            window_size=config.window_size, max_pending_bytes=config.max_pending_bytes,
            window_bytes=config.effective_window_bytes(len(self.members)),
            min_bytes=2 * config.datagram_budget, increase=config.datagram_budget,
            loss_holdoff=config.nack_retry,
        )
        self._repeats = HeartbeatRepeats()
        """Each sender's latest heartbeat by its body (``repeats``): a repeat is not
        decoded again, and may only renew its sender's liveness."""
        self._speakers: dict[int, SessionState] = {}
        """Per node id, the sealing session whose nacks count as that node's loss
        signals (``_loss_speaker``)."""
        self._holding = False
        self._seen_stable = 0
        self._batcher = Batcher()
        self._own: dict[tuple[int, int], list[tuple[bytes, ServiceLevel]]] = {}
        """Own messages by the (view, vertex seq) that completed them, until certain to be
        in their view's cut (delivered here and stable) or the view is closed."""
        self._own_delivered: set[tuple[int, int]] = set()
        self._events: list[Event] = []
        self._stats = NodeStats()
        self._counters = ReliableCounters()
        self._limiter = PeerLimiter(config.repair_limits(len(self.members)))
        """Per-peer nack and repair buckets, shared by every view (a retired view's
        answers to nacks count against the same budget as the current one's)."""
        self._lateness = Lateness(config.nack_reorder_max)
        """How late copies come (``reliable.repair``), shared by every view."""
        state = (durable.restarted(incarnation_floor) if durable is not None
                 else DurableState.first(node_id, incarnation_floor))
        if initial_view is not None and state.known is None:
            # the initial view lists this node's first incarnation by agreement
            state = DurableState(node_id, state.incarnation, known=initial_view,
                                 max_view_id=initial_view.view_id)
        settings = Settings(_agreed_rule(config), config.phi, config.expected_votes,
                            config.max_message_size, self.members)
        self.membership = MembershipLayer(
            config, node_id=node_id, potential=self.members, settings=settings,
            durable=state, rng=rng, now=now, drop=self._drop,
            counters=self._counters,
        )
        self.membership.make_session = self._make_session
        self.membership.view_closed = self._view_closed
        if config.ordering != "toto":
            self.membership.view_tree = partial(
                view_tree, shape=config.swap_tree, fanout=config.swap_fanout,
                root_group=config.swap_root_group if config.ordering == "hybrid" else 1)
            self.membership.tree_problem = tree_problem
        if initial_view is not None:
            self.membership.install_initial(initial_view, now)

    # ------------------------------------------------------------------ public API

    @property
    def incarnation(self) -> int:
        return self.membership.me.incarnation

    @property
    def view(self) -> ViewRecord | None:
        """The installed view (``None`` before the first one)."""
        return self.membership.view

    @property
    def primary(self) -> bool:
        """In a primary view: ordered messages are delivered."""
        return self.membership.primary

    @property
    def left(self) -> bool:
        """Left the group gracefully (``leave``) and was taken out of the view."""
        return self.membership.left

    @property
    def phi(self) -> float:
        """The threshold the ordering engine of the current view uses."""
        session = self.membership.session
        if session is not None:
            return session.phi
        from .session import ordering_for

        cfg = self.config
        return ordering_for(cfg.rule, cfg.phi, len(self.members)).resolve_phi(len(self.members))

    @property
    def stats(self) -> NodeStats:
        s = self._stats
        c = self._counters
        m = self.membership
        s.vertices_sent = c.vertices_sent
        s.vertices_released = c.vertices_released
        s.retransmissions = c.retransmissions
        lateness = self._lateness
        s.late_copies = lateness.samples
        s.nacks_waited = lateness.waited_again
        s.nack_reorder_allowance = lateness.allowance(self._now)
        s.duplicates = c.duplicates
        s.flushes = m.flushes
        s.flush_deliveries = m.flush_deliveries
        session = m.session
        s.pending_dag_size = session.undelivered if session is not None else 0
        s.window_occupancy = session.reliable.unstable() if session is not None else 0
        s.window_bytes_used = session.reliable.unstable_bytes() if session is not None else 0
        s.window_bytes = self._window.cwnd
        s.window_losses = self._window.losses
        s.window_losses_uncorroborated = self._window.uncorroborated
        s.holding_releases = int(self._holding)
        s.pending_bytes = self._batcher.pending_bytes
        s.retransmit_buffer = sum(
            len(v) for sess in self._sessions() for v in sess.reliable.store.values()
        )
        s.view_id = m.view.view_id if m.view is not None else 0
        s.primary = int(m.primary)
        return s

    def submit(
        self, payload: object, now: float, *, service: ServiceLevel = ServiceLevel.AGREED
    ) -> None:
        """Queue one application message (bytes; anything else is a ``ClientError``, also
        in the compiled build, hence ``object``); it is sent in the current (or next)
        primary view. ``BackpressureError`` when the window or the send queue is full."""
        self._now = now
        if not isinstance(payload, bytes):
            raise ClientError("bad_payload", "payload must be bytes")
        if len(payload) > self.config.max_message_size:
            limit = self.config.max_message_size
            raise ClientError("message_too_large", f"{len(payload)} > {limit}")
        service = ServiceLevel(service)
        session = self.membership.sending_session()
        unstable = session.reliable.unstable() if session is not None else 0
        flight = session.reliable.unstable_bytes() if session is not None else 0
        if not self._window.admits(len(payload), unstable, flight, self._batcher.pending_bytes):
            self._stats.backpressure_events += 1
            if not self._window.blocked:
                self._window.blocked = True
                self._emit(BackpressureApplied(unstable, self._batcher.pending_bytes))
            raise BackpressureError(
                f"window {unstable}/{self.config.window_size} vertices, "
                f"{flight}/{self._window.cwnd} bytes, "
                f"{self._batcher.pending_bytes} bytes queued"
            )
        self._batcher.add(payload, service)
        self._stats.messages_submitted += 1

    def receive_datagram(
        self, data: bytes, now: float, *,
        decoded: tuple[Sealed | None, bytes, AnyDatagram] | None = None,
    ) -> bool:
        """One datagram from the network. ``decoded``: the simulator, which hands one
        multicast to every member, authenticates and decodes it once (``unseal``, with
        the same keys and limits); each member still runs its own replay check.

        Returns ``True`` when the datagram only renewed its sender's liveness (a repeat
        of a heartbeat already applied in this view: ``repeats``,
        ``MembershipLayer.renew``): then it changed no timer, queued nothing to send and
        raised no event, so the caller need not look for output."""
        self._now = now
        stats = self._stats
        stats.bytes_received += len(data)
        auth = self._auth
        wall_ms = int((now + self.wall_offset) * 1000)
        repeats = self._repeats
        known: tuple[Datagram, bool] | None = None
        body: bytes | memoryview
        try:
            if decoded is not None:
                state = auth.admit(decoded[0], wall_ms)
                body = decoded[1]
                dg = decoded[2]
                known = repeats.lookup(dg.sender, body)
            else:
                if isinstance(auth, Authenticator):
                    body = open_body(data, auth, self._limits, wall_ms)
                elif len(data) > self._limits.max_datagram_bytes:
                    raise DecodeError("too_large", f"{len(data)} bytes")
                else:
                    body = auth.open(data, wall_ms)
                state = auth.last_admitted
                if state is not None and state.sender is not None:
                    known = repeats.lookup(state.sender, body)
                dg = known[0] if known is not None else self._decode(body)
            if known is not None:
                dg = known[0]
            elif isinstance(dg, Datagram) and dg.sender in self.members:
                repeats.note(body, dg)
        except DecodeError as exc:
            if exc.reason in _CLOCK_REFUSALS:
                self._note_refused_clock(data, decoded, wall_ms)
            self._drop(exc.reason, exc.detail)
            return False
        if state is not None:
            if state.sender is None:
                state.sender = dg.sender
            elif state.sender != dg.sender:
                # a session is one daemon's life: an honest daemon never speaks for
                # another id; a key holder that does is refused whole
                self._drop("session_sender_mismatch",
                           f"session of node {state.sender} claims node {dg.sender}")
                return False
            if self._clocks.refusing:
                self._clocks.admitted(dg.sender)
        stats.datagrams_received[KIND_NAMES[dg.kind]] += 1
        if isinstance(dg, MembershipDatagram):
            if dg.sender == self.node_id and dg.incarnation == self.incarnation:
                stats.own_echoes += 1
                return False
            self.membership.on_membership(dg, now)
            return False
        if isinstance(dg, SwapDatagram):
            self._on_swap(dg, now)
            return False
        if dg.sender == self.node_id:
            stats.own_echoes += 1
            return False
        repeat = known is not None and known[1]
        if state is None or self._loss_speaker(dg.sender, state, wall_ms):
            return self._to_membership(dg, repeat, now)
        # another live daemon's session speaks for this id: its nacks are still
        # answered (rate-limited per member) but are no loss signal of that member
        signals = self._counters.loss_signals
        before = signals.get(dg.sender)
        renewed = self._to_membership(dg, repeat, now)
        if signals.get(dg.sender) != before:
            stats.loss_signals_unbound += 1
            if before is None:
                del signals[dg.sender]
            else:
                signals[dg.sender] = before
        return renewed

    def _to_membership(self, dg: Datagram, repeat: bool, now: float) -> bool:
        """A data-plane datagram to the membership layer: a ``repeat`` (``repeats``) may
        only renew its sender's liveness (then ``True``); one that the view's session
        applied in full as a heartbeat is noted so its repeats may."""
        membership = self.membership
        if repeat and membership.renew(dg.sender, dg.view, now):
            return True
        if membership.on_datagram(dg, now):
            self._repeats.applied(dg)
        return False

    def _loss_speaker(self, sender: int, state: SessionState, wall_ms: int) -> bool:
        """Is ``state`` the session that speaks for ``sender``? The first session heard
        for an id is, as long as it is heard within ``suspect_timeout``; then the next
        one (a restart). A key holder claiming a live member's id from a session of its
        own so cannot make its nacks count as that member's loss signals
        (``flow.SendWindow.on_loss`` judges each member's signals against the
        others')."""
        bound = self._speakers.get(sender)
        if bound is state:
            return True
        if (bound is None or bound.sender != sender
                or wall_ms - bound.last_heard_ms > self.config.suspect_timeout * 1000):
            self._speakers[sender] = state
            return True
        return False

    def _note_refused_clock(
        self, data: bytes,
        decoded: tuple[Sealed | None, bytes, AnyDatagram] | None, wall_ms: int,
    ) -> None:
        """A datagram refused for its send time (``stale``/``future``): if it is
        authentic, whose clock is how far off (``wire.clock``; at most one such check per
        ``PROBE_INTERVAL_MS``)."""
        clocks = self._clocks
        if not clocks.may_probe(wall_ms):
            return
        if decoded is not None:
            sealed, _, dg = decoded
        else:
            try:
                sealed, body = self._auth.unseal(data)
                dg = self._decode(body)
            except DecodeError:
                return  # not authentic (or not decodable): it tells nothing
        if sealed is None or dg.sender == self.node_id:
            return
        if clocks.refused(dg.sender, sealed.sent_ms, wall_ms, self._now):
            self._emit(PeerClockRefused(
                dg.sender, (sealed.sent_ms - wall_ms) / 1000, self.config.replay_window))

    def clock_offsets(self) -> dict[int, PeerClock]:
        """Per listed peer heard in the last ``wire.clock.HORIZON_MS``: its clock ahead of
        this node's wall clock (seconds, from its least delayed recent datagram) and
        whether its datagrams are refused for it (beyond ``replay_window``). Empty for
        an insecure node: its datagrams carry no send time."""
        auth = self._auth
        wall_ms = int((self._now + self.wall_offset) * 1000)
        return self._clocks.offsets(auth.guard.sessions, auth.session, self.node_id, wall_ms,
                                    self._now)

    def handle_timer(self, now: float) -> None:
        self._now = now
        self.membership.handle_timer(now)

    def next_timer(self) -> float | None:
        t = self.membership.next_timer(self._now)
        session = self.membership.session
        if session is not None and session.swap is not None:
            s = session.next_swap_timer()
            if s is not None and (t is None or s < t):
                return s
        return t

    def _on_swap(self, dg: SwapDatagram, now: float) -> None:
        """A swap datagram (``protocols/swap``): for the current view's session when it
        is addressed here; another view's is dropped (its sender resends it until the
        view changes)."""
        if dg.dst != self.node_id or dg.sender == self.node_id:
            return
        session = self.membership.session
        if session is None or session.swap is None or session.view_id != dg.view:
            self._drop("swap_other_view", f"view {dg.view} from node {dg.sender}")
            return
        session.swap_receive(dg, now)

    @property
    def outstanding(self) -> int:
        """Own messages submitted and not yet known to be delivered everywhere (queued,
        in flight, or delivered here but not yet held by every member)."""
        return sum(len(msgs) for msgs in self._own.values()) + self._batcher.queued

    @property
    def unsent(self) -> int:
        """Own messages submitted and not yet in a vertex (behind a full window)."""
        return self._batcher.queued

    @property
    def undelivered(self) -> int:
        """Vertices of the current view carrying messages not yet delivered here."""
        session = self.membership.session
        return session.undelivered if session is not None else 0

    def peers(self) -> dict[int, dict[str, float | int | bool | None]]:
        """Per listed node: ``last_heard`` (the caller's clock, ``None``: never),
        ``incarnation`` (-1: unknown), ``alive`` (not suspected), ``in_view``,
        ``held_back_s`` (seconds this coordinator still leaves it out of view changes:
        heard, but it answered none; ``None``: not held back), ``awaited_s`` (seconds the
        view change this node coordinates has been blocked awaiting it:
        ``view_change_blocked``; ``None``: not awaited), ``clock_offset_s`` (its clock
        ahead of this node's, ``clock_offsets``; ``None``: not heard lately, or
        insecure) and ``clock_refused`` (its datagrams refused for their send times)."""
        m = self.membership
        now = self._now
        view = m.view
        blocked = m.blocked_for(now)
        clocks = self.clock_offsets()
        out: dict[int, dict[str, float | int | bool | None]] = {}
        for node in sorted(set(self.members) | set(view.nodes if view else ())):
            if node == self.node_id:
                continue
            inc = m.incarnation_of(node)
            clock = clocks.get(node)
            out[node] = {
                "last_heard": m.detector.last_heard.get(node),
                "incarnation": -1 if inc is None else inc,
                "alive": m.detector.alive(node, now),
                "in_view": view is not None and view.member(node) is not None,
                "held_back_s": m.held_back_for(node, now),
                "awaited_s": (now - blocked.since
                              if blocked is not None and node in blocked.awaited else None),
                "clock_offset_s": None if clock is None else clock.offset_s,
                "clock_refused": clock is not None and clock.refused,
            }
        return out

    @property
    def view_change_blocked(self) -> dict[str, Any] | None:
        """While this node, as coordinator, keeps proposing a view that a member not
        heard from may have decided (``ViewChangeBlocked``): ``view``, ``awaited`` (those
        members), ``rounds`` and ``blocked_s``; ``None`` otherwise."""
        m = self.membership
        b = m.blocked_for(self._now)
        if b is None:
            return None
        return {"view": b.view, "awaited": list(b.awaited), "rounds": b.rounds,
                "blocked_s": self._now - b.since}

    @property
    def quorum(self) -> dict[str, Any]:
        """Votes needed for a primary view, and live listed nodes (this one included).

        When the latest view this node knows (``DurableState.known``) counted another
        list of potential members (a reloaded or restarted-with-another ``members``),
        ``last_view`` says how many of that list must agree on its successor (its
        acceptors: ``agreement.choose_proposal``) and how many of them are reachable: a
        shrunk list can form no view until a majority of the old one takes part.
        ``not_counted``: the promisers of this node's latest round as coordinator whose
        votes did not count (``agreement.counted_acceptors``: an earlier incarnation
        than the latest view lists, or a state file begun after it), until a view is
        installed."""
        m = self.membership
        live = m.alive_members(self._now)
        q: dict[str, Any] = {"needed": needed(self.members, self.config.expected_votes),
                             "listed": len(self.members),
                             "reachable": len([n for n in live if n in self.members])}
        known = m.durable.known
        if known is not None and set(known.potential) != set(self.members):
            q["last_view"] = {
                "id": known.view_id, "nodes": sorted(known.potential),
                "listed": len(known.potential),
                "needed": needed(known.potential, self.config.expected_votes),
                "reachable": len([n for n in live if n in known.potential])}
        if m.uncounted:
            q["not_counted"] = list(m.uncounted)
        return q

    @property
    def core(self) -> dict[str, str]:
        """Which implementation runs each part of the data path (``native``: the Rust
        extension; ``pure``: the Python reference, ``AMCAST_CORE``): ``decode`` (the
        datagram decoder), ``seal`` (sealing, opening and the replay guard), ``order``
        (the ToTo engine of the current view, else the one a view of the listed members
        would get) and ``reliable`` (the reliable causal layer of the current view, else
        the one a view would get: it follows the core unless ``AMCAST_RELIABLE=pure``;
        docs/native.md)."""
        session = self.membership.session
        if self.config.ordering != "toto":
            order = "pure"  # the swap orderings are Python only
        elif session is not None and session.swap is None:
            order = engine_core(session.engine)
        else:
            order = engine_core_for(self._core, len(self.members))
        reliable = (layer_core(session.reliable) if session is not None
                    else layer_core_for(self._core))
        return {"decode": decoder_name(self._decode),
                "seal": "pure" if isinstance(self._auth, Authenticator) else "native",
                "order": order, "reliable": reliable}

    @property
    def leaving_started(self) -> bool:
        """``leave`` was called."""
        return self.membership.leaving

    def peek(self, data: bytes) -> AnyDatagram:
        """Decode a datagram with this node's keys, without the replay check (tests and
        tools); ``DecodeError``."""
        return self.unseal(data)[2]

    def unseal(self, data: bytes) -> tuple[Sealed | None, bytes, AnyDatagram]:
        """Authenticate and decode without the replay check, for ``receive_datagram``'s
        ``decoded`` (the simulator): the sealed header, the body and the datagram;
        ``DecodeError``. ``codec.decode_unchecked`` with the decoder of the selected
        core."""
        if len(data) > self._limits.max_datagram_bytes:
            raise DecodeError("too_large", f"{len(data)} bytes")
        sealed, body = self._auth.unseal(data)
        return sealed, bytes(body), self._decode(body)

    # ------------------------------------------------------------------ keys

    def set_keyring(self, keys: Keyring, now: float) -> None:
        """A reloaded key ring (rollover): its ids are accepted at once; sending moves
        to the newest key every live peer advertises (``amcast.protocols.wire.keys``).
        ``ConfigurationError`` for an insecure node (it needs a restart)."""
        if not self._auth.secure:
            raise ConfigurationError("an insecure node takes keys only at a restart")
        self._auth.set_keys(keys, int((now + self.wall_offset) * 1000))

    def key_status(self) -> dict[str, object]:
        """Key ids held, the one sent with, and per peer node the id it sends with and
        the newest it holds (from its datagrams of the last few seconds)."""
        auth = self._auth
        keys = auth.keys
        if keys is None:
            return {"sealed": False}
        wall_ms = int((self._now + self.wall_offset) * 1000)
        peers: dict[int, dict[str, int]] = {}
        for session, st in auth.guard.sessions.items():
            if session == auth.session or st.sender is None or st.sender == self.node_id:
                continue
            seen = peers.get(st.sender)
            if seen is None or st.last_heard_ms > seen["heard_ms"]:
                peers[st.sender] = {"sends_with": st.key_id, "newest": st.newest_key,
                                    "heard_ms": st.last_heard_ms}
        return {
            "sealed": True, "ids": list(keys.ids), "sends_with": auth.send_key_id,
            "sessions": len(auth.guard.sessions), "sessions_evicted": auth.guard.evicted,
            "peers": [{"node": node, "sends_with": p["sends_with"], "newest": p["newest"],
                       "heard_s_ago": round(max(0, wall_ms - p["heard_ms"]) / 1000, 3)}
                      for node, p in sorted(peers.items())],
        }

    def released(self, view_id: int) -> dict[int, int] | None:
        """Per sender, the last seq released in view ``view_id`` (``None``: not held)."""
        for sess in self._sessions():
            if sess.view_id == view_id:
                return dict(sess.reliable.releaser.released)
        return None

    def reconfigure(self, members: Sequence[int], now: float) -> None:
        """Reload the potential-member list (SIGHUP). The coordinator's list becomes the
        next view's; a member no longer listed is left out, a newly listed one taken in."""
        if self.node_id not in members or len(set(members)) != len(members):
            raise ClientError("bad_membership", "node_id must be one of distinct members")
        check_budget(self.config, len(members))
        self._now = now
        self.members = tuple(sorted(members))
        cfg = self.config
        self._limiter.set_limits(cfg.repair_limits(len(self.members)))
        self.membership.reconfigure(self.members, Settings(
            _agreed_rule(cfg), cfg.phi, cfg.expected_votes, cfg.max_message_size, self.members))
        self.membership.handle_timer(now)

    def leave(self, now: float) -> None:
        """Leave the group gracefully: the next view goes on without this node."""
        self._now = now
        self.membership.leave(now)
        self.membership.handle_timer(now)

    def state_to_persist(self) -> bytes | None:
        """The durable membership state, when it changed since the last call. Write it
        (atomically, fsynced) before sending the datagrams of the same step."""
        m = self.membership
        if not m.durable_dirty:
            return None
        m.durable_dirty = False
        return m.durable.encode()

    def hold_deliveries(self, on: bool, now: float) -> None:
        """End-to-end flow control: a local consumer (a client of the daemon) falls
        behind. While ``on`` this member releases (and so acknowledges and delivers)
        nothing more, so every sender's window closes within one window and the whole
        group slows to what its slowest consumer takes; received vertices wait, bounded
        by those windows. Its own sends stop too (``submit`` is refused with
        ``BackpressureError`` until it lets go). A view change's flush is never held back."""
        self._now = now
        if on == self._holding:
            return
        self._holding = on
        self._window.paused = on
        session = self.membership.session
        if session is not None:
            session.hold_releases(on, now)

    def datagrams_to_send(self) -> list[bytes]:
        """Called after every input, usually with nothing to send: the window clock
        always runs (its loss and stability signals are applied in input order), the
        rest only when there is something queued (messages, a blocked window, datagrams
        of a layer)."""
        now = self._now
        m = self.membership
        session = m.sending_session()
        # the window clock: feed the byte window its loss and stability signals
        c = self._counters
        if session is not None:
            session.reliable.unstable_bytes()  # moves own_bytes_stable on
        signals = c.loss_signals
        if signals:
            for member, others in signals.items():
                self._window.on_loss(member, now, others)
            signals.clear()
        if c.own_bytes_stable != self._seen_stable:
            self._window.on_stable(c.own_bytes_stable - self._seen_stable)
            self._seen_stable = c.own_bytes_stable
        batcher = self._batcher
        if session is not None and batcher.queue:
            sent: list[tuple[int, list[tuple[bytes, ServiceLevel]]]] = []
            session.send_batches(batcher, self._window, now, sent)
            view = session.view_id
            for seq, messages in sent:
                self._own[(view, seq)] = messages
        window = self._window
        if window.blocked:
            unstable = session.reliable.unstable() if session is not None else 0
            flight = session.reliable.unstable_bytes() if session is not None else 0
            if window.should_release(unstable, flight, batcher.pending_bytes):
                window.blocked = False
                self._emit(BackpressureReleased(unstable, batcher.pending_bytes))
        # the same order as ever: membership, the retired views (oldest first), the
        # current view; ``take_datagrams`` of an empty layer returns [] and changes nothing
        out: list[AnyDatagram] = []
        if m.outq:
            out.extend(m.take_datagrams())
        for sess, _ in m.retired.values():
            out.extend(sess.reliable.take_datagrams(now))
        if m.session is not None:
            out.extend(m.session.reliable.take_datagrams(now))
            if m.session.swap is not None:
                out.extend(m.session.take_swap_datagrams())
        if not out:
            return []
        auth = self._auth
        wall_ms = int((now + self.wall_offset) * 1000)
        encode_body = self._encode
        if isinstance(auth, Authenticator) and encode_body is encode_plain:
            data = [encode(dg, auth, wall_ms) for dg in out]
        else:
            seal = auth.seal
            data = [seal(encode_body(dg), wall_ms) for dg in out]
        counts, stats = self._stats.datagrams_sent, self._stats
        for dg, raw in zip(out, data, strict=True):
            counts[KIND_NAMES[dg.kind]] += 1
            stats.bytes_sent += len(raw)
            if isinstance(dg, Datagram):
                if dg.kind == 0:
                    stats.data_bytes_sent += len(raw)
                elif dg.kind == _REPAIR:
                    stats.repair_bytes_sent += len(raw)
                stats.nack_ranges_sent += len(dg.nacks)
        return data

    def events(self) -> list[Event]:
        """What happened since the last call, in order: this Node's events and those
        its membership layer (and the view sessions under it) raised."""
        self._collect()
        events = self._events
        if not events:  # the usual call: nothing happened (own messages still pruned)
            if self._own:
                self._prune_own()
            return []
        self._events = []
        own = self._own
        me = self.node_id
        stats = self._stats
        for ev in events:
            if type(ev) is BatchDelivered:
                stats.messages_delivered += len(ev.payloads)
                if ev.sender == me and (ev.view, ev.seq) in own:
                    self._own_delivered.add((ev.view, ev.seq))
            elif type(ev) is ViewInstalled:
                stats.views_installed += 1
        if own:
            self._prune_own()
        return events

    def _prune_own(self) -> None:
        """Forget own messages delivered here and stable: every member holds them, so
        every cut of their view contains them (they are delivered everywhere)."""
        session = self.membership.session
        if session is None:
            return
        view = session.view_id
        stable = session.reliable.acks.stable(self.node_id)
        own, done = self._own, self._own_delivered
        while own:
            key = next(iter(own))  # oldest first: the dict keeps sending order
            if key[0] != view or key[1] > stable or key not in done:
                break
            del own[key]
            done.discard(key)

    # ------------------------------------------------------------------ internals

    def _sessions(self) -> list[ViewSession]:
        m = self.membership
        out = [s for s, _ in m.retired.values()]
        if m.session is not None:
            out.append(m.session)
        return out

    def _make_session(self, view: ViewRecord, now: float) -> ViewSession:
        self._batcher.restart_partial()
        session = ViewSession(
            view.view_id, view.nodes, node_id=self.node_id, config=self.config,
            tree=view.tree,
            rng=random.Random(self._rng.random()), now=now, drop=self._drop,
            counters=self._counters, limiter=self._limiter,
            lateness=self._lateness, core=self._core,
        )
        if self._holding:
            session.hold_releases(True, now)
        return session

    def _view_closed(self, view_id: int, cut: dict[int, int] | None) -> None:
        """A view of ours ended. Own messages inside its cut were delivered by the
        primary component; the others (this member was excluded) are reported, never
        sent again: a member excluded with us may have delivered them already. Those
        inside the cut that this member never delivered are named too
        (``delivered_elsewhere``): whoever counts own messages in send order must
        account for them before the ones in doubt."""
        keys = sorted(key for key in self._own if key[0] == view_id)
        if not keys:
            return
        me = self.node_id
        self._collect()
        done = self._own_delivered | {  # and those delivered in this step (a flush)
            (ev.view, ev.seq) for ev in self._events
            if type(ev) is BatchDelivered and ev.sender == me}
        mine = [(key[1], self._own.pop(key), key in done) for key in keys]
        self._own_delivered.difference_update(keys)
        limit = -1 if cut is None else cut.get(self.node_id, 0)
        doubt = tuple(p for seq, msgs, here in mine if seq > limit and not here for p, _ in msgs)
        seen = tuple(p for seq, msgs, here in mine if seq > limit and here for p, _ in msgs)
        elsewhere = tuple(p for seq, msgs, here in mine
                          if seq <= limit and not here for p, _ in msgs)
        if doubt or seen or elsewhere:
            self._stats.messages_in_doubt += len(doubt) + len(seen)
            if cut is None:
                self._stats.messages_outcome_unknown += len(doubt) + len(seen)
            self._emit(MessagesInDoubt(view_id, doubt, seen, elsewhere,
                                                cut is not None))

    def _collect(self) -> None:
        """Move the membership layer's events behind ours (before raising one of ours:
        one list in the order they were raised)."""
        raised = self.membership.take_events()
        if raised:
            self._events.extend(raised)

    def _emit(self, event: Event) -> None:
        self._collect()
        self._events.append(event)

    def _drop(self, reason: str, detail: str = "") -> None:
        drops = self._stats.drops
        drops[reason] = drops.get(reason, 0) + 1
        self._emit(DatagramDropped(reason, detail))
