"""Records a node's disk refused: the daemon's writer leaves a ``lost`` record, and the
audit lists the span and leaves those views of that node out of the checks a missing
record would fail. The same files without the ``lost`` records fail the audit: the
exemption comes from the record, not from a weaker check.

Node 1 loses a span across a view change, its view record among the lost; node 0 a span
inside a view it completes (so only the ``missing`` check would catch it)."""

from __future__ import annotations

import pytest

from tests.analytics.conftest import DiskFull

pytestmark = pytest.mark.spark

AUDIT = ("violations", "positions", "duplicates", "missing", "outside_primary", "gaps",
         "view_conflicts")
LOSSES = "log spans lost to a refusing disk (views not audited for completeness)"


def _refused(disk_full: DiskFull, node: int) -> int:
    """Delivery records of ``node`` inside its span: the ones its disk refused."""
    d = disk_full.analysed.logset.deliveries[node]
    (lo, hi), = [(lo, hi) for n, lo, hi in disk_full.spans if n == node]
    return int(((d["ts"] >= lo) & (d["ts"] <= hi)).sum())


def test_the_spans_are_listed_and_the_audit_passes(disk_full: DiskFull) -> None:
    a = disk_full.analysed
    ids = a.logset.view_ids
    for name in AUDIT:
        assert a.table(name).empty, name
    assert a.report["figures"]["order audit"] == "PASS"
    refused = {n: _refused(disk_full, n) for n, _, _ in disk_full.spans}
    assert refused[1] >= 40 and refused[0] >= 40
    assert a.report["figures"]["delivery records"] == a.logset.records() - sum(refused.values())
    assert a.report["figures"][LOSSES] == 2
    rows = {r["node"]: r for r in a.table("log_losses").to_dict("records")}
    expected_views = {1: [ids[1], ids[2]], 0: [ids[3]]}
    for node, lo, hi in disk_full.spans:
        r = rows[node]
        assert r["since"] <= lo and r["until"] >= hi, node
        assert list(r["views"]) == expected_views[node]
        assert r["refused"] >= 1
    status = a.table("view_status")
    lost = status[status["log_lost"]]
    assert sorted(zip(lost["node"], lost["view"], strict=True)) == sorted(
        (n, v) for n, views in expected_views.items() for v in views)
    page = (a.out / "index.html").read_text()
    for node in (0, 1):
        assert any(f"Node {node} (incarnation" in n and "may be missing" in n
                   for n in a.report["notes"])
        assert f"Node {node} (incarnation" in page


def test_the_same_files_without_the_lost_records_fail_the_audit(disk_full: DiskFull) -> None:
    c = disk_full.control
    ids = c.logset.view_ids
    assert c.report["figures"]["order audit"] == "FAIL"
    assert c.report["figures"][LOSSES] == 0
    missing = c.table("missing")  # node 0 completed view 3 without the refused messages
    assert set(zip(missing["node"], missing["view"], strict=True)) == {(0, ids[3])}
    assert len(missing) >= 40
    outside = c.table("outside_primary")  # node 1's record of installing view 2 is gone
    assert list(zip(outside["node"], outside["view"], outside["reason"], strict=True)) == [
        (1, ids[2], "it never installed the view")]
    positions = c.table("positions")  # and its positions there start after a hole
    assert set(zip(positions["node"], positions["view"], strict=True)) <= {
        (1, ids[2]), (0, ids[3])}
    assert c.table("violations").empty and c.table("duplicates").empty
