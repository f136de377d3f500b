"""A kept counterexample: a member's next swap must wait for its previous vertex's
delivery (``SwapOrdering.header``'s FIFO gate; docs/swap.md, "FIFO"). Without that wait
alone (the hold-back gate kept), the membership sweep's seed 1360 (hybrid) delivers a
member's own messages out of order after a partition, a leave and a pause."""

from __future__ import annotations

import pytest
from amcast.protocols.simulation.membership_sweep import seed_outcome
from amcast.protocols.swap.engine import SwapOrdering
from amcast.protocols.swap.messages import Ordered


def test_without_the_delivery_wait_the_hybrid_breaks_causal_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert not seed_outcome(1360, n_range=(3, 8), ordering="hybrid").violations
    gated = SwapOrdering.header

    def no_fifo_wait(self: SwapOrdering, now: float, queued: int,
                     unheld: bool) -> tuple[int, Ordered] | None:
        self._own_placed = max(self._own_placed, self._k)  # as if the last one were placed
        return gated(self, now, queued, unheld)

    monkeypatch.setattr(SwapOrdering, "header", no_fifo_wait)
    broken = seed_outcome(1360, n_range=(3, 8), ordering="hybrid")
    assert any(": causal_order: " in v for v in broken.violations), broken.violations
