"""The shared vocabulary of every layer: service levels, message ids, delivery rules.

It sits at the bottom of ``amcast.protocols`` (it imports nothing of amcast), so the wire
codec, the reliable layer, the ordering engine and the Node's events all speak the same
words without importing each other upward.

Service levels (Transis / Spread vocabulary; section 1 of the ToTo paper for the causal
layer, sections 3-5 for the order):

- ``causal``: delivered when the reliable causal layer releases the vertex and every
  ``agreed``/``safe`` vertex in its causal past was delivered; no total-order position.
- ``agreed``: delivered in the total order decided by the ToTo engine.
- ``safe``: agreed, and additionally stable (acknowledged by every member) before
  delivery; a safe vertex holds back everything that follows it in the total order.

A message id is ``(sender node id, sequence number)``; sequence numbers start at 1 per
sender and per view. ``DeliveryRule`` names the rule of the seed paper that released a
message.
"""

from __future__ import annotations

from enum import StrEnum


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

MessageId = tuple[int, int]
"""``(sender node id, sequence number)``; sequence numbers start at 1 per sender."""


class DeliveryRule(StrEnum):
    """Which rule of the seed paper released a message."""

    EARLY = "early"  # early delivery rule (sections 3 and 4)
    DEFAULT = "default"  # default rule: Ntail(G) = n (also the lexicographic rule)
    GL_PREFIX = "gl_prefix"  # stable prefix of an unfinished activation (section 5)
    FLUSH = "flush"  # end of a view: the rest of the final DAG, deterministically (section 2)
