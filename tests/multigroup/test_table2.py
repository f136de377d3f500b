"""Table 2 of Scalable Atomic Multicast, counted at unit link delay without failures."""

from __future__ import annotations

from amcast.protocols.multigroup.checkers import check_size_minimality
from amcast.protocols.multigroup.table2 import render, table


def test_counts_beside_the_paper() -> None:
    rows = table()
    assert {r.d for r in rows} == {2, 3, 4, 5, 6}
    for r in rows:
        k = r.d - 1
        assert r.messages == r.paper_messages == 3 * k * k + 4 * k
        assert r.gossip == sum(s * (s - 1) for s in r.sizes)
        if min(r.sizes) > 1:
            assert r.max_steps == 6
    assert check_size_minimality((r.d, r.n, r.header) for r in rows) == []
    assert len({r.n for r in rows if r.d == 4}) == 3
    text = render(rows)
    assert "6 [5]" in text and "95" in text
