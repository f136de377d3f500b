"""Events a ``protocols.Node`` emits, and the service levels it offers.

Events are small frozen dataclasses with past-tense names, pulled with ``Node.events()``.
Delivery is per batch: one ``BatchDelivered`` per delivered causality-DAG vertex (a
vertex carries the application messages batched into one datagram, section 1 of the
ToTo paper: every message is a vertex and its acks are the edges), so the consumer's hot
path does its work per batch, not per message.

Service levels (Transis / Spread vocabulary):

- ``causal``: delivered when the reliable causal layer releases the vertex (everything it
  acknowledges was released first) and every ``agreed``/``safe`` vertex in its causal past
  was delivered (``protocols.reliable.holdback``); ``position`` is ``None``.
- ``agreed``: delivered in the total order decided by the ToTo engine (sections 3-5).
- ``safe``: agreed, and additionally stable (acknowledged by every member) before
  delivery; a safe vertex holds back everything that follows it in the total order.

Guarantee across levels: causal order holds between any two messages, whatever their
service levels: a message is never delivered before one in its causal past. A ``causal``
message waits for the ordered messages in its past, but not for ordered messages that
are concurrent with it, which it may overtake.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from protocols.ordering.messages import DeliveryRule


class ServiceLevel(StrEnum):
    CAUSAL = "causal"
    AGREED = "agreed"
    SAFE = "safe"


SERVICE_CODES: dict[ServiceLevel, int] = {
    ServiceLevel.CAUSAL: 0,
    ServiceLevel.AGREED: 1,
    ServiceLevel.SAFE: 2,
}
SERVICE_BY_CODE: dict[int, ServiceLevel] = {code: level for level, code in SERVICE_CODES.items()}


class Event:
    """Marker base class of everything ``Node.events()`` returns."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class BatchDelivered(Event):
    """The application messages of one DAG vertex were delivered.

    ``position`` is the total-order position of the first message of the batch (counted
    in messages, identical at every member), ``None`` for causal service. ``activation``,
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
