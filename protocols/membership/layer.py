"""The membership layer: views, failure detection, flush, joins, leaves, partitions.

Section 2 of the ToTo paper assumes a membership service with virtual synchrony; this
state machine provides it over the per-view sessions (``amcast.protocols.session``),
sans-IO like every layer. Its guarantees (docs/membership.md says them for users):

- Views are ``(view id, members)``; ids are unique and increase (durable ballots and a
  wall-clock floor keep them increasing across restarts); every member installs the
  decided views in the same order (one Paxos instance per successor, ``agreement``).
- Sequence numbers, the causality DAG and the ToTo engine are per view: a datagram of
  another view never enters this view's DAG.
- Virtual synchrony: a view is closed by a flush. The members of the next view freeze
  it, agree on a cut (everything any of them released, ``cut``), repair up to it, and
  deliver the rest of the final DAG in the deterministic order ``TotalOrderEngine.close``
  gives (their earlier deliveries are prefixes of it, the ToTo rules decide only on
  what the DAG holds). Members that install v and v+1 deliver the same set in v; so
  does a member leaving gracefully: it promises like the others (after its goodbye it
  makes no own vertex), and once the view without it is decided it closes v at the
  same cut (``_excluded_by``, ``_finish_leaving``) before it goes.
- Primary component: only a view with a strict majority of the potential members
  (``quorum``) is installed, and a member delivers ordered messages only while it hears
  a majority of its view (its *lease*). Without it the member abandons the view, says
  so (``QuorumLost``), holds its sends and keeps announcing itself (``JOIN``) until a
  primary view takes it in again.
- Joins and restarts: a listed daemon that (re)starts announces itself with a fresh
  incarnation and is taken in by the next view; it never reuses a (view, seq) pair.
  A daemon whose ordering settings differ, or that claims the node id of a live
  member, is refused with a reason on both sides. A joiner that is heard but answers
  no round (it may not hear us) is left out of rounds for doubling holds
  (``JoinerHeldBack``) until it names a view it learned from us; a hold is renewed
  without a round while its JOINs show it did not hear the history we sent it.

Phases (``phase``; ``TRANSITIONS`` there lists every move, ``become`` makes them):

- ``JOINING``: no view yet; it announces itself (``JOIN``) every heartbeat interval.
- ``STEADY``: in a primary view, ordering (the only phase with own new vertices).
- ``FROZEN``: it promised a ballot (``handlers.promise``): the view is frozen until the
  next one is installed (a ``PREPARE`` of a later ballot keeps it frozen).
- ``INSTALLING``: the successor with us is decided (``on_decided``): the view is closed at
  the decided cut, repaired up to it (``check_waits``), flushed and the successor
  installed (``_install``: ``STEADY``, or ``FROZEN`` when a later ballot was promised
  meanwhile). A view decided that does not succeed ours (we missed a decision) is
  installed at once, from any phase, with a gap (``OrderGap``) where something may have
  been missed.
- ``LEAVING``: a graceful leaver for whom the view without it is decided closes its
  last view at the same cut (``_excluded_by``), then goes: ``LEFT``, the end.
- ``ABANDONED``: no lease (``no_quorum``), excluded (a later view heard of and not
  installed here, or a decided one without us), paused, or a flush stuck for long
  (``_lose_view``): it delivers nothing more of the view and announces itself. Its
  session still repairs: if the successor decided with us closes that view,
  ``REJOINING`` completes the cut as ``INSTALLING`` does, still outside a primary view.
- A closing phase that cannot complete its cut within ``4 * flush_timeout`` gives the
  view up (``ABANDONED``), or, leaving, just goes (``LEFT``).

The votes (``accept_wait``: a member's vote once it holds the cut; ``history_wait``: its
vote once it knows how its view ended) belong to a ballot, not to the member's phase:
they may be pending in ``FROZEN``, a closing phase or outside a primary view. The
agreement's messages are handled in ``handlers``; the coordinator's ``Round`` has its
own phases (``agreement``).

Coordination: every node tracks who is alive; the lowest live compatible node is the
coordinator and runs a ``Round`` whenever the view it sees differs from the live set
(a crash, a pause, a join, a restart, a leave, a partition that healed, a member that
abandoned). Rounds that collide are sorted out by ballots and random back-off. A
proposal that a member not heard from may have decided is kept (Paxos) until it is
decided; when no live member can complete its cut (that member died after its promise:
a double failure), the coordinator names the member it awaits (``ViewChangeBlocked``).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, fields, replace

from ..events import (
    Event,
    FlushCompleted,
    JoinerHeldBack,
    JoinRefused,
    MemberSuspected,
    NodeIdClaimed,
    OrderGap,
    QuorumLost,
    ViewChangeBlocked,
    ViewInstalled,
    ViewProposed,
)
from ..reliable.layer import Drop, ReliableCounters, next_beat
from ..session import ViewSession
from ..wire.codec import Datagram, MembershipDatagram
from ..wire.membership import (
    ZERO_BALLOT,
    Accept,
    Accepted,
    Ballot,
    Install,
    Join,
    Member,
    Message,
    Position,
    Prepare,
    Promise,
    Proposal,
    Refuse,
    Reject,
    Settings,
    ViewRecord,
)
from . import handlers
from .agreement import (
    ACCEPT,
    INSTALL,
    PREPARE,
    Round,
    TreeFor,
    choose_proposal,
    counted_acceptors,
    latest_known,
    may_hold,
    reported_holders,
    unheard_holders,
)
from .config import MembershipConfig
from .detector import FailureDetector
from .durable import DurableState
from .handlers import ACCEPT_VOTE_AFTER
from .phase import (
    ANNOUNCING,
    CLOSING,
    INSTALL_PENDING,
    PRIMARY,
    TRANSITIONS,
    Closing,
    Phase,
    TransitionError,
)
from .quorum import has_quorum

_INSTALL_PENDING = tuple(INSTALL_PENDING)
_ANNOUNCING = tuple(ANNOUNCING)
"""The checks made per datagram and per input as tuples: ``in`` a tuple compares by
identity (a ``Phase`` equals only itself) without the Python-level ``Enum.__hash__`` a
frozenset lookup calls, so the answer is the same."""

MAX_FUTURE_DATAGRAMS = 2048
HISTORY = 64
RETIRE_AFTER = 10.0
DEAF_JOINER_MAX_HOLD = 64
"""A joiner that did not answer a round it was a candidate of, and has learned no view
since, is left out of the next rounds for ``suspect_timeout`` times 1, 2, 4, ... up to
this many (``_hold_back_silent_joiners``, ``_renew_holds``): 51 s with the default
0.8 s. Each round for it stops ordering for ``flush_timeout`` and ends in a view of the
same members; a joiner that hears again names a newer view and is taken in at once,
whatever its hold (``_held_back``)."""


@dataclass(slots=True)
class Peer:
    """What we know of another daemon from its membership messages."""

    incarnation: int = -1
    settings: Settings | None = None
    leaving: bool = False
    known_view_id: int = 0
    joining_since: float = math.inf
    """When it started announcing itself (JOIN) with this incarnation."""
    last_in_view: float = -math.inf
    """Last data-plane datagram of our current view from it."""
    refused: str | None = None
    """Why its current incarnation is refused (``None``: it is not)."""
    refused_detail: str = ""
    reported: str = ""
    last_history_reply: float = -math.inf
    held_back_until: float = -math.inf
    """Left out of rounds until then, unless it learns a later view than
    ``held_back_known`` (it answered none of our rounds: it may not hear us)."""
    held_back_known: int = 0
    missed_rounds: int = 0
    holds: int = 0
    """Holds in a row (each twice as long as the one before, ``DEAF_JOINER_MAX_HOLD``)."""
    answered_in_hold: float = math.inf
    """When this member first sent it the view history its JOINs asked for during its
    current hold (``_renew_holds``)."""
    heard: float = -math.inf
    """Last datagram of any kind from the incarnation this record holds."""
    contender: int = -1
    """An incarnation refused as a second daemon with this node's id while the one this
    record holds is live (``refuse``, ``_on_refuse``): its datagrams are answered with
    the refusal and change nothing here (-1: none)."""
    contender_reason: str = ""
    contender_detail: str = ""
    contender_heard: float = -math.inf
    incumbent: Peer | None = None
    """This record as it was before a later incarnation of a member of our view replaced
    it (``_adopt``), so that refusing that incarnation restores the member."""


@dataclass(slots=True)
class Blocked:
    """A view this member, as coordinator, keeps proposing again without deciding it
    (``MembershipLayer._note_blocked``)."""

    view: int
    awaited: tuple[int, ...]
    """Members of both views not heard from: one of them may have decided it."""
    rounds: int
    since: float
    last: float
    """When the latest such round proposed it."""


BLOCKED_REPORT_AFTER = 4
"""Rounds in a row that propose the same possibly decided view again before the
coordinator says so (``ViewChangeBlocked``; again after twice as many, and so on)."""


SessionFactory = Callable[[ViewRecord, float], ViewSession]
ViewClosed = Callable[[int, dict[int, int] | None], None]
"""``(view id, cut or None)``: a view of ours ended (None: how is unknown here)."""


class MembershipLayer:
    def __init__(
        self,
        config: MembershipConfig,
        *,
        node_id: int,
        potential: tuple[int, ...],
        settings: Settings,
        durable: DurableState,
        rng: random.Random,
        now: float,
        drop: Drop,
        counters: ReliableCounters,
    ) -> None:
        self.cfg = config
        self.node_id = node_id
        self.potential = potential
        self.settings = settings
        self.durable = durable
        self.me = Member(node_id, durable.incarnation)
        self.rng = rng
        self._events: list[Event] = []
        """What this layer and its sessions raised, in order, until ``take_events``."""
        self._drop = drop
        self._counters = counters
        self.detector = FailureDetector(node_id, suspect_timeout=config.suspect_timeout, now=now)
        self.durable_dirty = True
        self.view: ViewRecord | None = None
        self.session: ViewSession | None = None
        self.phase = Phase.JOINING
        """Where this member stands with its view (``phase``); only ``become`` sets it."""
        self.closing: Closing | None = None
        """The decision a ``CLOSING`` phase completes the view at (else ``None``)."""
        self.installed_at = -math.inf
        """When the current view was installed here (stale JOINs are judged by it)."""
        self.promised_at: float | None = None
        """When this member froze its view for a ballot (``None``: not frozen): ``FROZEN``
        in a view it orders in; it outlives that phase (``phase``)."""
        self.promised_here = durable.promised.__class__(0, 0)
        """The highest ballot this incarnation promised (the durable one may be older)."""
        self.accept_wait: tuple[Ballot, Proposal, float, bool] | None = None
        """A vote waiting for the cut to be held here: ballot, proposal, since when, and
        whether a holder voted for it already (``Accept.holder_voted``)."""
        self.leave_started: float | None = None
        self.round: Round | None = None
        self.backoff_until = now
        self.peers: dict[int, Peer] = {}
        self._holding: set[int] = set()
        """Peers with a hold (``Peer.holds``), for ``_renew_holds``."""
        self.retired: dict[int, tuple[ViewSession, float]] = {}
        self.future: dict[int, list[Datagram]] = {}
        self._future_count = 0
        self.history: dict[int, tuple[Ballot, Proposal]] = {}
        self.leaving = False
        """``leave`` was called: an intent that holds across phases."""
        self._last_delivered: Position | None = None
        self.next_join = now
        self.outq: list[MembershipDatagram] = []
        self.alive_changed = now
        self._last_alive: frozenset[int] = frozenset()
        self._suspected: set[int] = set()
        self.view_floor = durable.incarnation
        self.started = now
        self.flushes = 0
        self.flush_deliveries = 0
        self.next_tick = now
        self._now = now
        self.last_activity = now
        self._version = 0
        """Bumped whenever what ``alive_members`` reads changes (peers, view, detector)."""
        self._alive_key: tuple[float, int] = (-1.0, -1)
        self._alive: dict[int, Member] = {}
        self._candidates: list[int] = []
        """Listed nodes other than us ``alive_members`` checks (as of ``_version``)."""
        self._candidates_version = -1
        self._steady_view: ViewRecord | None = None
        """The view ``_steady`` found quorate with listed members (a per-view fact)."""
        self.future_since: dict[int, float] = {}
        self.last_foreign_view = -math.inf
        """Last data-plane datagram of a view we are not in (a primary may exist)."""
        self.repeats_skipped = 0
        """Repeated heartbeats taken as a sign of life alone (``renew``)."""
        self._claims: set[int] = set()
        """Incarnations of other daemons heard claiming our node id (reported once)."""
        self.reported_closed: int | None = None
        self.history_wait: tuple[Ballot, Proposal, float, int] | None = None
        """A vote held back until we learn how our view (the last field) ended:
        ``handlers.vote_after_history``."""
        self.blocked: Blocked | None = None
        self.uncounted: tuple[int, ...] = ()
        """Promisers of our latest round whose votes did not count
        (``agreement.counted_acceptors``): what ``Node.quorum`` reports."""
        self.lagging: tuple[Ballot, dict[int, int]] = (ZERO_BALLOT, {})
        """Promisers of the latest ballot whose installed view we hold the decision of."""
        self.make_session: SessionFactory = _no_factory
        self.view_closed: ViewClosed = _ignore_closed
        self.view_tree: TreeFor | None = None
        """With a swap ordering: a new view's swap tree from the view it succeeds
        (``swap.carry``, set by the Node); it travels in the view record."""
        self.tree_problem: Callable[[ViewRecord], str | None] | None = None
        """With a swap ordering: why a view record's swap tree is not a rooted spanning
        tree of its members (``None``: it is); set by the Node. The decoders check only
        the tree's length and ids, so a message carrying a record with a malformed tree
        is dropped here (``bad_swap_tree``) before it changes anything."""

    # ------------------------------------------------------------------ queries

    def become(self, phase: Phase, closing: Closing | None = None) -> None:
        """The one place the phase changes: ``closing`` goes with a ``CLOSING`` phase
        and with no other; a move ``phase.TRANSITIONS`` does not list is a bug."""
        if phase not in TRANSITIONS[self.phase]:
            raise TransitionError(f"{self.phase.name} -> {phase.name}")
        assert (closing is not None) == (phase in CLOSING)
        self.phase = phase
        self.closing = closing

    @property
    def primary(self) -> bool:
        """In a primary view it has not given up (``phase.PRIMARY``)."""
        return self.phase in PRIMARY

    @property
    def abandoned(self) -> bool:
        """Gave its view up (or left it) and is outside any primary view."""
        return self.phase in (Phase.ABANDONED, Phase.REJOINING, Phase.LEFT)

    @property
    def left(self) -> bool:
        """Left gracefully and out of the view (the node stops)."""
        return self.phase is Phase.LEFT

    @property
    def install_wait(self) -> Closing | None:
        """The decision being completed to install its view (``INSTALL_PENDING``)."""
        return self.closing if self.phase in INSTALL_PENDING else None

    @property
    def leave_wait(self) -> Closing | None:
        """The decision a graceful leaver completes its last view at (``LEAVING``)."""
        return self.closing if self.phase is Phase.LEAVING else None

    def sending_session(self) -> ViewSession | None:
        """The session that may carry new own vertices now, if any: only ``STEADY``
        makes them (a closing session is frozen too, ``close_at``)."""
        s = self.session
        if s is None or self.phase is not Phase.STEADY or s.reliable.frozen:
            return None
        return s

    def incarnation_of(self, node: int) -> int | None:
        """The incarnation of ``node`` we would admit (a refused one is not). Another
        incarnation than a member of our view has replaces it only once it has asked to
        join two heartbeat intervals ago, the old one silent in the view since: until then
        it may be a second daemon with the same id (``_check_duplicate``). It is a later
        one (a restart) or, where the later one was a second daemon that we took in and
        that is gone, the earlier one (``_outlived``)."""
        peer = self.peers.get(node)
        member = self.view.member(node) if self.view is not None else None
        if (peer is not None and peer.incarnation >= 0 and peer.refused is None
                and (member is None or (peer.incarnation != member.incarnation
                                        and self._now >= peer.joining_since
                                        + 2 * self.cfg.heartbeat_interval))):
            return peer.incarnation
        return member.incarnation if member is not None else None

    def _listed(self, node: int) -> bool:
        return node in self.potential or (self.view is not None and node in self.view.potential)

    def alive_members(self, now: float) -> dict[int, Member]:
        """Live, compatible, listed nodes (with their current incarnation), us included.

        Asked after every input, so: the listed nodes it may hold (peers and view
        members, in the same set order as ever) are kept per ``_version`` (bumped
        wherever peers are added, the view or the member list change), and an equal
        ``Member`` of the previous answer is reused (they are immutable)."""
        self._now = now
        version = self._version
        if now == self._alive_key[0] and version == self._alive_key[1]:
            return self._alive
        if self._candidates_version != version:
            self._candidates_version = version
            me = self.node_id
            self._candidates = [
                node for node in set(self.peers) | set(self.view.nodes if self.view else ())
                if node != me and self._listed(node)
            ]
        previous = self._alive
        out = self._alive = {self.node_id: self.me}
        self._alive_key = (now, version)
        alive = self.detector.alive
        for node in self._candidates:
            if not alive(node, now):
                continue
            inc = self.incarnation_of(node)
            if inc is not None:
                member = previous.get(node)
                out[node] = (member if member is not None and member.incarnation == inc
                             else Member(node, inc))
        return out

    def coordinator(self, alive: dict[int, Member], now: float) -> int | None:
        """Who proposes views: the lowest live member of our primary view; outside a
        primary view, the lowest live node, unless a primary view is audible (its
        members will take us in)."""
        if self.primary and self.view is not None:
            view = self.view
            inside = [n for n, m in alive.items()
                      if view.member(n) == m and not self._abandoned_member(n, m)]
            return min(inside) if inside else None
        if now - self.last_foreign_view <= self.cfg.suspect_timeout:
            return None
        return min(alive)

    @property
    def last_delivered(self) -> Position | None:
        """(view id, position) of the last ordered message delivered here."""
        s = self.session
        if s is not None and s.last_position is not None:
            return (s.view_id, s.last_position)
        return self._last_delivered

    def _abandoned_member(self, node: int, member: Member) -> bool:
        """A member of our view that announces itself (JOIN): it left the view."""
        if node == self.node_id:
            return False
        peer = self.peers.get(node)
        return (peer is not None and peer.joining_since < math.inf
                and peer.incarnation == member.incarnation)

    def _leavers(self) -> set[int]:
        out = {n for n, p in self.peers.items() if p.leaving}
        if self.leaving:
            out.add(self.node_id)
        return out

    # ------------------------------------------------------------------ inputs

    def take_events(self) -> list[Event]:
        """What this layer and its view sessions raised since the last call, in the
        order raised (the Node's ``events``)."""
        session = self.session
        if self.retired or (session is not None and session.events):
            self._collect()
        events = self._events
        if not events:
            return []
        self._events = []
        return events

    def _collect(self) -> None:
        """Move the sessions' events (deliveries) behind ours. A session raises events
        only while this layer or the Node calls it, and this layer collects before it
        raises one of its own and before it lets a session go, so one list keeps the
        order they were raised in."""
        out = self._events
        for retired, _ in self.retired.values():
            if retired.events:
                out.extend(retired.events)
                retired.events.clear()
        session = self.session
        if session is not None and session.events:
            out.extend(session.events)
            session.events.clear()

    def _emit(self, event: Event) -> None:
        self._collect()
        self._events.append(event)

    def renew(self, sender: int, view: int, now: float) -> bool:
        """A repeat of ``sender``'s heartbeat of ``view`` that the session of that view
        applied in full already (the Node compares bodies: ``amcast.protocols.repeats``):
        if nothing else can come of it, note the sender's liveness alone and return
        ``True``; ``False``: it must take the full path (``on_datagram``).

        Nothing else can come of it when this process was not stopped (``noticed_time``
        loses nothing), ``view`` is the current session's, the sender is listed and alive
        (no revival to evaluate), no round or wait is open (nothing counts who was heard
        in the view), the sender is not joining (no duplicate check), and the session
        says applying it again is a no-op (``ViewSession.repeat_is_noop``)."""
        session = self.session
        if (session is None or session.view_id != view
                or now - self.last_activity > self.cfg.suspect_timeout
                or self.round is not None or self.accept_wait is not None
                or self.phase in INSTALL_PENDING):
            return False
        if not (self.detector.alive(sender, now) and self._listed(sender)):
            return False
        peer = self.peers.get(sender)
        if peer is not None and peer.joining_since != math.inf:
            return False
        if not session.repeat_is_noop(sender):
            return False
        self.last_activity = now
        self.detector.heard(sender, now)
        if peer is not None:
            peer.last_in_view = now
        self.repeats_skipped += 1
        return True

    def on_datagram(self, dg: Datagram, now: float) -> bool:
        """A data-plane datagram (any view) from another node. ``True``: the current
        view's session applied it as a heartbeat, in full (a repeat of it may only
        renew its sender's liveness: ``renew``)."""
        sender = dg.sender
        self.noticed_time(now)
        if not self._listed(sender):
            self._drop("unknown_sender", f"from {sender}")
            return False
        revived = not self.detector.alive(sender, now)
        self.detector.heard(sender, now)
        if revived:
            self._version += 1
            self.evaluate(now)
        session = self.session
        if session is not None and dg.view == session.view_id:
            # an abandoned view still repairs (it may be flushed with us yet); its
            # session delivers nothing and releases nothing past what it held
            reason = session.reliable.foreign(dg)
            if reason is not None:
                self._drop(reason, f"from {sender}")
                return False
            peer = self.peers.get(sender)
            if peer is not None:
                peer.last_in_view = now
                if peer.joining_since != math.inf:  # else too soon: it returns at once
                    self._check_duplicate(sender, peer, now)
            if self.round is not None and self.round.phase == INSTALL:
                self.round.heard_in_view.add(sender)
            applied = session.receive(dg, now)
            if self.accept_wait is not None or self.phase in _INSTALL_PENDING:
                self.check_waits(now)  # (``_after_session_input``)
            return applied
        if self.round is not None and self.round.phase == INSTALL and self.round.proposal and (
            dg.view == self.round.proposal.view.view_id
        ):
            self.round.heard_in_view.add(sender)
        retired = self.retired.get(dg.view)
        if retired is not None:
            if retired[0].reliable.foreign(dg) is None:
                retired[0].receive(dg, now)
            return False
        current = self.view.view_id if self.view is not None else 0
        if (session is None or dg.view != session.view_id) and self._in_primary(sender, dg):
            self.last_foreign_view = now
        if dg.view > current:
            self.future_since.setdefault(dg.view, now)
            if self._future_count < MAX_FUTURE_DATAGRAMS:
                self.future.setdefault(dg.view, []).append(dg)
                self._future_count += 1
            else:
                self._drop("future_view_buffer_full", f"view {dg.view}")
            return False
        if dg.view != current:
            self._drop("stale_view", f"view {dg.view} from {sender}")
        return False

    def _in_primary(self, sender: int, dg: Datagram) -> bool:
        """Does ``dg`` (of a view not ours) say that a primary view is live? Not if its
        sender announces itself (JOIN) since that view: it gave the view up, and its
        abandoned session still sends while it waits for a flush it may take part in.
        (Membership sweep seed 310888: a restarted node heard such a member's view, took
        it for a primary view that would take it in and never coordinated, while that
        member waited for it to: no view ever formed.)"""
        peer = self.peers.get(sender)
        return (peer is None or peer.joining_since == math.inf
                or dg.view > peer.known_view_id)

    def on_membership(self, dg: MembershipDatagram, now: float) -> None:
        sender = dg.sender
        self.noticed_time(now)
        if sender == self.node_id:
            if dg.incarnation != self.me.incarnation:
                self._claimed(dg.incarnation, dg.message, now)
            return  # our own echo, or a previous incarnation's datagram still in flight
        self._version += 1
        msg = dg.message
        if not self._listed(sender) and not isinstance(msg, Refuse):
            self.detector.heard(sender, now)
            self._drop("not_listed", f"node {sender}")
            if self.coordinator(self.alive_members(now), now) == self.node_id:
                self.refuse(sender, dg.incarnation, "not_listed",
                             f"node {sender} is not in the member list", now)
            return
        if self.tree_problem is not None:
            problem = next(filter(None, map(self.tree_problem, _view_records(msg))), None)
            if problem is not None:
                self._drop("bad_swap_tree", f"from {sender}: {problem}")
                return
        peer = self.peers.get(sender)
        if peer is None:
            peer = self.peers[sender] = Peer()
            self._version += 1  # a new candidate for ``alive_members``
        if isinstance(msg, Refuse):
            # whichever incarnation of its sender we know: a refusal says who is not
            # a member, and the refused daemon may be the one we took for the sender
            self._on_refuse(sender, dg.incarnation, msg, now)
            self.evaluate(now)
            return
        # (neither a refused incarnation nor a stale one is a sign of the node's life)
        if dg.incarnation == peer.contender:
            self._from_contender(sender, peer, dg.incarnation, msg, now)
            return
        if dg.incarnation < peer.incarnation and not self._outlived(sender, peer, msg, now):
            self._drop("stale_incarnation", f"node {sender} incarnation {dg.incarnation}")
            if isinstance(msg, Join) and not msg.leaving and self._live_member(sender, peer, now):
                self.refuse(sender, dg.incarnation, "duplicate_node_id",
                             f"node {sender} is a live member (incarnation "
                             f"{peer.incarnation}); incarnation {dg.incarnation} claims the "
                             "same id", now)
            return
        self.detector.heard(sender, now)
        if dg.incarnation != peer.incarnation:
            self._adopt(sender, peer, dg.incarnation)
        peer.heard = now
        handler = _HANDLERS[type(msg)]
        handler(self, sender, dg.incarnation, msg, now)
        self.evaluate(now)

    def _adopt(self, node: int, peer: Peer, incarnation: int) -> None:
        """A later incarnation of ``node`` speaks: from now on it is the one we know
        (a restart), unless it turns out to be a second daemon with the id of a live
        one (``_check_duplicate``, or another member's ``Refuse``): then the record
        kept here is restored (``_set_contender``)."""
        peer.incumbent = _copy_peer(peer) if peer.incarnation >= 0 else None
        peer.incarnation = incarnation
        peer.joining_since = math.inf
        peer.held_back_until = -math.inf
        peer.missed_rounds = peer.holds = 0
        self._holding.discard(node)
        peer.refused = None
        peer.leaving = False

    def _live_member(self, node: int, peer: Peer, now: float) -> bool:
        """The incarnation ``peer`` holds is a member of our view, heard in it lately."""
        member = self.view.member(node) if self.view is not None else None
        return (member is not None and member.incarnation == peer.incarnation
                and now - peer.last_in_view <= self.cfg.suspect_timeout)

    def _outlived(self, node: int, peer: Peer, msg: Message, now: float) -> bool:
        """An earlier incarnation speaks while the later one we know is
        gone: two daemons with one id were started (the later one was taken in, or not,
        and then stopped); the earlier one is live and may join, and replaces the later
        one in the next view where our view lists it. (Membership sweep seed 402048: a
        member cut off from us while a second daemon with its id started; we took that
        one for its restart and formed a view with it, and once it stopped, the live
        member was refused for good.) Any datagram of it counts, not only a JOIN: a
        member of a primary view never asks to join, and a member that restarted while
        the second daemon ran, and took that one for it, would otherwise never hear it
        again (seeds 530009, 540766). Datagrams of a previous life still in flight come
        within moments of the restart, not after its successor's silence."""
        return self._gone(peer, now)

    def _from_contender(self, sender: int, peer: Peer, incarnation: int, msg: Message,
                        now: float) -> None:
        """A datagram of an incarnation refused while the member with its id is live:
        counted, and a JOIN answered with the refusal again (by the coordinator); it
        changes nothing of what we know of the member."""
        peer.contender_heard = now
        self._drop("refused_incarnation", f"node {sender} incarnation {incarnation}")
        if isinstance(msg, Join) and not msg.leaving:
            self._tell_refused(sender, incarnation, peer.contender_reason,
                               peer.contender_detail, now)

    def _claimed(self, incarnation: int, msg: Message, now: float) -> None:
        """Another daemon announces itself with our node id: a configuration mistake.
        (An earlier incarnation's datagram within a suspicion timeout of our start is
        our previous life's, still in flight.) We say so, once per such incarnation,
        and, as a member of a primary view, refuse its JOINs ourselves: the other
        members may not be able to tell which of us is live (a member that restarted,
        or that was away, may have taken it for us), and a ``Refuse`` from us tells
        them (``_on_refuse``) as well as it. Outside a primary view (a view that lost
        its quorum) we refuse a *later* incarnation too: the members of our view still
        list us, and without a word from us they take the later one for our restart
        (membership sweep seed 400511: with two of four members away, the impostor
        replaced the live member at the others, joined the view they then formed, and
        after it stopped the live member was refused for good). A member that gave our
        id to the later one in a view of its own does not take that word
        (``_on_refuse``)."""
        if incarnation < self.me.incarnation and now - self.started <= self.cfg.suspect_timeout:
            return
        if incarnation not in self._claims:
            if len(self._claims) >= 16:
                self._claims.clear()
            self._claims.add(incarnation)
            self._emit(NodeIdClaimed(incarnation, self.me.incarnation))
        if ((self.primary or (self.view is not None and incarnation > self.me.incarnation))
                and isinstance(msg, Join) and not msg.leaving):
            self.send_message(Refuse(Member(self.node_id, incarnation), "duplicate_node_id",
                              f"node {self.node_id} is a live member (incarnation "
                              f"{self.me.incarnation}); incarnation {incarnation} claims "
                              "the same id"))

    def _check_duplicate(self, sender: int, peer: Peer, now: float) -> None:
        """A member of our view keeps sending while another incarnation asks to join."""
        member = self.view.member(sender) if self.view is not None else None
        if (member is None or peer.incarnation <= member.incarnation or peer.refused
                or now < peer.joining_since + self.cfg.heartbeat_interval / 2):
            return  # (datagrams of a crashed incarnation may still be in flight briefly)
        self.refuse(sender, peer.incarnation, "duplicate_node_id",
                     f"node {sender} is a live member (incarnation {member.incarnation}); "
                     f"incarnation {peer.incarnation} claims the same id", now)

    def refuse(self, node: int, incarnation: int, reason: str, detail: str,
                now: float) -> None:
        """Refuse ``node``'s incarnation; the coordinator tells it (and reports it).

        A later incarnation of a live member of our view (a second daemon with its id,
        whatever the reason) never replaces it: it becomes the member's *contender*
        (``_set_contender``)."""
        self._version += 1
        peer = self.peers.setdefault(node, Peer())
        member = self.view.member(node) if self.view is not None else None
        if (member is not None and member.incarnation != incarnation
                and now - peer.last_in_view <= self.cfg.suspect_timeout):
            self._set_contender(peer, incarnation, reason, detail, now)
        else:
            peer.incarnation = max(peer.incarnation, incarnation)
            peer.refused = reason
            peer.refused_detail = detail
        self._tell_refused(node, incarnation, reason, detail, now)

    def _set_contender(self, peer: Peer, incarnation: int, reason: str, detail: str,
                       now: float) -> None:
        """``incarnation`` is a second daemon with the id of the live one ``peer``
        knows (or knew before that incarnation spoke, ``_adopt``): the record is
        restored, and that incarnation's datagrams change nothing from now on
        (``_from_contender``) until the live one is gone (``_forget_contenders``). A
        node that never heard the live one forgets the refused one and waits for it."""
        self._version += 1
        if peer.incarnation == incarnation:
            kept = peer.incumbent
            _restore_peer(peer, kept if kept is not None and kept.incarnation < incarnation
                          else Peer())
            peer.heard = now  # (the live one has a suspicion timeout to speak)
        peer.incumbent = None
        peer.contender = incarnation
        peer.contender_reason = reason
        peer.contender_detail = detail
        peer.contender_heard = now

    def _gone(self, peer: Peer, now: float) -> bool:
        """The incarnation this record holds has been silent (in our view and outside)
        for a suspicion timeout: a later incarnation is its restart, not a contender."""
        return now - max(peer.last_in_view, peer.heard) > self.cfg.suspect_timeout

    def _tell_refused(self, node: int, incarnation: int, reason: str, detail: str,
                      now: float) -> None:
        """The coordinator tells the refused incarnation why (and reports it once); the
        next member does when the refused daemon claims the coordinator's own id (the
        coordinator takes such datagrams for its own echo)."""
        peer = self.peers[node]
        alive = {n: m for n, m in self.alive_members(now).items() if n != node}
        if not alive or self.coordinator(alive, now) != self.node_id:
            return
        key = f"{incarnation}:{reason}:{detail}"
        if peer.reported != key:
            peer.reported = key
            self._emit(JoinRefused(node, reason, detail, False))
        self.send_message(Refuse(Member(node, incarnation), reason, detail))

    # -- membership messages

    def _on_join(self, sender: int, incarnation: int, msg: Join, now: float) -> None:
        peer = self.peers[sender]
        peer.settings = msg.settings
        peer.known_view_id = msg.known_view_id
        member = self.view.member(sender) if self.view is not None else None
        # A JOIN that a member of our view sent before it learned of the view is stale,
        # not a sign that it left the view again: it gets the view's history (below) and
        # no view change. One that keeps coming after a suspicion timeout is a member
        # that missed the view (and gave it up): it is taken in again.
        stale = (member is not None and member.incarnation == incarnation
                 and self.view is not None and msg.known_view_id < self.view.view_id
                 and now - self.installed_at < self.cfg.suspect_timeout)
        if msg.leaving:
            peer.leaving = True
        elif peer.joining_since == math.inf and not stale:
            peer.joining_since = now
        diffs = self.settings.differences(msg.settings)
        if diffs:
            self.refuse(sender, incarnation, "config_mismatch", "; ".join(diffs), now)
            return
        if peer.refused == "config_mismatch":
            peer.refused = None
        if peer.refused is not None:
            self.refuse(sender, incarnation, peer.refused, peer.refused_detail, now)
            return
        self._answer_with_history(sender, peer, msg.known_view_id, now)

    def _answer_with_history(self, sender: int, peer: Peer, known: int, now: float) -> None:
        """Tell a node that missed a decision how its view ended (one step at a time)."""
        entry = self.history.get(known)
        if entry is None or now < peer.last_history_reply + self.cfg.membership_retry * 4:
            return
        alive = {n: m for n, m in self.alive_members(now).items() if n != sender}
        if not alive or self.coordinator(alive, now) != self.node_id:
            return  # the coordinator answers (not the asking node, if it would be one)
        peer.last_history_reply = now
        if self._held_back(sender, now) and peer.answered_in_hold == math.inf:
            peer.answered_in_hold = now
        self.send_message(Install(entry[0], entry[1]))

    def _on_refuse(self, sender: int, incarnation: int, msg: Refuse, now: float) -> None:
        if msg.target != self.me:
            target = msg.target
            peer = self.peers.get(target.node)
            if (msg.reason == "duplicate_node_id" and target.node != self.node_id
                    and peer is not None and target.incarnation != peer.contender
                    and not self._member_refused_by_claimant(sender, target)):
                # the group found a second daemon with that id: whichever of the two we
                # took for that node, the refused one is not it
                self._set_contender(peer, target.incarnation, msg.reason, msg.detail, now)
            return
        peer = self.peers[sender]
        key = f"refused:{msg.reason}:{msg.detail}"
        if peer.reported != key:  # report each refusal once
            peer.reported = key
            self._emit(JoinRefused(self.node_id, msg.reason, msg.detail, True))

    def _member_refused_by_claimant(self, sender: int, target: Member) -> bool:
        """A daemon refuses another with its own id that our view lists as the member:
        our view was formed without it (it was away, and the other one was taken in),
        so its word does not displace a member of our view; our refusal of it stands
        (the stale-incarnation path of ``on_membership``)."""
        return (sender == target.node and self.view is not None
                and self.view.member(target.node) == target)

    # ------------------------------------------------------------------ decisions

    def learn(self, view: ViewRecord | None) -> None:
        d = self.durable
        if view is None or (d.known is not None and view.view_id <= d.known.view_id):
            return
        self.update_durable(known=view, max_view_id=max(d.max_view_id, view.view_id))

    def on_decided(self, ballot: Ballot, proposal: Proposal, now: float) -> None:
        """``proposal`` was decided: learn it; install it if we are a member."""
        new = proposal.view
        self.blocked = None
        if proposal.prev is not None:
            self.history[proposal.prev.view_id] = (ballot, proposal)
            if len(self.history) > HISTORY:
                del self.history[min(self.history)]
        self.learn(new)
        d = self.durable
        if d.accepted is not None and d.accepted[1].view.view_id <= new.view_id:
            self.update_durable(accepted=None, accepted_held=True)
        current = self.view.view_id if self.view is not None else 0
        if new.view_id <= current or (self.closing and self.closing.proposal.view == new):
            return
        member = new.member(self.node_id)
        if member is None or member.incarnation != self.me.incarnation:
            self._excluded_by(proposal, now)
            return
        if self.phase is Phase.LEFT:
            return  # gone: a view that lists it anyway is not installed (the node stopped)
        if (self.session is not None and proposal.prev is not None
                and self.session.view_id == proposal.prev.view_id):
            if self.session.reliable.exceeds(dict(proposal.cut)):
                # We released (ordered) past the cut the deciding quorum closed our view
                # at (it did not hear from us before we gave the view up): closing here
                # would deliver another set than theirs. We are out of the view; our
                # JOINs (known view = the new one) get us taken in again, with a gap.
                self._closed_elsewhere(self.session.view_id, dict(proposal.cut))
                self._lose_view(now, "excluded")
                return
            self.session.close_at(dict(proposal.cut), now)
            # flushed into the successor: from a view it gave up too (it still repairs)
            self.become(Phase.INSTALLING if self.primary else Phase.REJOINING,
                         Closing(proposal, now, ballot))
            self.check_waits(now)
        else:
            self._install(proposal, ballot, now, closed=None)

    def _excluded_by(self, proposal: Proposal, now: float) -> None:
        """A view we are not in was decided."""
        session = self.session
        if session is None or self.phase is Phase.LEFT:
            return
        if proposal.prev is not None and session.view_id == proposal.prev.view_id:
            cut = dict(proposal.cut)
            if (self.leaving and self.primary and self.phase is not Phase.LEAVING
                    and not session.reliable.exceeds(cut)):
                # A graceful leaver closes its last view where its members do (virtual
                # synchrony: it delivers the same set in it, its own last messages
                # included), then goes; ``check_waits`` finishes it once the cut is held.
                session.close_at(cut, now)
                self.become(Phase.LEAVING, Closing(proposal, now))
                self.check_waits(now)
                return
            self._closed_elsewhere(session.view_id, cut)
            self._lose_view(now, "left" if self.leaving else "excluded")
        elif session.view_id < proposal.view.view_id:
            self._lose_view(now, "excluded")

    def _closed_elsewhere(self, view_id: int, cut: dict[int, int] | None) -> None:
        """Tell the Node how a view of ours ended (once): the cut, or ``None``."""
        if self.reported_closed == view_id:
            return
        self.reported_closed = view_id
        self.view_closed(view_id, cut)

    def _lose_view(self, now: float, reason: str) -> None:
        """Give the primary view up (``ABANDONED``; ``LEFT`` for a leaver that goes):
        a no-op outside one."""
        if not self.primary or self.view is None:
            return
        self.become(Phase.LEFT if reason == "left" else Phase.ABANDONED)
        if self.session is not None:
            self.session.abandon()
        self.promised_at = None
        self.accept_wait = None
        self.history_wait = None
        for view_id in [v for v in self.future if v <= self.durable.max_view_id]:
            self._future_count -= len(self.future.pop(view_id))
        self.future_since.clear()
        reachable = tuple(sorted(self.alive_members(now)))
        self._emit(QuorumLost(self.view.view_id, reason, reachable))
        self.next_join = now

    def check_waits(self, now: float) -> None:
        session = self.session
        if session is None:
            return
        if self.accept_wait is not None:
            ballot, proposal, _, _ = self.accept_wait
            if session.reliable.holds(dict(proposal.cut)):
                self.accept_wait = None
                handlers.vote(self, ballot, proposal, held=True)
                if self.round is not None and self.round.ballot == ballot:
                    self.progress_accept(now)
        closing = self.closing  # (the vote above may have moved the phase on)
        if closing is None or not session.reliable.holds(dict(closing.proposal.cut)):
            return
        if self.phase in INSTALL_PENDING:
            assert closing.ballot is not None
            self._install(closing.proposal, closing.ballot, now, closed=session)
        elif self.phase is Phase.LEAVING:
            self._finish_leaving(session, closing.proposal, now)

    def _vote_unheld(self, now: float) -> None:
        """A member that could not complete the cut in ``ACCEPT_VOTE_AFTER`` of the flush
        timeout votes all the same, as no holder, when a holder voted for the proposal
        already (``Accept.holder_voted``): it may have been decided, with vertices that
        only a member gone since had, and waiting for them would stall every later round
        (each proposes it again). With this vote it can be decided, and this member,
        unable to install it, gives the view up and is taken in again with a gap
        (membership sweep seed 310888: a node crashed for good and the holder restarted).
        Without a holder's vote it waits: a vote from it would keep a proposal nobody can
        decide alive, as one that may have been (seed 310914)."""
        waiting = self.accept_wait
        if (waiting is None or not waiting[3]
                or now - waiting[2] < ACCEPT_VOTE_AFTER * self.cfg.flush_timeout):
            return
        ballot, proposal, _, _ = waiting
        self.accept_wait = None
        handlers.vote(self, ballot, proposal, held=False)
        if self.round is not None and self.round.ballot == ballot:
            self.progress_accept(now)

    def _finish_leaving(self, session: ViewSession, proposal: Proposal, now: float) -> None:
        """A graceful leaver holds the cut of the view decided without it: deliver the
        rest of its last view as the members do (the flush), then leave."""
        before = session.messages_delivered
        session.finish()
        delivered = session.messages_delivered - before
        self.flushes += 1
        self.flush_deliveries += delivered
        started = self.leave_started if self.leave_started is not None else now
        self._emit(FlushCompleted(session.view_id, delivered, now - started))
        self._closed_elsewhere(session.view_id, dict(proposal.cut))
        self._lose_view(now, "left")

    def _install(self, proposal: Proposal, ballot: Ballot, now: float, *,
                 closed: ViewSession | None) -> None:
        old_view = self.view
        new = proposal.view
        previous = proposal.prev
        self.uncounted = ()
        if closed is not None:
            before = closed.messages_delivered
            frozen_at = self.promised_at if self.promised_at is not None else now
            closed.finish()
            delivered = closed.messages_delivered - before
            self.flushes += 1
            self.flush_deliveries += delivered
            self._emit(FlushCompleted(closed.view_id, delivered, now - frozen_at))
            self.retired[closed.view_id] = (closed, now + RETIRE_AFTER)
            self._closed_elsewhere(closed.view_id, dict(proposal.cut))
        elif self.session is not None and not self.session.finished:
            self.session.abandon()
            # Not even a decided cut we know of tells what was delivered: we are in its
            # successor too (else ``_excluded_by`` reported it), so we were to deliver it
            # ourselves and could not, and the others who were (its holders) may have
            # failed since (seed 402274). Every own message of it is in doubt.
            self._closed_elsewhere(self.session.view_id, None)
        gap = closed is None and _may_have_missed(proposal, self.me)
        self.promised_at = None
        self.accept_wait = None
        self.history_wait = None
        self.become(Phase.STEADY)
        self._install_session(new, now)
        assert self.session is not None
        if self.leaving:
            self.session.freeze()  # a leaver taken in regardless: still no own vertices
        elif ballot < self.promised_here:
            # We promised a later ballot before this view was decided: our promise said
            # nothing of this view, so its coordinator may close it without us. Start it
            # frozen (no own vertices, nothing released but what the cut will bring).
            self.session.freeze()
            self.promised_at = now
            self.become(Phase.FROZEN)
        base = previous if previous is not None else old_view
        base_members = set(base.members) if base is not None else set()
        leavers = self._leavers()
        joined = tuple(m.node for m in new.members if m not in base_members)
        gone = [m.node for m in base_members if m not in new.members]
        left = tuple(sorted(n for n in gone if n in leavers))
        excluded = tuple(sorted(n for n in gone if n not in leavers))
        if gap:
            self._emit(OrderGap(new.view_id, self.last_delivered))
        assert self.session is not None
        self._emit(ViewInstalled(
            new.view_id, new.nodes, True, joined, left, excluded,
            previous.view_id if previous is not None else 0, self.session.phi,
        ))
        for m in new.members:
            peer = self.peers.get(m.node)
            if peer is not None and peer.incarnation == m.incarnation:
                peer.joining_since = math.inf
                peer.held_back_until = -math.inf
                peer.missed_rounds = peer.holds = 0
                self._holding.discard(m.node)
        self.future_since = {v: t for v, t in self.future_since.items() if v > new.view_id}
        for dg in self.future.pop(new.view_id, []):
            self._future_count -= 1
            if dg.view == new.view_id:
                self.on_datagram(dg, now)
        for view_id in [v for v in self.future if v < new.view_id]:
            self._future_count -= len(self.future.pop(view_id))

    def install_initial(self, view: ViewRecord, now: float) -> None:
        """Start in ``view`` with no agreement (a cluster bootstrapped with one agreed
        first view): ``JOINING`` -> ``STEADY`` as if it had been decided."""
        self.become(Phase.STEADY)
        self._install_session(view, now)

    def _install_session(self, view: ViewRecord, now: float) -> None:
        self._collect()  # what the session we replace raised comes first
        self._version += 1
        self._last_delivered = self.last_delivered
        self.view = view
        self.installed_at = now
        self.session = self.make_session(view, now)
        self.learn(view)
        self._suspected = set()
        for m in view.members:  # a member never heard from gets a full timeout of grace
            if m.node not in self.detector.last_heard:
                self.detector.heard(m.node, now)

    # ------------------------------------------------------------------ the coordinator

    def _start_round(self, now: float, members: dict[int, Member], reason: str) -> None:
        d = self.durable
        number = max(d.promised.number, d.max_view_id, self.view_floor) + 1
        ballot = Ballot(number, self.node_id)
        self.update_durable(max_view_id=max(d.max_view_id, number))
        r = Round(ballot, dict(members), now, now + self.cfg.flush_timeout, reason)
        self.round = r
        r.retry_at = now + self.cfg.membership_retry
        known = self.durable.known
        self.send_message(Prepare(ballot, tuple(sorted(members.values())), known))
        own = handlers.promise(self, ballot, now)
        if isinstance(own, Reject):
            self.abort_round(now, "own stale ballot")
            return
        r.promises[self.node_id] = own
        if not r.waiting_for():
            self.to_accept(now)

    def to_accept(self, now: float) -> None:
        r = self.round
        assert r is not None
        self._hold_back_silent_joiners(r, now)
        incarnations = {node: r.candidates[node].incarnation for node in r.promises}
        latest = latest_known(r.promises, self.durable.known)
        own = r.promises.get(self.node_id)
        if own is not None:  # judged by the view the round closes, which we may learn here
            r.promises[self.node_id] = replace(own, origin=handlers.said_origin(
                self.durable, latest))
        counted = counted_acceptors(r.promises, incarnations, latest)
        self.uncounted = tuple(sorted(set(r.promises) - counted))
        proposal, why = choose_proposal(
            promises=r.promises, own_known=self.durable.known, leaving=self._leavers(),
            incarnations=incarnations, potential=self.potential,
            expected_votes=self.cfg.expected_votes, min_view_id=max(
                self.durable.max_view_id, self.view_floor), tree_for=self.view_tree,
        )
        if proposal is None:
            self.abort_round(now, why)
            return
        known = proposal.prev
        r.phase = ACCEPT
        r.proposal = proposal
        r.holders = reported_holders(proposal, r.promises)
        closes = known.view_id if known is not None else 0
        own = r.promises.get(self.node_id)
        if own is not None and own.installed_id not in (closes, 0):
            # we missed a decision: who knows it sends it (handlers.note_lagging)
            self.send_message(own)
        r.acceptors = known.potential if known is not None else self.potential
        r.counted = counted
        self._note_blocked(r, why, now)
        r.deadline = now + self.cfg.flush_timeout
        r.retry_at = now + self.cfg.membership_retry
        self._emit(ViewProposed(proposal.view.view_id, proposal.view.nodes,
                                        (r.ballot.number, r.ballot.node), r.reason))
        self._send_accept(r)
        handlers.accept(self, r.ballot, proposal, now, bool(r.holders))
        self.progress_accept(now)

    def _note_blocked(self, r: Round, why: str, now: float) -> None:
        """A proposal kept only because a member of both views that is not heard from
        may have decided it (``agreement._may_be_chosen``), with no holder's vote
        reported, can be decided only by a live member that completes its cut. When
        rounds keep proposing it (that member died after its promise, and the others lack
        vertices it had: a double failure), say who is awaited."""
        assert r.proposal is not None
        awaited = (unheard_holders(r.proposal, r.promises, r.acceptors)
                   if why == "reproposed" and not r.holders else set())
        if not awaited:
            self.blocked = None
            return
        view = r.proposal.view.view_id
        b = self.blocked
        if b is None or b.view != view:
            b = self.blocked = Blocked(view, tuple(sorted(awaited)), 0, now, now)
        b.rounds += 1
        b.awaited = tuple(sorted(awaited))
        b.last = now
        if b.rounds >= BLOCKED_REPORT_AFTER and b.rounds & (b.rounds - 1) == 0:
            self._emit(ViewChangeBlocked(view, b.awaited, b.rounds, now - b.since))

    def blocked_for(self, now: float) -> Blocked | None:
        """The view change this member, as coordinator, keeps proposing without deciding
        (``ViewChangeBlocked``), while it still does (a round in the last
        ``4 * flush_timeout``); ``None`` otherwise."""
        b = self.blocked
        if (b is None or b.rounds < BLOCKED_REPORT_AFTER
                or now - b.last > 4 * self.cfg.flush_timeout):
            return None
        return b

    def _hold_back_silent_joiners(self, r: Round, now: float) -> None:
        """A joiner that sends (its JOINs reach us) but did not promise in time may not
        hear us at all: a one-way cut, a host firewall that drops what comes in. Every
        round we start for it would end in a view of the same members, a view change
        for nothing each time. So it is left out of rounds for a while, longer after
        each miss (``DEAF_JOINER_MAX_HOLD``); as soon as its JOIN names a view it learned
        from us (a ``PREPARE``, an ``ACCEPT``, the history we answer JOINs with), it
        hears us again and is taken in at once."""
        members = set(self.view.nodes) if self.primary and self.view is not None else set()
        for node in set(r.candidates) - set(r.promises) - members:
            peer = self.peers.get(node)
            if peer is None:
                continue
            peer.missed_rounds += 1
            self._hold(node, peer, now, renewed=False)

    def _hold(self, node: int, peer: Peer, now: float, *, renewed: bool) -> None:
        hold = min(2 ** peer.holds, DEAF_JOINER_MAX_HOLD) * self.cfg.suspect_timeout
        peer.holds += 1
        self._holding.add(node)
        peer.held_back_until = now + hold
        peer.held_back_known = peer.known_view_id
        peer.answered_in_hold = math.inf
        self._emit(JoinerHeldBack(
            node, self.view.view_id if self.view is not None else 0, hold,
            peer.missed_rounds, renewed))

    def _renew_holds(self, alive: dict[int, Member], now: float) -> None:
        """A hold that ends is renewed, twice as long and with no round, when the joiner
        cannot have heard us: we sent it the view history its JOINs asked for early in
        the hold (a decision naming a later view than its JOINs do), and its JOINs still
        name the same view. A round for it would stop ordering for ``flush_timeout``
        and end in a view of the same members. A joiner we could not answer (we hold no
        history for the view it names) is tried again with a round, as before."""
        members = self.view.nodes if self.primary and self.view is not None else ()
        margin = 2 * self.cfg.heartbeat_interval  # a JOIN period and the way back
        for node in self._holding & alive.keys():
            peer = self.peers[node]
            if (peer.held_back_until <= now
                    and peer.known_view_id <= peer.held_back_known
                    and peer.answered_in_hold <= peer.held_back_until - margin
                    and node not in members):
                self._hold(node, peer, now, renewed=True)

    def _held_back(self, node: int, now: float) -> bool:
        peer = self.peers.get(node)
        return (peer is not None and now < peer.held_back_until
                and peer.known_view_id <= peer.held_back_known
                and (not self.primary or self.view is None or node not in self.view.nodes))

    def held_back_for(self, node: int, now: float) -> float | None:
        """Seconds this member, as coordinator, still leaves ``node`` out of view
        changes (``JoinerHeldBack``); ``None`` when it does not."""
        if not self._held_back(node, now):
            return None
        return self.peers[node].held_back_until - now

    def _send_accept(self, r: Round) -> None:
        """``ACCEPT`` in the form every daemon reads; when a holder voted already, a
        second copy that says so (``Accept.holder_voted``). A daemon of a version before
        that field drops the second copy (counted ``bad_field``) and votes on the first:
        a single flagged copy would stop it from ever voting, and a view change that a
        coordinator of this version runs for older members would repeat for ever
        (``tests/e2e/test_upgrade.py``). A member of this version takes the flag from
        whichever copy comes, in either order (``_accept``)."""
        assert r.proposal is not None
        handlers.resend_history(self, r.ballot)
        self.send_message(Accept(r.ballot, r.proposal))
        if r.holders:
            self.send_message(Accept(r.ballot, r.proposal, True))

    def progress_accept(self, now: float) -> None:
        r = self.round
        if r is None or r.phase != ACCEPT:
            return
        if r.waiting_for() and now < r.deadline:
            return
        assert r.proposal is not None
        if r.decided(self.cfg.expected_votes):
            r.phase = INSTALL
            r.deadline = now + 4 * self.cfg.flush_timeout + self.cfg.suspect_timeout
            r.retry_at = now + self.cfg.membership_retry
            r.heard_in_view = {self.node_id}
            self.send_message(Install(r.ballot, r.proposal))
            self.on_decided(r.ballot, r.proposal, now)
        elif now >= r.deadline:
            self.abort_round(now, "no_quorum_of_acceptances")

    def abort_round(self, now: float, why: str) -> None:
        self.round = None
        retry = self.cfg.membership_retry
        self.backoff_until = now + self.rng.uniform(2 * retry, 8 * retry)

    def _coordinate(self, now: float) -> None:
        """The lowest live node proposes a view whenever the live set calls for one."""
        if self.phase is Phase.LEFT:
            return
        r = self.round
        if r is not None:
            if r.phase == PREPARE and now >= r.deadline:
                self.to_accept(now)
            elif r.phase == ACCEPT:
                self.progress_accept(now)
            elif r.phase == INSTALL and (not r.waiting_for() or now >= r.deadline):
                self.round = None
            r = self.round
            if r is not None and now >= r.retry_at and r.waiting_for():
                r.retry_at = now + self.cfg.membership_retry
                if r.phase == PREPARE:
                    self.send_message(Prepare(r.ballot, tuple(sorted(r.candidates.values())),
                                       self.durable.known))
                elif r.phase == ACCEPT:
                    self._send_accept(r)
                else:
                    assert r.proposal is not None
                    self.send_message(Install(r.ballot, r.proposal))
            if self.round is not None:
                return
        if now < self.backoff_until:
            return
        alive = self.alive_members(now)
        if self.coordinator(alive, now) != self.node_id:
            return
        leavers = self._leavers()
        if self._holding:
            self._renew_holds(alive, now)
        desired = {n: m for n, m in alive.items() if n not in leavers and n in self.potential
                   and not self._held_back(n, now)}
        if not desired:
            return
        reason = self._change_needed(desired, now)
        if reason is None:
            return
        if not has_quorum(desired, self.potential, self.cfg.expected_votes):
            return
        candidates = dict(desired)
        candidates[self.node_id] = self.me
        for node in leavers:
            if node in alive and self.view is not None and node in self.view.nodes:
                candidates[node] = alive[node]
        self._start_round(now, candidates, reason)

    def _change_needed(self, desired: dict[int, Member], now: float) -> str | None:
        view = self.view
        if not self.primary or view is None:
            everyone = set(self.potential) <= set(desired)
            if not everyone and now - self.alive_changed < self.cfg.join_settle:
                return None
            return "no_view"
        if self.promised_at is not None and now - self.promised_at > self.cfg.flush_timeout * 4:
            return "stuck_flush"
        if view.potential != self.potential:
            return "members_reconfigured"
        if set(desired.values()) != set(view.members):
            missing = set(view.members) - set(desired.values())
            if missing:
                return "member_lost"
            if now - self.alive_changed < self.cfg.join_settle / 4:
                return None
            return "member_joined"
        if any(self._abandoned_member(m.node, m) for m in view.members):
            return "member_abandoned"
        return None

    # ------------------------------------------------------------------ timers

    def noticed_time(self, now: float) -> None:
        """Every input starts here: a process that was stopped longer than the suspicion
        timeout (SIGSTOP, a long GC pause) assumes the others excluded it, and stops
        delivering in its view before it processes anything (its decisions would be
        stale); it rejoins like any excluded member."""
        if now - self.last_activity > self.cfg.suspect_timeout:
            if self.round is not None:
                self.round = None
            self._lose_view(now, "paused")  # (outside a primary view: nothing to lose)
        self.last_activity = now

    def evaluate(self, now: float) -> None:
        """After every input: suspicion, lease, waits, coordination. In a steady view
        (``_steady``) none of them can act, at any time, so it returns at once."""
        members = self.alive_members(now)
        if self._steady(members):
            return
        alive = frozenset(members)
        if alive != self._last_alive:
            self._last_alive = alive
            self.alive_changed = now
        view = self.view
        if self.primary and view is not None:
            for m in view.members:
                if (m.node != self.node_id and m.node not in self._suspected
                        and not self.detector.alive(m.node, now)):
                    self._suspected.add(m.node)
                    self._emit(MemberSuspected(
                        m.node, view.view_id, self.detector.silent_for(m.node, now)))
            lease = {m.node for m in view.members} & (set(alive) | {self.node_id})
            if not has_quorum(lease, view.potential, self.cfg.expected_votes):
                self._lose_view(now, "no_quorum")
            elif self.phase is not Phase.LEAVING and self._stale(view.view_id, now):
                self._lose_view(now, "excluded")
        closing = self.closing
        if closing is not None and now - closing.since > 4 * self.cfg.flush_timeout:
            # the cut cannot be completed here: give the view up (installing), just go
            # (leaving)
            if self.phase is Phase.INSTALLING:
                self._lose_view(now, "excluded")
            elif self.phase is Phase.REJOINING:
                self.become(Phase.ABANDONED)
            else:
                if self.session is not None:
                    self._closed_elsewhere(self.session.view_id, dict(closing.proposal.cut))
                self._lose_view(now, "left")
        stuck = 4 * self.cfg.flush_timeout + self.cfg.suspect_timeout
        if (self.promised_at is not None and now - self.promised_at > stuck
                and self.coordinator(self.alive_members(now), now) != self.node_id):
            self._lose_view(now, "stuck_flush")  # nobody finishes the change: start over
        self._forget_contenders(now)
        self.check_waits(now)
        self._vote_unheld(now)
        handlers.check_history_wait(self, now)
        self._coordinate(now)
        expired = [v for v, (_, until) in self.retired.items() if until <= now]
        if expired:
            self._collect()
        for view_id in expired:
            del self.retired[view_id]

    def _forget_contenders(self, now: float) -> None:
        """A contender is forgotten once the member it contends with is gone (its next
        datagram is that of a restart: adopted and admitted as usual) or once it has
        been silent for twice the suspicion timeout (it was stopped)."""
        for peer in self.peers.values():
            if peer.contender >= 0 and (
                self._gone(peer, now)
                or now - peer.contender_heard > 2 * self.cfg.suspect_timeout
            ):
                peer.contender = -1
                self._version += 1

    def _steady(self, alive: dict[int, Member]) -> bool:
        """``evaluate`` would change nothing: a quorate view whose members (exactly) are
        the live set already recorded, nobody leaving, joining, refused as a duplicate
        or abandoning, no round, no wait, no later view heard of, no retired view. Then
        each of its steps is a no-op whatever the time: the live set is unchanged (no
        ``alive_changed``), every member is live (no suspicion) and forms the lease, no
        wait or ``future_since`` deadline exists, and ``_change_needed`` finds the view
        equal to the desired one (so the coordinator, whoever it is, starts nothing).
        Anything else takes the full path."""
        view = self.view
        if (self.phase is not Phase.STEADY or view is None or self.leaving
                or self.round is not None or self.accept_wait is not None
                or self.future_since or self.retired or view.potential != self.potential):
            return False
        members = view.members
        last = self._last_alive
        if len(alive) != len(members) or len(last) != len(members):
            return False
        for m in members:
            live = alive.get(m.node)
            if live is None or live.incarnation != m.incarnation or m.node not in last:
                return False
        for peer in self.peers.values():
            if peer.leaving or peer.joining_since != math.inf or peer.contender >= 0:
                return False
        if self._steady_view is not view:
            # the lease (every member) holds a quorum; every member is listed, so the
            # desired view (live listed nodes) is the view itself
            if not (has_quorum(view.nodes, view.potential, self.cfg.expected_votes)
                    and set(view.nodes) <= set(view.potential)):
                return False
            self._steady_view = view
        return True

    def _stale(self, view_id: int, now: float) -> bool:
        """Datagrams of a later view have kept coming for a while and nobody installed it
        here: we were left out of it (the coordinator repeats INSTALL to its members)."""
        since = [t for v, t in self.future_since.items() if v > view_id]
        return bool(since) and now - min(since) > self.cfg.flush_timeout

    def handle_timer(self, now: float) -> None:
        self.noticed_time(now)
        if now >= self.next_tick:
            self.detector.ran_late(now - self.next_tick)
            # on the heartbeats' grid: one wake-up a heartbeat interval serves both
            self.next_tick = next_beat(now, self.cfg.heartbeat_interval)
        if self.session is not None:
            self.session.handle_timer(now)
        if self.retired:
            for session, _ in list(self.retired.values()):
                session.handle_timer(now)
        if self.phase in ANNOUNCING and now >= self.next_join:
            self.next_join = now + self.cfg.heartbeat_interval
            self.send_message(Join(self.settings, self.durable.known.view_id if self.durable.known
                            else 0, self.leaving, self.last_delivered))
        elif self.leaving and self.phase is not Phase.LEFT and now >= self.next_join:
            self.next_join = now + self.cfg.membership_retry
            self.send_message(Join(self.settings, self.durable.known.view_id if self.durable.known
                            else 0, True, self.last_delivered))
        self.evaluate(now)

    def next_timer(self, now: float) -> float:
        """The earliest of: the sessions' timers, the JOIN and tick times (due even when
        past: ``handle_timer`` moves them on) and, only while still ahead of ``now``,
        the round's deadlines, the back-off and the retired views' expiry. Called after
        every input: a running minimum, no lists."""
        best = self.next_tick  # handle_timer moves it on
        session = self.session
        if session is not None:
            t = session.reliable.next_timer()
            if t is not None and t < best:
                best = t
        for retired, until in self.retired.values():
            t = retired.reliable.next_timer()
            if t is not None and t < best:
                best = t
            if now < until < best:
                best = until
        # (not primary, or leaving) and not left: handle_timer sends a JOIN, moves it on
        if self.next_join < best and (self.phase in _ANNOUNCING or (
                self.leaving and self.phase is not Phase.LEFT)):
            best = self.next_join
        if self.accept_wait is not None and self.accept_wait[3]:
            t = self.accept_wait[2] + ACCEPT_VOTE_AFTER * self.cfg.flush_timeout
            if now < t < best:
                best = t
        if self.history_wait is not None:
            t = self.history_wait[2] + ACCEPT_VOTE_AFTER * self.cfg.flush_timeout
            if now < t < best:
                best = t
        r = self.round
        if r is not None:
            t = min(r.deadline, r.retry_at)
            if now < t < best:
                best = t
        elif now < self.backoff_until < best:
            best = self.backoff_until
        return best

    # ------------------------------------------------------------------ outputs

    def _after_session_input(self, now: float) -> None:
        if self.accept_wait is not None or self.phase in _INSTALL_PENDING:
            self.check_waits(now)

    def send_message(self, msg: Message) -> None:
        view = self.view.view_id if self.view is not None else 0
        self.outq.append(MembershipDatagram(self.node_id, view, self.me.incarnation, msg))

    def take_datagrams(self) -> list[MembershipDatagram]:
        out, self.outq = self.outq, []
        return out

    def update_durable(self, **changes: object) -> None:
        from dataclasses import replace

        self.durable = replace(self.durable, **changes)  # type: ignore[arg-type]
        self.durable_dirty = True

    def reconfigure(self, potential: tuple[int, ...], settings: Settings) -> None:
        """A new list of potential members (a config reload): the next view a coordinator
        with this list proposes uses it (quorums then count majorities of the old and the
        new list, so a reload never lets two primary components form)."""
        self.potential = potential
        self.settings = settings
        self._version += 1
        for node, peer in self.peers.items():
            if peer.refused == "not_listed" and node in potential:
                peer.refused = None

    def leave(self, now: float) -> None:
        """Leave gracefully: the coordinator takes us out at once (no suspicion). No own
        vertex follows the goodbye, so the cut the others decide holds all of ours, and
        we deliver up to it before we go (``_excluded_by``); hand every queued message to
        the view before calling this (what is still queued is never sent)."""
        self.leaving = True
        self.leave_started = now
        self.next_join = now
        if self.session is not None and self.primary:
            self.session.freeze()


_HANDLERS: dict[type, Callable[[MembershipLayer, int, int, object, float], None]] = {
    Join: MembershipLayer._on_join,  # type: ignore[dict-item]
    Prepare: handlers.on_prepare,  # type: ignore[dict-item]
    Promise: handlers.on_promise,  # type: ignore[dict-item]
    Reject: handlers.on_reject,  # type: ignore[dict-item]
    Accept: handlers.on_accept,  # type: ignore[dict-item]
    Accepted: handlers.on_accepted,  # type: ignore[dict-item]
    Install: handlers.on_install,  # type: ignore[dict-item]
    Refuse: MembershipLayer._on_refuse,  # type: ignore[dict-item]
}


def _may_have_missed(proposal: Proposal, me: Member) -> bool:
    """Whether ``me``, installing ``proposal.view`` without closing its predecessor here
    (a joiner, a restarted or excluded member), may have missed ordered messages: the
    condition of its ``OrderGap``.

    A gap notice tells an application to transfer state, so one where nothing can have
    been missed is noise (every daemon of a new cluster used to get one). Nothing was
    missed when there is no total order before the view: it is the group's first (no
    predecessor), or its predecessor is the first and was closed empty, with another
    member of both views (same incarnation, ``may_hold``) to vouch for the empty cut:
    where it installed the predecessor it reported what it released there, and it
    installs this view only by closing the predecessor at that cut, having delivered
    nothing ordered (a member that delivered more is excluded, ``on_decided``). Without
    such a member an empty cut may say only that no promiser reported the predecessor
    (a whole cluster restarted: its new lives remember nothing of it): a gap. The cut
    counts vertices, not ordered messages, so this errs on the side of a notice (a
    predecessor whose vertices carried only causal messages counts as one that may have
    delivered some), and so does any later predecessor: it had one itself, where
    something may have been delivered that this member never saw."""
    prev = proposal.prev
    if prev is None:
        return False
    if prev.prev_id != 0 or any(seq > 0 for _, seq in proposal.cut):
        return True
    return not any(m != me and may_hold(proposal, m) for m in proposal.view.members)


def _no_factory(view: ViewRecord, now: float) -> ViewSession:
    raise RuntimeError("MembershipLayer.make_session was not set")


def _ignore_closed(view_id: int, cut: dict[int, int] | None) -> None:
    return None


_RESTORED = tuple(f.name for f in fields(Peer) if f.name not in (
    "last_in_view", "reported", "contender", "contender_reason", "contender_detail",
    "contender_heard", "incumbent"))
"""What ``_set_contender`` restores of a record (its liveness in our view and what was
reported of it go on)."""


def _copy_peer(peer: Peer) -> Peer:
    kept = Peer()
    for name in _RESTORED:
        setattr(kept, name, getattr(peer, name))
    return kept


def _restore_peer(peer: Peer, kept: Peer) -> None:
    """What we knew of a member before a refused incarnation with its id spoke (its
    liveness in the view, ``last_in_view``, went on meanwhile and is kept)."""
    for name in _RESTORED:
        setattr(peer, name, getattr(kept, name))


def _view_records(msg: Message) -> list[ViewRecord]:
    """The view records a membership message carries (their swap trees are checked)."""
    proposals: list[Proposal] = []
    records: list[ViewRecord | None] = []
    if isinstance(msg, (Prepare, Promise)):
        records.append(msg.known)
    if isinstance(msg, Promise) and msg.accepted is not None:
        proposals.append(msg.accepted[1])
    if isinstance(msg, (Accept, Install)):
        proposals.append(msg.proposal)
    for p in proposals:
        records += [p.view, p.prev]
    return [r for r in records if r is not None and r.tree]
