"""The cross-cluster audit (``amcast.analytics.federation``): the merged delivery orders
of a federation's daemons must have no cycle. ``find_cycle`` on small graphs, then the
Spark job on written ``global`` records: a consistent log set passes, a planted pair of
opposite orders and a planted three-cluster cycle (no two daemons disagree on any pair)
are found."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from amcast.analytics.federation import audit, find_cycle


def test_find_cycle_on_small_graphs() -> None:
    assert find_cycle([]) is None
    assert find_cycle([("a", "b"), ("b", "c"), ("a", "c")]) is None
    assert find_cycle([("a", "b"), ("b", "a")]) in (["a", "b", "a"], ["b", "a", "b"])
    cycle = find_cycle([("x", "y"), ("y", "z"), ("z", "x"), ("z", "w"), ("v", "x")])
    assert cycle is not None and cycle[0] == cycle[-1] and set(cycle) == {"x", "y", "z"}


def _write(root: Path, lives: dict[tuple[str, int], list[str]]) -> None:
    for (cluster, node), msgs in lives.items():
        d = root / cluster / f"node{node}" / "logs"
        d.mkdir(parents=True)
        lines: list[dict[str, Any]] = [
            {"schema": 1, "type": "global", "node": node, "incarnation": 5, "view": 1,
             "cluster": cluster, "index": i, "msg": m, "gts": i, "clusters": ["a", "b"]}
            for i, m in enumerate(msgs)]
        lines.insert(1, {"schema": 1, "type": "delivery", "node": node})  # not read here
        (d / "delivery.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


@pytest.mark.spark
def test_the_spark_audit_passes_one_order_and_finds_planted_cycles(
        spark: Any, tmp_path: Path) -> None:
    common = ["m1", "m2", "m3", "m4"]
    good = tmp_path / "good"
    _write(good, {("a", 0): common, ("a", 1): common[:3], ("b", 0): ["m1", "m3", "m4"]})
    v = audit(spark, str(good))
    assert v.ok and (v.records, v.daemons) == (10, 3)

    swapped = tmp_path / "swapped"
    _write(swapped, {("a", 0): common, ("b", 0): ["m1", "m3", "m2", "m4"]})
    v = audit(spark, str(swapped))
    assert not v.ok and set(v.cycle or []) == {"m2", "m3"}

    ring = tmp_path / "ring"  # a before b in x, b before c in y, c before a in z
    _write(ring, {("x", 0): ["a", "b"], ("y", 0): ["b", "c"], ("z", 0): ["c", "a"]})
    v = audit(spark, str(ring))
    assert not v.ok and set(v.cycle or []) == {"a", "b", "c"}


@pytest.mark.spark
def test_amcast_analyze_runs_the_cross_cluster_audit_on_global_records(
        spark: Any, tmp_path: Path) -> None:
    """A small log set of delivery records with a planted three-cluster cycle in its
    global records: the job's order audit fails (exit status 1) and says why; with one
    order, it passes and counts the global records apart from the ignored lines."""
    from amcast.analytics import synthetic
    from amcast.analytics.job import exit_status, run

    from tests.analytics.conftest import IDLE_SPEC

    logset = synthetic.generate(IDLE_SPEC)
    reports = {}
    for name, lives in {
        "ring": {("x", 0): ["a", "b"], ("y", 0): ["b", "c"], ("z", 0): ["c", "a"]},
        "one": {("x", 0): ["a", "b", "c"], ("y", 0): ["b", "c"], ("z", 0): ["a", "c"]},
    }.items():
        logs = tmp_path / name / "logs"
        synthetic.write(logset, logs / "local")
        _write(logs / "fed", lives)
        reports[name] = run(spark, str(logs), tmp_path / name / "out")
    ring, one = reports["ring"], reports["one"]
    assert exit_status(ring) == 1 and ring["figures"]["order audit"] == "FAIL"
    assert ring["figures"]["cross-cluster order"] == "FAIL"
    cross = ring["audit"]["cross_cluster"]
    assert cross["count"] == 1 and set(cross["cycle"]) == {"a", "b", "c"}
    assert any(n.startswith("Cross-cluster order FAILED") for n in ring["notes"])
    assert exit_status(one) == 0 and one["figures"]["cross-cluster order"] == "PASS"
    assert one["figures"]["global records (daemon lives)"] == "7 (3)"
    assert one["audit"]["cross_cluster"]["cycle"] is None
    assert any(n.startswith("Cross-cluster order PASSED") for n in one["notes"])
