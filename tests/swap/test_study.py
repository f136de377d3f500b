"""The counting study: the section 6.1 comparison of *Ordered Multicast and Distributed
Swap*, as numbers (docs/swap.md prints the full table)."""

from __future__ import annotations

from amcast.protocols.simulation.swap_study import format_table, study


def test_study_shows_arrow_locality_and_the_combining_root() -> None:
    rows = {(r.shape, r.senders, r.mode): r for r in study(n=9, seeds=range(2), window=0.0)}
    assert all(r.violations == 0 for r in rows.values())
    for shape in ("star", "path", "balanced"):
        one_arrow = rows[(shape, "one", "arrow")]
        one_comb = rows[(shape, "one", "combining")]
        # one sender: arrow pays only its first message's way to the sink...
        assert one_arrow.swaps_per_msg < 0.2
        # ... combining pays the way to the root for every message, and the root sees all
        assert one_comb.swaps_per_msg >= 1.0 and one_comb.busiest_per_msg == 1.0
        for who in ("one", "all"):
            for mode in ("arrow", "combining", "hybrid"):
                r = rows[(shape, who, mode)]
                assert r.max_hops <= r.diameter
    table = format_table(list(rows.values()))
    assert table.count("\n") == len(rows) + 1 and "| path (8) | all | arrow |" in table
