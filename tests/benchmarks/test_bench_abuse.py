"""``amcast bench abuse``: the pure helpers, and one small real run (a daemon, a few
abusers per phase, short timeouts) whose figures must show each abuse handled."""

from __future__ import annotations

import argparse
import json

import pytest

from bench import abuse


def test_deltas_keep_what_grew_and_describe_prints_them() -> None:
    before = {"slow_reader": 2, "hello_timeout": 1}
    after = {"slow_reader": 5, "hello_timeout": 1, "frame_timeout": 3}
    assert abuse.deltas(before, after) == {"frame_timeout": 3, "slow_reader": 3}
    assert abuse.describe_counts({"frame_timeout": 3, "slow_reader": 3}) == (
        "frame_timeout 3, slow_reader 3"
    )
    assert abuse.describe_counts({}) == "-"
    assert abuse.ratio(3.0, 2.0) == 1.5
    assert abuse.ratio(3.0, 0.0) is None and abuse.ratio(None, 1.0) is None


def test_phase_figures_from_loadgen_reports() -> None:
    r = abuse.PhaseResult(
        "x",
        "y",
        paced={"latency_p50_s": 0.001, "latency_p99_s": 0.004, "delivered": 8000, "duration": 4.0},
        saturated={"sent": 900_000, "send_seconds": 3.0},
    )
    base = abuse.PhaseResult(
        "baseline",
        "none",
        paced={"latency_p50_s": 0.0005, "latency_p99_s": 0.001},
        saturated={"sent": 600_000, "send_seconds": 2.0},
    )
    assert abuse.honest_row(r, base) == ["x", 2000.0, 1.0, 4.0, 2.0, 4.0, 300_000.0, 1.0]
    failed = abuse.PhaseResult("z", "y", paced={"error": "boom"})
    assert abuse.honest_row(failed, base)[1:4] == [None, None, None]


@pytest.fixture(scope="module")
def report() -> dict:
    args = argparse.Namespace(
        nodes=1,
        connections=30,
        readers=3,
        flooders=1,
        stallers=6,
        duration=1.0,
        rate=500.0,
        size=100,
        timeout=1.0,
        queue_high=65536,
        phases=",".join(abuse.PHASES),
        dir=None,
    )
    return json.loads(json.dumps(abuse.run(args), default=str))  # what --json prints


def test_every_abuse_is_handled_and_the_honest_client_is_served(report: dict) -> None:
    phases = {p["name"]: p for p in report["phases"]}
    assert list(phases) == list(abuse.PHASES)
    for p in phases.values():
        assert p["failures"] == [], p
        assert p["paced"]["sent"] > 0 and p["paced"]["delivered"] > 0
        assert p["saturated"]["sent"] > 0 and p["saturated"]["delivered"] > 0
        assert p["rss_peak"] >= max(p["rss_before"], p["rss_after"]) > 0
    assert phases["connections"]["opened"] == 30
    assert phases["connections"]["disconnected"] == {}  # greeted idle clients are kept
    assert phases["never-read"]["disconnected"] == {"slow_reader": 3}
    assert phases["unread-answers"]["disconnected"] == {"slow_reader": 3}
    assert phases["oversized"]["errors"].get("frame_too_large", 0) >= 1
    # a flooder that does not read its frame_too_large answers is cut off as a slow
    # reader; one starved of CPU (2 shared cores) for the 1 s frame_timeout_s, for that
    assert set(phases["oversized"]["disconnected"]) <= {"slow_reader", "frame_timeout"}
    assert phases["half-written"]["disconnected"] == {"frame_timeout": 6}
    assert phases["half-closed"]["disconnected"] == {}  # they left; nothing to cut off
    for table in report["tables"]:
        assert len(table["rows"]) == len(abuse.PHASES)
        assert all(len(row) == len(table["columns"]) for row in table["rows"])
