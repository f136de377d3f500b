"""Table 2 of Scalable Atomic Multicast, counted at unit link delay without failures."""

from __future__ import annotations

from amcast.protocols.multigroup import baselines
from amcast.protocols.multigroup.checkers import check_size_minimality
from amcast.protocols.multigroup.table2 import (
    broadcast_table,
    production_messages,
    render,
    render_broadcast,
    render_production,
    table,
)


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


def test_production_rows() -> None:
    rows = table(protocol="production")
    for r in rows:
        assert r.messages == production_messages(r.d, len(r.sizes))
        assert r.gossip == 0
        assert r.max_steps == (3 if len(r.sizes) > 1 else 2)
    assert check_size_minimality((r.d, r.n, r.header) for r in rows) == []
    assert "formula" in render_production(rows)


def test_broadcast_rows_beside_the_paper() -> None:
    rows = broadcast_table((2, 3, 6, 12))
    for b in rows:
        k = b.n - 1
        seq, seq_near, sym, _, ct, ct_near = b.rows
        assert (seq.max_steps, seq.messages) == (2, 2 * k)
        assert seq_near.max_steps == 1 and seq_near.messages == 2 * k
        assert sym.messages == k + k * k and (b.n == 2 or sym.max_steps == 2)
        assert (ct.max_steps, ct.messages) == (4, 2 * k * k + 2 * k)
        assert ct_near.max_steps == 3
        assert ct.messages == baselines.paper("chandra-toueg", b.n)[1]
        assert len({r.header for r in b.rows if r.model != "chandra-toueg"}) == 1
    assert "chandra-toueg" in render_broadcast(rows)
