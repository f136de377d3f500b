"""The total-order engine: the ToTo family of delivery rules on the causality DAG."""

from protocols.ordering.config import UNSAFE_RULES, OrderingConfig, OrderingRule
from protocols.ordering.engine import TotalOrderEngine
from protocols.ordering.messages import CausalMessage, DeliveryRule, MessageDelivered, MessageId

__all__ = [
    "UNSAFE_RULES",
    "CausalMessage",
    "DeliveryRule",
    "MessageDelivered",
    "MessageId",
    "OrderingConfig",
    "OrderingRule",
    "TotalOrderEngine",
]
