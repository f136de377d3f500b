"""Events a ``amcast.protocols.Node`` emits.

Events are small frozen dataclasses with past-tense names, pulled with ``Node.events()``.
Delivery is per batch: one ``BatchDelivered`` per delivered causality-DAG vertex (a
vertex carries the application messages batched into one datagram, section 1 of the
ToTo paper: every message is a vertex and its acks are the edges), so the consumer's hot
path does its work per batch, not per message.

Service levels (``causal``, ``agreed``, ``safe``) are defined in
``amcast.protocols.vocabulary``.

Guarantee across levels: causal order holds between any two messages, whatever their
service levels: a message is never delivered before one in its causal past. A ``causal``
message waits for the ordered messages in its past, but not for ordered messages that
are concurrent with it, which it may overtake.
"""

from __future__ import annotations

from dataclasses import dataclass

from .vocabulary import DeliveryRule, ServiceLevel


class Event:
    """Marker base class of everything ``Node.events()`` returns."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class BatchDelivered(Event):
    """The application messages of one DAG vertex were delivered.

    ``position`` is the total-order position of the first message of the batch in view
    ``view`` (counted in messages from 0 in each view, identical at every member that
    delivers it), ``None`` for causal service. ``activation``,
    ``rule``, ``ntail``, ``unseen`` and ``nvt`` come from the total-order engine
    (``None`` for causal service). ``send_ts`` is the sender's clock when it created the
    vertex (carried on the wire; compare only with the same node's clock).
    A fragmented message is delivered once, in the batch of its last fragment.
    """

    sender: int
    seq: int
    payloads: tuple[bytes, ...]
    service: ServiceLevel
    position: int | None
    activation: int | None
    rule: DeliveryRule | None
    ntail: int | None
    unseen: int | None
    nvt: int | None
    send_ts: float
    view: int = 0
    """The view in which it was delivered (positions count from 0 in each view)."""


@dataclass(frozen=True, slots=True)
class DatagramDropped(Event):
    """A received datagram (or part of it) was discarded; ``reason`` is a metric label."""

    reason: str
    detail: str = ""


@dataclass(frozen=True, slots=True)
class BackpressureApplied(Event):
    """``submit`` refused a message: the send window or the pending queue is full."""

    unstable: int
    pending_bytes: int


@dataclass(frozen=True, slots=True)
class BackpressureReleased(Event):
    """The send window has room again after a ``BackpressureApplied``."""

    unstable: int
    pending_bytes: int


# ----------------------------------------------------------------------------- membership


@dataclass(frozen=True, slots=True)
class ViewInstalled(Event):
    """This member installed a new primary view (section 2: a configuration change).

    ``joined`` are members new to the view (a restarted daemon is new), ``left`` the
    previous view's members that left gracefully, ``excluded`` those that crashed, were
    paused or partitioned away (or restarted). ``previous`` is the view it succeeds.
    """

    view: int
    members: tuple[int, ...]
    primary: bool
    joined: tuple[int, ...]
    left: tuple[int, ...]
    excluded: tuple[int, ...]
    previous: int
    phi: float


@dataclass(frozen=True, slots=True)
class OrderGap(Event):
    """Total order with gaps (Herlihy et al.): this member did not deliver the part of
    the total order after ``after`` (view id, position of the last ordered message it
    delivered; ``None``: nothing it remembers) up to the start of view ``view``.
    Emitted before that view's ``ViewInstalled``, so an application can transfer state."""

    view: int
    after: tuple[int, int] | None


@dataclass(frozen=True, slots=True)
class SwapGap(Event):
    """Total order with gaps in a swap ordering (section 6.3 of *Ordered Multicast and
    Distributed Swap*; ``protocol.ordering`` arrow, combining or hybrid): at the close of
    view ``view`` the order had a hole before position ``position``: the predecessor of
    the message delivered there never went out (its sender's vertex was not in the
    view's cut). Every member completing the view reports the same hole."""

    view: int
    position: int


@dataclass(frozen=True, slots=True)
class QuorumLost(Event):
    """This member is no longer in a primary view and delivers nothing ordered.

    ``reason``: ``no_quorum`` (it cannot hear a majority), ``excluded`` (the others
    installed a view without it), ``paused`` (it was stopped longer than the suspicion
    timeout), ``left`` (it left gracefully). ``reachable`` are the
    nodes it hears. Its sends are held until it is in a primary view again.
    """

    view: int
    reason: str
    reachable: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class MemberSuspected(Event):
    """A member of the current view was silent for ``suspect_timeout``."""

    node: int
    view: int
    silent_s: float


@dataclass(frozen=True, slots=True)
class JoinerHeldBack(Event):
    """This member, as coordinator, will leave daemon ``node`` out of view changes for
    ``hold_s``: it is heard (its JOINs arrive) but answered none of the last ``missed``
    rounds that would have taken it in, so it may not hear this member at all (a
    one-way cut, a host firewall that drops what comes in). Sooner, as soon as it names
    a view it learned from the group (it hears again). ``renewed``: the hold that ended
    is extended with no round, as the joiner did not act on the view history this member
    sent it during that hold either."""

    node: int
    view: int
    hold_s: float
    missed: int
    renewed: bool = False


@dataclass(frozen=True, slots=True)
class ViewProposed(Event):
    """This member, as coordinator, proposed view ``view`` (ballot ``ballot``)."""

    view: int
    members: tuple[int, ...]
    ballot: tuple[int, int]
    reason: str


@dataclass(frozen=True, slots=True)
class ViewChangeBlocked(Event):
    """This member, as coordinator, proposed view ``view`` again ``rounds`` times in a
    row over ``blocked_s`` seconds without deciding it: that view may have been decided
    already by the vote of a member of both views that is not heard from (``awaited``,
    node ids), and no live member holding its cut has voted. Paxos keeps the proposal;
    the view change goes on once one of ``awaited`` is heard again (started from its
    state directory, its promise says whether it voted) or a live member completes the
    cut. Raised after 4, 8, 16, ... such rounds."""

    view: int
    awaited: tuple[int, ...]
    rounds: int
    blocked_s: float


@dataclass(frozen=True, slots=True)
class PeerClockRefused(Event):
    """Authentic datagrams of listed member ``peer`` are refused (dropped as ``stale`` or
    ``future``) because their send times are ``offset_s`` seconds away from this node's
    wall clock (positive: ahead), beyond ``window_s`` (``replay_window``): the two
    clocks disagree (or old traffic of ``peer`` is being replayed). Raised when that
    starts, not again while it goes on (``Node.clock_offsets`` has the figures)."""

    peer: int
    offset_s: float
    window_s: float


@dataclass(frozen=True, slots=True)
class FlushCompleted(Event):
    """View ``view`` was closed here: ``delivered`` messages went out in the flush,
    ``duration_s`` since this member froze it."""

    view: int
    delivered: int
    duration_s: float


@dataclass(frozen=True, slots=True)
class JoinRefused(Event):
    """A daemon may not join: ``reason`` is ``config_mismatch`` (``detail`` names the
    setting), ``duplicate_node_id`` or ``not_listed``. ``local``: this daemon is the one
    refused."""

    node: int
    reason: str
    detail: str
    local: bool


@dataclass(frozen=True, slots=True)
class NodeIdClaimed(Event):
    """Another daemon announces itself with this daemon's node id, as ``incarnation``
    (this one is ``mine``): two daemons were started with one id. While this one is a
    member of a primary view, it and the group refuse the other one (``JoinRefused``
    with ``duplicate_node_id`` there); this member reports it, once per such
    incarnation."""

    incarnation: int
    mine: int


@dataclass(frozen=True, slots=True)
class MessagesInDoubt(Event):
    """Own messages this member sent in view ``view``, which it was then excluded from,
    that the primary component did not deliver (beyond the cut that closed the view,
    or every one not yet known to be delivered, when this member never learned how the
    view closed). Members excluded with this one may have delivered them (so may this
    one, in the view's last moments); they are not sent again, which could deliver
    them twice: the application decides."""

    view: int
    payloads: tuple[bytes, ...]
    """Not delivered here either (to report to the application as not delivered)."""
    delivered_here: tuple[bytes, ...] = ()
    """Delivered here in the view's last moments, but not by the primary component."""
    delivered_elsewhere: tuple[bytes, ...] = ()
    """Inside the cut, so delivered by the primary component (a member of the next view
    held all of it when it voted: ``agreement.needs_holder``), but never here (this
    member lost the view before it ordered them: they lie in its gap). Not in doubt; listed so
    that a count of own messages in send order (the daemon's ledger) stays exact: they
    precede ``payloads``."""
    cut_known: bool = True
    """This member learned the cut that closed the view: ``payloads`` and
    ``delivered_here`` lie beyond it, and the primary component did not deliver them.
    ``False``: it never learned how the view ended (or was to deliver the cut itself and
    could not): the primary component may have delivered any of them; their outcome is
    unknown."""
