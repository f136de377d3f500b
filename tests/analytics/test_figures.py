"""The job's figures on the clean log set equal the ones computed by hand (``expected``)."""

from __future__ import annotations

import pytest

from tests.analytics import expected
from tests.analytics.conftest import CLEAN_SPEC, CLEAN_WINDOW, Analysed


@pytest.fixture(scope="module")
def recs(clean: Analysed) -> list[dict]:
    return expected.records(clean.logdir)


def _same(got: dict, want: dict) -> None:
    assert got.keys() == want.keys()
    for k, w in want.items():
        assert got[k] == pytest.approx(w, rel=1e-12), k


def _key(row) -> tuple:  # type: ignore[no-untyped-def]
    return (int(row.node), row.variant, float(row.window))


def test_throughput_per_node_and_window(clean: Analysed, recs: list[dict]) -> None:
    want = expected.throughput(recs, CLEAN_WINDOW)
    got = {_key(r): (r.vertices, r.messages, r.msgs_per_s)
           for r in clean.table("throughput").itertuples()}
    assert len(want) >= 4 * 3  # several windows per node
    _same(got, want)


def test_latency_percentiles_are_nearest_rank_per_message(clean: Analysed,
                                                          recs: list[dict]) -> None:
    want = expected.latency(recs, CLEAN_WINDOW)
    got = {_key(r): (r.messages, r.p50_ms, r.p90_ms, r.p99_ms, r.max_ms)
           for r in clean.table("latency").itertuples()}
    assert got.keys() == want.keys()
    for k, w in want.items():
        assert got[k] == pytest.approx(w, rel=1e-12), k


def test_avg_ntail_over_ordered_vertices(clean: Analysed, recs: list[dict]) -> None:
    want = expected.ntail(recs, CLEAN_WINDOW)
    got = {_key(r): r.avg_ntail for r in clean.table("ntail").itertuples()}
    assert got == pytest.approx(want) and got.keys() == want.keys()


def test_rule_mix(clean: Analysed, recs: list[dict]) -> None:
    want = expected.rules(recs, CLEAN_WINDOW)
    got = {(*_key(r), r.rule): (r.vertices, r.messages, r.share)
           for r in clean.table("rules").itertuples()}
    assert {k[3] for k in got} == {"early", "gl_prefix", "default", "causal"}
    _same(got, want)


def test_overhead_from_snapshot_differences_with_a_restart(clean: Analysed,
                                                           recs: list[dict]) -> None:
    want = expected.overhead(recs, CLEAN_WINDOW)
    table = clean.table("overhead")
    got = {_key(r): {c: getattr(r, c) for c in (*expected.COUNTERS, "restarts")}
           for r in table.itertuples()}
    assert got == want
    restarted = table[table.restarts > 0]
    assert list(restarted.node) == [CLEAN_SPEC.restart[0]]  # type: ignore[index]
    for r in table.itertuples():
        assert r.retransmissions_per_msg == pytest.approx(
            r.retransmissions / r.messages_delivered)
        assert r.drops_per_msg == pytest.approx(r.drops / r.messages_delivered)


def test_view_changes(clean: Analysed, recs: list[dict]) -> None:
    views = clean.table("views")
    want = sorted((r["node"], r["view"]) for r in recs if r["type"] == "view")
    assert sorted(zip(views.node, views.view, strict=True)) == want
    assert set(views.n_members) == {CLEAN_SPEC.nodes}
    summary = clean.table("summary")
    assert list(summary.view_changes) == [CLEAN_SPEC.view_changes] * CLEAN_SPEC.nodes


def test_summary_whole_run(clean: Analysed, recs: list[dict]) -> None:
    summary = clean.table("summary").set_index("node")
    for node in range(CLEAN_SPEC.nodes):
        mine = [r for r in recs if r["type"] == "delivery" and r["node"] == node]
        lat = [(r["ts"] - r["send_ts"]) * 1000 for r in mine for _ in range(r["count"])]
        row = summary.loc[node]
        assert row.messages == sum(r["count"] for r in mine)
        assert row.p50_ms == pytest.approx(expected.nearest_rank(lat, 0.5))
        assert row.p99_ms == pytest.approx(expected.nearest_rank(lat, 0.99))
        ordered = [r for r in mine if r["position"] is not None]
        assert row.avg_ntail == pytest.approx(sum(r["ntail"] for r in ordered) / len(ordered))
        assert row.early_share == pytest.approx(
            sum(r["rule"] == "early" for r in mine) / len(mine))
