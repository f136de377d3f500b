"""The audit finds exactly the planted violations of every kind, and nothing on a clean
multi-view log set (a crash with a differing agreed tail, a restart, a pause, gaps).

The expected rows are computed here from the planted records, independently of the job:
which view, which nodes (and lives), which positions and messages.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import pytest
from amcast.analytics import synthetic

from tests.analytics.conftest import CLEAN_SPEC, JUNK_LINES, Analysed

pytestmark = pytest.mark.spark

AUDIT = ("violations", "positions", "duplicates", "missing", "outside_primary", "gaps",
         "view_conflicts")


def _mid(rec: dict, i: int = 0) -> str:
    return f"{int(rec['sender'])}:{int(rec['seq'])}:{i}"


def _inc(logset: synthetic.LogSet, node: int, view: int) -> int:
    """The incarnation of the life of ``node`` that installed ``view``."""
    return next(e["incarnation"] for e in logset.events[node]
                if e["type"] == "view" and e["view"] == view)


def _length(logset: synthetic.LogSet, view: int) -> int:
    """Ordered messages in ``view``: the furthest position its installers delivered, + 1."""
    best = 0
    for node, d in logset.deliveries.items():
        lives = {e["incarnation"] for e in logset.events[node]
                 if e["type"] == "view" and e["primary"] and e["view"] == view}
        sel = d[(d["view"] == view) & d["incarnation"].isin(lives) & d["position"].notna()]
        if len(sel):
            best = max(best, int((sel["position"] + sel["count"]).max()))
    return best


def _message_at(d: pd.DataFrame, view: int, position: int) -> str:
    sel = d[((d["view"] == view) & (d["position"] <= position)
             & (d["position"] + d["count"] > position)).fillna(False)]
    (rec,) = sel.to_dict("records")
    return _mid(rec, position - int(rec["position"]))


def _num(x: Any) -> Any:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else int(x)


def test_clean_multi_view_log_set_passes(clean: Analysed) -> None:
    for name in AUDIT:
        assert clean.table(name).empty, name
    r = clean.report
    assert r["figures"]["order audit"] == "PASS"
    assert all(r["audit"][k]["count"] == 0 for k in AUDIT)
    assert "Order audit PASSED" in (clean.out / "index.html").read_text()
    assert r["figures"]["delivery records"] == clean.logset.records()
    assert r["figures"]["ignored lines"] == 0
    assert (r["figures"]["views"], r["figures"]["daemon lives"]) == (5, 5)


def test_the_clean_set_holds_what_the_audit_must_allow(clean: Analysed) -> None:
    """The crashed member's last agreed delivery differs from the others' at its
    position (allowed: after its last safe one); gap notices cover what was missed."""
    ls, ids = clean.logset, clean.logset.view_ids
    t = ls.tail
    assert t is not None and t["view"] == ids[1]
    assert (_message_at(ls.deliveries[3], t["view"], t["position"])
            != _message_at(ls.deliveries[0], t["view"], t["position"]))
    notices = clean.table("gap_notices")
    got = sorted((int(g.node), int(g.view), _num(g.after_view), _num(g.after_position),
                  int(g.missed)) for g in notices.itertuples())
    paused = next(e for e in ls.events[2] if e["type"] == "gap" and e["view"] == ids[4])
    av, ap = paused["after"]
    # none at formation: nothing was ordered before the first view
    want = [(3, ids[3], None, None, sum(_length(ls, ids[k]) for k in range(3))),
            (2, ids[4], av, ap, _length(ls, av) - ap - 1 + _length(ls, ids[3]))]
    assert got == sorted(want)
    views = clean.table("view_history")
    assert [list(x) for x in views.completed_by] == [  # node 3 crashes in k1, 2 pauses in k2
        [0, 1, 2, 3], [0, 1, 2], [0, 1], [0, 1, 3], [0, 1, 2, 3]]
    assert list(views.view) == ids and list(views.number) == [1, 2, 3, 4, 5]


def test_order_violations_within_a_view_and_a_safe_tail_that_is_not_uniform(
        faulty: Analysed) -> None:
    ls, ids = faulty.logset, faulty.logset.view_ids
    want = set()
    node, at_p, after = faulty.planted["swap"]  # node 1 delivered `at_p` where others `after`
    p, n = int(at_p["position"]), int(at_p["count"]) + int(after["count"])
    for other in (0, 2, 3):
        a, b = sorted((node, other))
        ma, mb = (_mid(at_p), _mid(after)) if a == node else (_mid(after), _mid(at_p))
        want.add((ids[4], a, _inc(ls, a, ids[4]), b, _inc(ls, b, ids[4]), p, ma, mb, n))
    tail = faulty.planted["safe_tail"]  # node 3 (crashed in k0) delivered a safe vertex early
    tp = int(tail["position"])
    for other in (0, 1, 2):
        want.add((ids[0], other, _inc(ls, other, ids[0]), 3, int(tail["incarnation"]), tp,
                  _message_at(ls.deliveries[other], ids[0], tp), _mid(tail),
                  int(tail["count"])))
    v = faulty.table("violations")
    got = {(int(r.view), int(r.node_a), int(r.incarnation_a), int(r.node_b),
            int(r.incarnation_b), int(r.first_position), r.message_a, r.message_b,
            int(r.divergent_positions)) for r in v.itertuples()}
    assert len(v) == len(got) and got == want


def test_positions_that_do_not_count_from_0_or_have_a_hole(faulty: Analysed) -> None:
    ls, ids = faulty.logset, faulty.logset.view_ids
    _, lost = faulty.planted["lost_ordered"]  # node 0 lost a vertex in k1: a hole
    n1 = _length(ls, ids[1])
    want = {(ids[1], 0, _inc(ls, 0, ids[1]), n1 - int(lost["count"]), 0, n1 - 1)}
    n3 = _length(ls, ids[3])  # k3's positions were shifted by 1 at every member
    want |= {(ids[3], node, _inc(ls, node, ids[3]), n3 - 1, 1, n3 - 1) for node in (0, 1, 3)}
    got = {tuple(int(x) for x in r[1:]) for r in faulty.table("positions").itertuples()}
    assert got == want


def test_duplicates_reported_with_view_times_and_positions(faulty: Analysed) -> None:
    d = faulty.table("duplicates")
    got = sorted(zip(d.node, d.view, d.message, d.times, [tuple(x) for x in d.positions],
                     strict=True))
    node, first, again = faulty.planted["dup_ordered"]
    want = [(node, int(first["view"]), _mid(first, i), 2,
             (int(first["position"]) + i, int(again["position"]) + i))
            for i in range(int(first["count"]))]
    cnode, crec = faulty.planted["dup_causal"]
    want += [(cnode, int(crec["view"]), _mid(crec, i), 2, ()) for i in range(int(crec["count"]))]
    assert got == sorted(want)


def test_complete_members_missing_messages_of_their_view(faulty: Analysed) -> None:
    """Virtual synchrony: node 0 completed k1 without one ordered vertex, node 1 k3
    without a causal one; nothing is expected of the crashed or paused members."""
    ls, ids = faulty.logset, faulty.logset.view_ids
    m = faulty.table("missing")
    got = sorted(zip(m.view, m.node, m.incarnation, m.message, m.service,
                     [tuple(x) for x in m.delivered_by], strict=True))
    want = []
    for key, others in (("lost_ordered", (1, 2)), ("lost_causal", (0, 3))):
        node, rec = faulty.planted[key]
        want += [(int(rec["view"]), node, _inc(ls, node, int(rec["view"])), _mid(rec, i),
                  rec["service"], others) for i in range(int(rec["count"]))]
    assert got == sorted(want)
    assert {int(v) for v in m.view} == {ids[1], ids[3]}


def test_ordered_deliveries_outside_a_primary_view(faulty: Analysed) -> None:
    ids = faulty.logset.view_ids
    late, stray, after = (faulty.planted[k] for k in ("late", "stray", "after_loss"))

    def row(rec: dict, reason: str) -> tuple:
        p, c = int(rec["position"]), int(rec["count"])
        return (int(rec["node"]), int(rec["view"]), reason, c, p, p + c - 1)

    want = {row(late, f"after it installed view {ids[1]}"),
            row(stray, "it never installed the view"),
            row(after, "after it lost the view (paused)")}
    o = faulty.table("outside_primary")
    got = {(int(r.node), int(r.view), r.reason, int(r.messages), int(r.first_position),
            int(r.last_position)) for r in o.itertuples()}
    assert got == want and set(o.vertices) == {1}


def test_gap_notices_that_do_not_match_what_was_missed(faulty: Analysed) -> None:
    ls, ids = faulty.logset, faulty.logset.view_ids
    (av, ap), _ = faulty.planted["gap_after"]  # node 2's notice says one message less
    dropped = faulty.planted["no_gap"]  # node 3's restarted life had no notice
    want = {
        (ids[2], 3, int(dropped["incarnation"]), "no gap notice", None, None, None, None,
         _length(ls, ids[0]) + _length(ls, ids[1])),
        (ids[4], 2, _inc(ls, 2, ids[4]), "after is not its last ordered delivery", av,
         ap - 1, av, ap, _length(ls, av) - ap + _length(ls, ids[3])),
    }
    g = faulty.table("gaps")
    got = {(int(r.view), int(r.node), int(r.incarnation), r.problem, _num(r.after_view),
            _num(r.after_position), _num(r.last_view), _num(r.last_position), int(r.missed))
           for r in g.itertuples()}
    assert got == want


def test_view_records_that_disagree(faulty: Analysed) -> None:
    ids = faulty.logset.view_ids
    c = faulty.table("view_conflicts")
    assert [(int(r.view), r.problem, list(r.nodes), r.detail) for r in c.itertuples()] == [
        (ids[3], "members differ", [1], "[0, 1, 3] at nodes 0, 3; [0, 1, 2] at node 1")]


def test_cli_reports_the_failed_audit(faulty: Analysed) -> None:
    r = faulty.report
    assert faulty.status == 1
    assert r["figures"]["order audit"] == "FAIL"
    counts = {k: r["audit"][k]["count"] for k in AUDIT}
    assert counts == {k: len(faulty.table(k)) for k in AUDIT}
    assert all(counts.values())
    assert r["figures"]["order violations (view x node pairs)"] == counts["violations"] == 6
    notes = "\n".join(r["notes"])
    ids = faulty.logset.view_ids
    for sentence in (
        f"In view {ids[4]}, nodes 0 and 1 disagree on the total order from position",
        f"Node 0's positions in view {ids[1]} do not count from 0 without holes",
        f"Node 0 completed view {ids[1]} without delivering message",
        f"of view {ids[0]} (position", "outside its time in that view: after it installed",
        f"Node 3 installed view {ids[2]} without a gap notice, having missed",
        f"Node 2's gap notice before view {ids[4]} says it delivered up to (view {ids[2]}",
        f"View {ids[3]}: members differ: [0, 1, 3] at nodes 0, 3; [0, 1, 2] at node 1.",
    ):
        assert sentence in notes, sentence
    node, first, again = faulty.planted["dup_ordered"]
    dup = r["audit"]["duplicates"]["first"]
    assert {"node": node, "message": _mid(first), "times": 2,
            "positions": [int(first["position"]), int(again["position"])]
            }.items() <= next(d for d in dup if d["node"] == node).items()
    html = (faulty.out / "index.html").read_text()
    assert "Order audit FAILED" in html and "<h2>Views</h2>" in html
    for png in ("timeline.png", "throughput.png", "latency.png", "ntail.png"):
        assert (faulty.out / png).stat().st_size > 1000
        assert png in html
    for table in ("workload", "throughput", "latency", "ntail", "rules", "overhead", "views",
                  *AUDIT, "gap_notices", "view_history", "view_status", "timeline"):
        assert any((faulty.out / table).glob("*.parquet")), table


def test_timeline_of_views_per_node(clean: Analysed) -> None:
    """One row of segments per daemon life: before its first view, in each primary view,
    not in a primary view after losing one (node 2, paused), and two lives of node 3."""
    ls, ids = clean.logset, clean.logset.view_ids
    t = clean.table("timeline")
    per = {(int(n), int(i)): [(k, None if pd.isna(v) else int(v)) for k, v in
                              zip(g.kind, g.view, strict=True)]
           for (n, i), g in t.sort_values("start").groupby(["node", "incarnation"])}
    assert per[(0, _inc(ls, 0, ids[0]))] == [("no view", None), *[("primary", v) for v in ids]]
    assert per[(2, _inc(ls, 2, ids[0]))] == [
        ("no view", None), ("primary", ids[0]), ("primary", ids[1]), ("primary", ids[2]),
        ("not primary", ids[2]), ("primary", ids[4])]
    assert per[(3, _inc(ls, 3, ids[0]))] == [
        ("no view", None), ("primary", ids[0]), ("primary", ids[1])]
    assert per[(3, _inc(ls, 3, ids[3]))] == [
        ("no view", None), ("primary", ids[3]), ("primary", ids[4])]
    assert (t.end >= t.start).all()
    assert "timeline.png" in (clean.out / "index.html").read_text()
    assert CLEAN_SPEC.crash == (3, 1) and CLEAN_SPEC.pause == (2, 2)


def test_lines_that_are_not_records_are_counted_and_unknown_fields_ignored(
        faulty: Analysed) -> None:
    """Junk lines are skipped and counted per reason; node 1's records carry fields the
    schema does not list and still count (the audit above finds exactly the planted
    faults, node 1's included)."""
    r = faulty.report
    assert r["figures"]["delivery records"] == faulty.logset.records()
    assert r["figures"]["ignored lines"] == sum(len(v) for v in JUNK_LINES.values())
    note = next(n for n in r["notes"] if n.startswith("Ignored lines"))
    for reason, lines in JUNK_LINES.items():
        assert f"{len(lines)} {reason}" in note
    summary = {row[0]: row[2] for row in r["tables"][1]["rows"]}  # node: messages
    assert summary[1] == int(faulty.logset.deliveries[1]["count"].sum())
