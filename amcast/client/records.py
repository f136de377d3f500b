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
    """One application message as delivered to this client."""

    position: int | None  # total-order position (None for the causal service)
    sender: int  # node id of the sending daemon
    client: int  # the sending client's id at that daemon
    groups: tuple[str, ...]
    service: str
    payload: bytes
    view: int
    message_id: str  # "{view}:{sender}:{seq}:{index}", the same on every node


@dataclass(frozen=True, slots=True)
class DeliveredBatch:
    """One ``deliver`` frame: the part of one delivered vertex addressed to us."""

    sender: int
    seq: int
    service: str
    position: int | None
    view: int
    send_ts: float
    batches: list[list[Any]]  # [client, groups, index, [payload, ...]] per envelope

    @property
    def count(self) -> int:
        return sum(len(b[3]) for b in self.batches)

    def __iter__(self) -> Iterator[Delivery]:
        pos = self.position
        for client, groups, index, payloads in self.batches:
            g = tuple(groups)
            for i, payload in enumerate(payloads):
                k = index + i
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
    members: list[int]
    primary: bool = True
    joined: list[int] = field(default_factory=list)
    left: list[int] = field(default_factory=list)
    excluded: list[int] = field(default_factory=list)
    previous: int | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class OrderGap:
    """A ``gap`` frame: this daemon (rejoining) did not deliver the total order after
    ``after`` (view id, position of the last ordered message it delivered; None: nothing
    it remembers) up to the start of view ``view``. It comes before that view's first
    delivery: the application may transfer state from another member. ``after`` counts
    as ``Delivery.view`` and ``Delivery.position`` do: a client that joined every group
    saw the message at ``after`` last, so a state transfer starts right after it."""

    view: int
    after: tuple[int, int] | None


@dataclass(frozen=True, slots=True)
class Undelivered:
    """An ``undelivered`` error: this client's messages ``messages`` (numbers, see
    ``amcast.client.errors``) were accepted and not delivered here: the daemon stopped
    first, or it was excluded from the view they were sent in. They are not sent again;
    members excluded with it may or may not deliver them. ``outcome``:
    ``"not_delivered"`` (the daemon learned the primary component did not deliver them),
    ``"delivered"`` (the primary component delivered them while this daemon was away from
    the view: they lie in its order gap, and reach this client only by state transfer),
    ``"unknown"`` (it may have: the daemon never learned how the view ended), or ``""``
    (not said: a stopping daemon, or an older one). A later ``ConnectionClosed`` also
    counts them as unknown."""

    messages: range
    detail: str = ""
    outcome: str = ""

    @property
    def count(self) -> int:
        return len(self.messages)

    @property
    def first(self) -> int:
        return self.messages.start


@dataclass(frozen=True, slots=True)
class MembersChange:
    """One ``members`` notice (``join`` with ``members=True``): who is in ``group`` after
    the change (``(node, client, name)``), who ``joined``/``left``, why (``cause``: join,
    leave, disconnect, view, snapshot) and where in the total order (before message
    ``position`` of ``view``)."""

    group: str
    members: list[tuple[int, int, str]]
    joined: list[tuple[int, int, str]]
    left: list[tuple[int, int, str]]
    cause: str
    view: int
    position: int | None


def members_from_frame(frame: dict[str, Any]) -> MembersChange:
    def triples(xs: list[list[Any]]) -> list[tuple[int, int, str]]:
        return [(int(n), int(c), str(name)) for n, c, name in xs]

    return MembersChange(str(frame["group"]), triples(frame["members"]),
                         triples(frame["joined"]), triples(frame["left"]), str(frame["cause"]),
                         int(frame["view"]), frame["position"])


Event = DeliveredBatch | ViewChange | OrderGap | Undelivered | MembersChange


def batch_from_frame(frame: dict[str, Any]) -> DeliveredBatch:
    return DeliveredBatch(
        frame["sender"], frame["seq"], frame["service"], frame["position"], frame["view"],
        frame["send_ts"], frame["batches"],
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
    after = frame.get("after")
    pair = (int(after[0]), int(after[1])) if isinstance(after, list | tuple) else None
    return OrderGap(int(frame["view"]), pair)
