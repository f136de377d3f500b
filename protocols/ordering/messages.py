"""What the total-order engine consumes and what it emits.

The reliable causal layer (Trans/Transis, section 1 of the ToTo paper) releases
``CausalMessage`` records in causal order; each one is a vertex of the causality DAG and
its ``acks`` are the DAG's edges (section 2, "Causality DAG"). The engine answers with
``MessageDelivered`` events, one per delivered vertex that carries a payload.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..vocabulary import DeliveryRule, MessageId


@dataclass(frozen=True, slots=True)
class CausalMessage:
    """One vertex of the causality DAG, released by the causal layer.

    ``acks`` holds ``(node, seq)`` pairs: this message causally follows message
    ``(node, seq)`` and, since a sender's messages are chained, every earlier message of
    ``node``. The sender's own previous message is implied and need not be listed.
    ``payload`` is opaque to the engine; ``None`` marks an ack-only message, which votes
    like any other but is never handed to applications.
    """

    sender: int
    seq: int
    acks: tuple[MessageId, ...] = ()
    payload: Any = None

    @property
    def id(self) -> MessageId:
        return (self.sender, self.seq)

    @property
    def ack_only(self) -> bool:
        return self.payload is None


@dataclass(frozen=True, slots=True)
class MessageDelivered:
    """A message released in total order (past tense: it has happened).

    ``position`` counts delivered messages that carry a payload, from 0, identically at
    every processor. ``activation`` is the activation of the ordering protocol that
    released it. ``ntail`` and ``unseen`` are Ntail(G) and u at the moment of delivery,
    ``nvt`` the number of votes the message had.
    """

    sender: int
    seq: int
    payload: Any
    position: int
    activation: int
    rule: DeliveryRule
    ntail: int
    unseen: int
    nvt: int

    @property
    def id(self) -> MessageId:
        return (self.sender, self.seq)
