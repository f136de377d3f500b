"""What a client receives, in the daemon's frame order: ``DeliveredBatch`` (one
``deliver`` frame), ``Delivery`` (one message of it, built lazily when the batch is
iterated), ``ViewChange`` (a ``view`` frame), ``OrderGap`` (a ``gap`` frame),
``Undelivered`` (an ``undelivered`` error about this client's own messages) and
``MembersChange`` (a ``members`` notice of group membership)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Delivery:
    """One application message as delivered to this client (iterate a
    ``DeliveredBatch`` for them)."""

    position: int | None
    """Its total-order position within ``view`` (the same on every node); None for the
    ``causal`` service, which has no position."""
    sender: int
    """The node id of the sending daemon."""
    client: int
    """The sending client's id at that daemon (``welcome``'s ``client`` there): with
    ``sender``, who sent it; ``(client.node, client.client_id)`` is this client."""
    groups: tuple[str, ...]
    """The groups it was sent to (this client joined at least one)."""
    service: str
    """``causal``, ``agreed`` or ``safe``."""
    payload: bytes
    """The application's bytes."""
    view: int
    """The view in which it was delivered."""
    message_id: str
    """``"{view}:{sender}:{seq}:{index}"``, the same on every node (and in the delivery
    log); a cross-cluster message's is the federation's id, the same in every cluster."""
    clusters: tuple[str, ...] = ()
    """A cross-cluster message (``send(..., clusters=...)``): the clusters it went to;
    ``()`` for a message of this cluster alone."""
    cluster: str = ""
    """A cross-cluster message: the cluster of its sender (``sender`` is a node id there)."""
    gts: int | None = None
    """A cross-cluster message: its global timestamp, the key of the order common to every
    cluster it went to (``position`` is None)."""


@dataclass(frozen=True, slots=True)
class DeliveredBatch:
    """One ``deliver`` frame: the part of one delivered batch (a datagram of the sending
    daemon) addressed to this client. Iterate it for its ``Delivery`` records."""

    sender: int
    """The node id of the sending daemon."""
    seq: int
    """The sending daemon's sequence number of the batch."""
    service: str
    """``causal``, ``agreed`` or ``safe``."""
    position: int | None
    """The total-order position of the batch's first message within ``view`` (None for
    ``causal``)."""
    view: int
    """The view in which it was delivered."""
    send_ts: float
    """The sending daemon's clock when it sent the batch (Unix seconds)."""
    batches: list[list[Any]]
    """``[client, groups, index, [payload, ...]]`` per sending client's frame (or part
    of it): message ``i`` is at position ``position + index + i``."""
    clusters: tuple[str, ...] = ()
    """A cross-cluster message: the clusters it went to (``Delivery.clusters``)."""
    cluster: str = ""
    """A cross-cluster message: its sender's cluster."""
    gts: int | None = None
    """A cross-cluster message: its global timestamp."""
    msg_id: str = ""
    """A cross-cluster message: the federation's message id."""

    @property
    def count(self) -> int:
        """The number of messages in the batch."""
        return sum(len(b[3]) for b in self.batches)

    def __iter__(self) -> Iterator[Delivery]:
        pos = self.position
        for client, groups, index, payloads in self.batches:
            g = tuple(groups)
            for i, payload in enumerate(payloads):
                k = index + i
                if self.clusters:
                    yield Delivery(None, self.sender, client, g, self.service, payload,
                                   self.view, self.msg_id, self.clusters, self.cluster,
                                   self.gts)
                    continue
                yield Delivery(
                    None if pos is None else pos + k, self.sender, client, g, self.service,
                    payload, self.view, f"{self.view}:{self.sender}:{self.seq}:{k}",
                )


@dataclass(frozen=True, slots=True)
class ViewChange:
    """A ``view`` frame. ``primary``: the daemon is in the primary view ``view`` of
    ``members`` (which ``joined``, ``left`` gracefully or were ``excluded`` since view
    ``previous``) and delivers; not ``primary``: it lost its primary view (``reason``:
    ``no_quorum``, ``excluded``, ``paused``, ``left``), ``members`` are the nodes it still
    hears, and it delivers nothing ordered until a later primary view."""

    view: int
    """The view's id (increasing, not consecutive)."""
    members: list[int]
    """Its members (node ids); not ``primary``: the nodes the daemon still hears."""
    primary: bool = True
    """The daemon is in a primary view and delivers ordered messages."""
    joined: list[int] = field(default_factory=list)
    """Members that were not in the previous view."""
    left: list[int] = field(default_factory=list)
    """Members of the previous view that left it gracefully (SIGTERM)."""
    excluded: list[int] = field(default_factory=list)
    """Members of the previous view that were excluded (crashed, paused, cut off)."""
    previous: int | None = None
    """The id of the view this one follows (None: not said)."""
    reason: str | None = None
    """Why a primary view was lost: ``no_quorum``, ``excluded``, ``paused``, ``left``,
    ``stuck_flush`` (None for a primary view)."""


@dataclass(frozen=True, slots=True)
class OrderGap:
    """A ``gap`` frame: this daemon (rejoining) did not deliver the total order after
    ``after`` (view id, position of the last ordered message it delivered; None: nothing
    it remembers) up to the start of view ``view``. It comes before that view's first
    delivery: the application may transfer state from another member. ``after`` counts
    as ``Delivery.view`` and ``Delivery.position`` do: a client that joined every group
    saw the message at ``after`` last, so a state transfer starts right after it."""

    view: int
    """The view the daemon is rejoining."""
    after: tuple[int, int] | None
    """``(view, position)`` of the last ordered message it delivered, or None."""


