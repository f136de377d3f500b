"""``amcast bench metrics-abuse`` on a real daemon, shortened: the report's shape, and
that the attacks cost the daemon no thread and are refused and counted where the
endpoint says (the figures themselves are for docs/operations.md, not asserted here)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from bench import metrics_abuse

pytestmark = pytest.mark.processes


def test_a_short_run_reports_every_phase_and_the_daemon_keeps_its_threads(
    tmp_path: Path,
) -> None:
    args = argparse.Namespace(
        duration=1.5, half_open=64, scrapers=4, rate=100.0, size=50, nodes=1, dir=tmp_path
    )
    report = json.loads(json.dumps(metrics_abuse.run(args), default=str))  # what --json prints
    phases = {p["phase"]: p for p in report["phases"]}
    assert list(phases) == list(metrics_abuse.PHASES)
    for p in phases.values():
        assert p["latency_p50_s"] is not None and p["latency_p50_s"] > 0
        assert p["rss_peak"] >= max(p["rss_start"], p["rss_end"]) > 0
    baseline = phases["baseline"]["threads_max"]
    assert phases["half-open"]["threads_max"] == baseline  # no thread per connection
    assert phases["scrape storm"]["threads_max"] == baseline
    held = phases["half-open"]["attack"]
    assert held["opened"] == 64
    # at most max_connections (16) are served at once: the daemon closed the rest at once
    assert held["closed_by_daemon"] >= 64 - 16
    figures = report["figures"]
    assert figures["amcast_metrics_connections_refused_total{reason=max_connections}"] >= 48
    assert figures["amcast_metrics_requests_total{code=200}"] >= 1
    assert phases["scrape storm"]["attack"]["scrapes_ok"] >= 1
    table = report["tables"][0]
    assert all(len(row) == len(table["columns"]) for row in table["rows"])
