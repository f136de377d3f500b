"""An arrow member's next swap starts as soon as its previous vertex is made, not once
that vertex is delivered here (``SwapOrdering.header``): the arrow keeps a member's
swaps in order by itself (docs/swap.md, "Swaps in a row"). Combining and the hybrid
still wait for the delivery: without it the membership sweep's seed 1360 (hybrid)
breaks causal order."""

from __future__ import annotations

import pytest
from amcast.protocols.simulation.membership_sweep import seed_outcome
from amcast.protocols.swap.engine import SwapOrdering
from amcast.protocols.swap.messages import Ordered


def ordering(node: int, mode: str = "arrow") -> SwapOrdering:
    return SwapOrdering(1, (0, 1, 2), node, ordering=mode, shape="balanced", fanout=2,
                        root_group=1, window=0.0, rto=0.05, drop=lambda r, d: None)


def test_the_next_arrow_swap_does_not_wait_for_the_previous_delivery() -> None:
    s = ordering(0)  # the arrow's sink: its swaps are local
    assert s.header(0.0, 1, True) == (1, Ordered(None, (0, 1)))
    s.frame((b"m1",))
    # vertex (0, 1) is made but not delivered here (nothing inserted): swap 2 starts
    assert s.header(0.001, 1, True) == (2, Ordered((0, 1), (0, 2)))
    assert s.pending == 0 and s.swaps == s.local_swaps == 2


def test_a_causal_vertex_in_the_hold_back_still_holds_the_next_swap() -> None:
    for mode in ("arrow", "combining", "hybrid"):
        s = ordering(0, mode)
        assert s.header(0.0, 1, False) is None  # unheld False: no swap starts
        assert s.swaps == 0


def test_one_request_per_member_is_in_flight() -> None:
    s = ordering(1)  # not the sink: the request goes toward node 0
    assert s.header(0.0, 1, True) is None
    assert s.header(0.001, 2, True) is None
    sent = s.take_datagrams()
    assert s.swaps == 1 and [d.dst for d in sent] == [0]


def test_combining_and_the_hybrid_wait_for_the_previous_delivery() -> None:
    for mode in ("combining", "hybrid"):
        s = ordering(0, mode)  # the root: its swaps are local
        assert s.header(0.0, 1, True) == (1, Ordered(None, (0, 1)))
        s.frame((b"m1",))
        assert s.header(0.001, 1, True) is None  # (0, 1) is not delivered here yet
        assert s.swaps == 1


def test_without_the_delivery_wait_the_hybrid_breaks_causal_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The planted violation of the FIFO gate of combining and the hybrid: seed 1360 of
    the membership sweep (hybrid) holds with it and breaks without it."""
    assert not seed_outcome(1360, n_range=(3, 8), ordering="hybrid").violations
    monkeypatch.setattr(SwapOrdering, "_fifo_by_itself", lambda self: True)
    broken = seed_outcome(1360, n_range=(3, 8), ordering="hybrid")
    assert any(": causal_order: " in v for v in broken.violations), broken.violations
