"""The job's figures on the clean log set equal the ones computed by hand (``expected``)."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.analytics import expected
from tests.analytics.conftest import CLEAN_SPEC, CLEAN_WINDOW, Analysed

pytestmark = pytest.mark.spark


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
    assert list(restarted.node) == [CLEAN_SPEC.crash[0]]  # type: ignore[index]
    for r in table.itertuples():
        if r.messages_delivered == 0:  # the restarted daemon before its first delivery
            assert pd.isna(r.retransmissions_per_msg) and pd.isna(r.drops_per_msg)
            continue
        assert r.retransmissions_per_msg == pytest.approx(
            r.retransmissions / r.messages_delivered)
        assert r.drops_per_msg == pytest.approx(r.drops / r.messages_delivered)


def test_view_changes(clean: Analysed, recs: list[dict]) -> None:
    views = clean.table("views")
    want = sorted((r["node"], r["incarnation"], r["view"], r["primary"], r.get("reason"),
                   len(r["members"])) for r in recs if r["type"] == "view")
    reasons = [None if pd.isna(x) else x for x in views.reason]
    assert sorted(zip(views.node, views.incarnation, views.view, views.primary,
                      reasons, views.n_members, strict=True)) == want
    assert set(views.n_members) == {0, 3, 4}  # a lost view's record: the nodes it hears
    summary = clean.table("summary").sort_values("node")
    installs = [sum(r["type"] == "view" and r["primary"] and r["node"] == n for r in recs)
                for n in range(CLEAN_SPEC.nodes)]
    assert list(summary.view_changes) == [k - 1 for k in installs] == [4, 4, 3, 3]


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


def test_workload_counts_each_message_once_at_its_sender(clean: Analysed,
                                                         recs: list[dict]) -> None:
    deliveries = [r for r in recs if r["type"] == "delivery"]
    own = [r for r in deliveries if r["node"] == r["sender"]]
    (w,) = clean.table("workload").itertuples()
    assert (w.variant, w.phi) == (CLEAN_SPEC.variant, CLEAN_SPEC.phi)
    assert list(w.nodes) == list(range(CLEAN_SPEC.nodes)) == list(w.senders)
    assert list(w.views) == clean.logset.view_ids
    assert w.vertices == len(own) <= CLEAN_SPEC.vertices  # a crashed sender may miss its own
    assert w.messages == sum(r["count"] for r in own)
    assert w.bytes == sum(r["bytes"] for r in own)
    for service in ("causal", "agreed", "safe"):
        assert getattr(w, service) == sum(r["count"] for r in own if r["service"] == service)
    assert w.duration_s == pytest.approx(
        max(r["ts"] for r in deliveries) - min(r["send_ts"] for r in deliveries))
    sentence = next(n for n in clean.report["notes"] if n.startswith("Workload:"))
    assert f"sent {w.vertices:,} vertices carrying {w.messages:,} messages" in sentence
    assert f"{CLEAN_SPEC.nodes} nodes" in sentence and "5 views" in sentence
