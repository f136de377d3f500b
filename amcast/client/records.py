"""What a client receives: ``DeliveredBatch`` (one ``deliver`` frame), ``Delivery`` (one
message of it, built lazily when the batch is iterated), ``ViewChange`` and
``MembersChange`` (group membership)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
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
    view: int
    members: list[int]


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


Event = DeliveredBatch | ViewChange | MembersChange


def batch_from_frame(frame: dict[str, Any]) -> DeliveredBatch:
    return DeliveredBatch(
        frame["sender"], frame["seq"], frame["service"], frame["position"], frame["view"],
        frame["send_ts"], frame["batches"],
    )
