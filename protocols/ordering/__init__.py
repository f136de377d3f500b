"""The total-order engine: the ToTo family of delivery rules on the causality DAG."""

from .config import (
    DEFAULT_RULE,
    UNSAFE_RULES,
    OrderingConfig,
    OrderingRule,
)
from .engine import TotalOrderEngine
from .messages import (
    CausalMessage,
    DeliveryRule,
    MessageDelivered,
    MessageId,
)

__all__ = [
    "DEFAULT_RULE",
    "UNSAFE_RULES",
    "CausalMessage",
    "DeliveryRule",
    "MessageDelivered",
    "MessageId",
    "OrderingConfig",
    "OrderingRule",
    "TotalOrderEngine",
]
