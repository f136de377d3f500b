"""Which delivery rule orders messages, and with what threshold phi.

Sections 3 and 4 of the ToTo paper bound phi per variant: ToTo and S-ToTo need
``phi >= n/2`` (a source with more than phi votes then holds a majority), G-ToTo and
GL-ToTo allow ``1 < phi < n``. ``lex`` (wait for a message from every processor, then
deliver the roots in processor-id order, section 2) ignores phi. A bad phi is a
``ConfigurationError`` raised before any message is ordered.

Variants listed in ``UNSAFE_RULES`` violate the safety properties as written in the
paper; the property tests keep the counterexamples (docs/design/ordering.md, "Safety of the rules").
They run only with ``allow_unsafe=True`` (the simulator, to measure them), never in the
daemon.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from ..errors import ConfigurationError


class OrderingRule(StrEnum):
    LEX = "lex"
    TOTO = "toto"
    STOTO = "stoto"
    GTOTO = "gtoto"
    GLTOTO = "gltoto"


UNSAFE_RULES: dict[OrderingRule, str] = {
    OrderingRule.TOTO: (
        "its condition Ntail(s) >= n - phi depends on messages after each processor's "
        "first, so processors with the same votes can close an activation differently "
        "and diverge (tests/ordering/test_unsafe_counterexamples.py); use stoto"
    ),
}
"""Rules that violate total order as written in the paper, with the reason."""


DEFAULT_RULE = OrderingRule.GLTOTO
"""The one default delivery rule (NodeConfig, the daemon's config and the docs use it)."""


@dataclass(frozen=True, slots=True)
class OrderingConfig:
    """The ordering rule and its threshold.

    ``phi=None`` means the paper's recommended ``n/2`` (section 8), resolved per group
    size by ``resolve_phi`` (1.5 for G-ToTo and GL-ToTo with two members).
    """

    rule: OrderingRule = DEFAULT_RULE
    phi: float | None = None
    allow_unsafe: bool = False
    ack_roots_leave: bool = False
    """An ack-only vertex leaves G as soon as all its predecessors have: it votes while it
    follows an undelivered message, but is never a candidate (see the engine's theory of
    operation). False: the paper's model, where ack-only messages are ordered like any
    other (``amcast simulate`` reproduces section 7 with it)."""

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "rule", OrderingRule(self.rule))
        except ValueError:
            choices = ", ".join(r.value for r in OrderingRule)
            raise ConfigurationError(
                f"unknown ordering rule {self.rule!r}; choose one of {choices}"
            ) from None
        if self.rule in UNSAFE_RULES and not self.allow_unsafe:
            raise ConfigurationError(
                f"ordering rule {self.rule.value!r} is unsafe: {UNSAFE_RULES[self.rule]}"
            )

    def resolve_phi(self, n: int) -> float:
        """Return the threshold for a group of ``n`` processors, or raise ConfigurationError."""
        if n < 1:
            raise ConfigurationError("a group needs at least one member")
        generalized = self.rule in (OrderingRule.GTOTO, OrderingRule.GLTOTO)
        if self.phi is not None:
            phi = float(self.phi)
        elif generalized:
            phi = max(n / 2, 1.5)  # n/2, kept inside 1 < phi < n for n = 2
        else:
            phi = n / 2
        if self.rule is OrderingRule.LEX or n == 1:
            return phi  # with one member every rule delivers at once
        if self.rule in (OrderingRule.TOTO, OrderingRule.STOTO):
            if phi < n / 2 or phi >= n:
                raise ConfigurationError(
                    f"{self.rule.value} needs n/2 <= phi < n; got phi={phi} with n={n}"
                )
        elif not 1 < phi < n:
            raise ConfigurationError(
                f"{self.rule.value} needs 1 < phi < n; got phi={phi} with n={n}"
            )
        return phi
