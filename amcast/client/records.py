"""What a client receives: ``DeliveredBatch`` (one ``deliver`` frame), ``Delivery`` (one
message of it, built lazily when the batch is iterated) and ``ViewChange``."""

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


Event = DeliveredBatch | ViewChange


def batch_from_frame(frame: dict[str, Any]) -> DeliveredBatch:
    return DeliveredBatch(
        frame["sender"], frame["seq"], frame["service"], frame["position"], frame["view"],
        frame["send_ts"], frame["batches"],
    )