@dataclass(frozen=True, slots=True)
class Undelivered:
    """An ``undelivered`` error: this client's messages ``messages`` (numbers, see
    ``amcast.client.errors``) were accepted and not delivered here: the daemon stopped
    first, or it was excluded from the view they were sent in, or (cross-cluster
    messages) their destination clusters did not all acknowledge them in time. Local
    messages are not sent again; members excluded with it may or may not deliver them.
    Cross-cluster ones (``reason`` ``deadline``) are still sent by the daemon: their
    outcome is ``unknown``, they are delivered by every destination cluster or by none. ``outcome``:
    ``"not_delivered"`` (the daemon learned the primary component did not deliver them),
    ``"delivered"`` (the primary component delivered them while this daemon was away from
    the view: they lie in its order gap, and reach this client only by state transfer),
    ``"unknown"`` (it may have: the daemon never learned how the view ended), or ``""``
    (not said: a stopping daemon, or an older one). A later ``ConnectionClosed`` also
    counts them as unknown."""

    messages: range
    """This connection's message numbers concerned (as ``send()`` returned them)."""
    detail: str = ""
    """The daemon's explanation, for people."""
    outcome: str = ""
    """``not_delivered``, ``delivered``, ``unknown`` or ``""`` (see above)."""
    reason: str = ""
    """Why (``amcast.socket_protocol.UNDELIVERED_REASONS``): ``view_change`` (excluded
    from the view they were sent in), ``shutting_down`` (the daemon stopped first),
    ``deadline`` (cross-cluster messages that not every destination cluster
    acknowledged holding within ``federation.deadline_s``), or ``""`` (an older
    daemon)."""
    clusters: tuple[str, ...] = ()
    """``deadline``: the destination clusters that had not acknowledged, sorted."""

    @property
    def count(self) -> int:
        """How many messages."""
        return len(self.messages)

    @property
    def first(self) -> int:
        """The first message's number."""
        return self.messages.start


@dataclass(frozen=True, slots=True)
class MembersChange:
    """One ``members`` notice (``join`` with ``members=True``): who is in ``group`` after
    the change (``(node, client, name)``), who ``joined``/``left``, why (``cause``: join,
    leave, disconnect, view, snapshot) and where in the total order (before message
    ``position`` of ``view``). Every member's daemon writes the same notice at the same
    place of the order, so a message sent after reading one that lists a member is
    delivered to that member (``wait_for_members`` waits for such a notice)."""

    group: str
    """The group."""
    members: list[tuple[int, int, str]]
    """Everyone in the group after the change, sorted: ``(node, client, name)``, with
    the client's ``hello`` name (``""`` if none)."""
    joined: list[tuple[int, int, str]]
    """Who came in with this change."""
    left: list[tuple[int, int, str]]
    """Who went."""
    cause: str
    """``join``, ``leave``, ``disconnect``, ``view`` (its daemon left, was excluded or
    restarted) or ``snapshot`` (a daemon's list of its clients, at each view's start)."""
    view: int
    """The view in which the change took effect."""
    position: int | None
    """It took effect before this message position of ``view``."""


def members_from_frame(frame: dict[str, Any]) -> MembersChange:
    """A ``members`` frame as a record."""
    def triples(xs: list[list[Any]]) -> list[tuple[int, int, str]]:
        return [(int(n), int(c), str(name)) for n, c, name in xs]

    return MembersChange(str(frame["group"]), triples(frame["members"]),
                         triples(frame["joined"]), triples(frame["left"]), str(frame["cause"]),
                         int(frame["view"]), frame["position"])


Event = DeliveredBatch | ViewChange | OrderGap | Undelivered | MembersChange
"""Anything ``next_event`` returns."""


def batch_from_frame(frame: dict[str, Any]) -> DeliveredBatch:
    """A ``deliver`` frame as a record."""
    clusters = frame.get("clusters")
    if not clusters:
        return DeliveredBatch(
            frame["sender"], frame["seq"], frame["service"], frame["position"], frame["view"],
            frame["send_ts"], frame["batches"],
        )
    gts = frame.get("gts")
    return DeliveredBatch(
        frame["sender"], frame["seq"], frame["service"], frame["position"], frame["view"],
        frame["send_ts"], frame["batches"], tuple(map(str, clusters)),
        str(frame.get("cluster", "")), gts if type(gts) is int else None,
        str(frame.get("msg_id", "")),
    )


def _ints(value: Any) -> list[int]:
    return [int(x) for x in value] if isinstance(value, list | tuple) else []


def view_from_frame(frame: dict[str, Any]) -> ViewChange:
    """A ``view`` frame (or a ``welcome``: its ``view``, ``members`` and ``primary``)."""
    previous = frame.get("previous")
    reason = frame.get("reason")
    return ViewChange(
        int(frame.get("view", 0)), _ints(frame.get("members")), bool(frame.get("primary", True)),
        _ints(frame.get("joined")), _ints(frame.get("left")), _ints(frame.get("excluded")),
        previous if type(previous) is int else None, reason if isinstance(reason, str) else None,
    )


def gap_from_frame(frame: dict[str, Any]) -> OrderGap:
    """A ``gap`` frame (or ``welcome``'s ``gap``) as a record."""
    after = frame.get("after")
    pair = (int(after[0]), int(after[1])) if isinstance(after, list | tuple) else None
    return OrderGap(int(frame["view"]), pair)
