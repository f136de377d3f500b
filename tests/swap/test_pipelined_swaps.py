"""A kept counterexample: swaps in a row (a member's next swap starts once its previous
one is resolved, before that vertex is delivered; ``engine.IN_A_ROW``) need the
view-close skip to keep every origin's ids in order (``DeliveryBuffer.skip(fifo=True)``;
docs/swap.md, "FIFO"). With the plain lowest-head skip, the membership sweep's seed 1360
(hybrid) delivers node 7's own messages out of order after view 3 closes on node 2's
restart: its swap ids 7 to 9 wait behind the lost (5, 6), its 10 to 12 behind the lost
(0, 9), and the fragment headed by (1, 10) goes first. The seed was found while swap
orderings acked with ToTo's timing (``session.SWAP_PROMPT_ACKS``): the counterexample
runs with it, a schedule the skip must survive like any other."""

from __future__ import annotations

import pytest
from amcast.protocols import session
from amcast.protocols.simulation.membership_sweep import seed_outcome
from amcast.protocols.swap import engine
from amcast.protocols.swap.delivery import DeliveryBuffer, DeliveryEvent


def test_swaps_in_a_row_with_the_lowest_head_skip_break_causal_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert "hybrid" in engine.IN_A_ROW
    assert not seed_outcome(1360, n_range=(3, 8), ordering="hybrid").violations
    monkeypatch.setattr(session, "SWAP_PROMPT_ACKS", True)
    assert not seed_outcome(1360, n_range=(3, 8), ordering="hybrid").violations
    skip = DeliveryBuffer.skip

    def lowest_head(self: DeliveryBuffer, now: float, fifo: bool = False) -> list[DeliveryEvent]:
        return skip(self, now)

    monkeypatch.setattr(DeliveryBuffer, "skip", lowest_head)
    broken = seed_outcome(1360, n_range=(3, 8), ordering="hybrid")
    assert any(": causal_order: " in v for v in broken.violations), broken.violations


def test_with_the_delivery_wait_the_lowest_head_skip_is_enough(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Waiting for the previous own vertex's delivery leaves at most one own vertex per
    member undelivered, so no skip order can swap two of them."""
    skip = DeliveryBuffer.skip

    def lowest_head(self: DeliveryBuffer, now: float, fifo: bool = False) -> list[DeliveryEvent]:
        return skip(self, now)

    monkeypatch.setattr(DeliveryBuffer, "skip", lowest_head)
    monkeypatch.setattr(engine, "IN_A_ROW", frozenset())
    monkeypatch.setattr(session, "SWAP_PROMPT_ACKS", True)  # the counterexample's schedule
    assert not seed_outcome(1360, n_range=(3, 8), ordering="hybrid").violations
