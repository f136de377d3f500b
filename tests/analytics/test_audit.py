"""The order audit finds exactly the planted faults, and nothing on a clean log set."""

from __future__ import annotations

from tests.analytics.conftest import FAULTY_SPEC, Analysed


def _mid(rec: dict, i: int = 0) -> str:
    return f"{int(rec['sender'])}:{int(rec['seq'])}:{i}"


def test_clean_log_set_passes(clean: Analysed) -> None:
    for name in ("violations", "duplicates", "missing"):
        assert clean.table(name).empty, name
    assert clean.report["figures"]["order audit"] == "PASS"
    html = (clean.out / "index.html").read_text()
    assert "Order audit PASSED" in html
    assert clean.report["figures"]["delivery records"] == clean.logset.records()


def test_order_violation_first_position_messages_and_nodes(faulty: Analysed) -> None:
    node, at_p, after = faulty.planted["swap"]  # node 3 delivered `at_p` where others had `after`
    p = int(at_p["position"])
    v = faulty.table("violations")
    assert [(a, b) for a, b in zip(v.node_a, v.node_b, strict=True)] == [
        (0, node), (1, node), (2, node)]
    assert set(v.first_position) == {p}
    assert set(v.message_a) == {_mid(after)}  # what nodes 0..2 delivered at p
    assert set(v.message_b) == {_mid(at_p)}  # what node 3 delivered at p
    assert set(v.divergent_positions) == {int(at_p["count"]) + int(after["count"])}


def test_lost_messages_reported_with_node_view_and_deliverers(faulty: Analysed) -> None:
    m = faulty.table("missing")
    got = sorted(zip(m.node, m.message, m.view, m.service,
                     [tuple(x) for x in m.delivered_by], strict=True))
    want = []
    for key in ("lost_ordered", "lost_causal"):
        node, rec = faulty.planted[key]
        others = tuple(n for n in range(FAULTY_SPEC.nodes) if n != node)
        want += [(node, _mid(rec, i), int(rec["view"]), rec["service"], others)
                 for i in range(int(rec["count"]))]
    assert got == sorted(want)


def test_duplicates_reported_with_times_and_positions(faulty: Analysed) -> None:
    d = faulty.table("duplicates")
    got = sorted(zip(d.node, d.message, d.times, [tuple(x) for x in d.positions], strict=True))
    node, first, again = faulty.planted["dup_ordered"]
    want = [(node, _mid(first, i), 2,
             (int(first["position"]) + i, int(again["position"]) + i))
            for i in range(int(first["count"]))]
    cnode, crec = faulty.planted["dup_causal"]
    want += [(cnode, _mid(crec, i), 2, ()) for i in range(int(crec["count"]))]
    assert got == sorted(want)


def test_cli_reports_the_failed_audit(faulty: Analysed) -> None:
    r = faulty.report
    assert r["status"] == 1
    assert r["figures"]["order audit"] == "FAIL"
    assert r["figures"]["order violations (node pairs)"] == 3
    assert r["audit"]["violations"]["count"] == 3
    assert any("disagree on the total order from position" in n for n in r["notes"])
    node, first, again = faulty.planted["dup_ordered"]
    dup = r["audit"]["duplicates"]["first"]
    assert {"node": node, "message": f"{int(first['sender'])}:{int(first['seq'])}:0",
            "times": 2, "positions": [int(first["position"]), int(again["position"])]
            }.items() <= next(d for d in dup if d["node"] == node).items()
    html = (faulty.out / "index.html").read_text()
    assert "Order audit FAILED" in html
    for png in ("throughput.png", "latency.png", "ntail.png"):
        assert (faulty.out / png).stat().st_size > 1000
        assert png in html
    for table in ("throughput", "latency", "ntail", "rules", "overhead", "views",
                  "violations", "duplicates", "missing"):
        assert any((faulty.out / table).glob("*.parquet")), table
