"""``deploy/prometheus`` and ``deploy/grafana`` checked with promtool, and against the
metrics a live amcastd really exports (so a renamed metric breaks this test, not an
operator's alert at 3 a.m.)."""

from __future__ import annotations

import json
import re
import subprocess
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from amcast.client import BlockingClient
from amcast.localcluster import LocalCluster
from tests.deploy.conftest import REPO, require_tool
from tests.steady import STEADY

PROM = REPO / "deploy" / "prometheus"
DASHBOARD = REPO / "deploy" / "grafana" / "amcast-dashboard.json"
METRIC = re.compile(r"\bamcast_[a-z_]+")


def _promtool(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    tool = require_tool("promtool", "Debian package prometheus")
    return subprocess.run([tool, *args], capture_output=True, text=True, input=stdin,
                          timeout=60, cwd=PROM)


def test_scrape_config_and_rules_are_valid() -> None:
    for args in (("check", "config", "prometheus.yml"), ("check", "rules", "alerts.yml")):
        result = _promtool(*args)
        assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 14 rules found" in _promtool("check", "rules", "alerts.yml").stdout


def test_dashboard_queries_are_valid_promql(tmp_path: Path) -> None:
    """Each panel's query parses (promtool checks it as a recording rule), and the
    dashboard has panels for the membership metrics (issue 12)."""
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query_{i}", "expr": e} for i, e in enumerate(exprs)
    ]}]}
    path = tmp_path / "dashboard_rules.yml"
    path.write_text(json.dumps(rules))  # JSON is YAML
    result = _promtool("check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in result.stdout
    used = {m for e in exprs for m in METRIC.findall(e)}
    assert used >= MEMBERSHIP_PANELS, sorted(MEMBERSHIP_PANELS - used)
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))


MEMBERSHIP_PANELS = {
    "amcast_view_id", "amcast_view_members", "amcast_primary", "amcast_listed_members",
    "amcast_quorum_needed", "amcast_quorum_reachable", "amcast_peer_last_heard_seconds",
    "amcast_member_suspicions_total", "amcast_member_exclusions_total",
    "amcast_quorum_lost_total", "amcast_views_installed_total",
    "amcast_flush_duration_seconds_bucket", "amcast_messages_in_doubt_total",
}
"""Metrics of issue 12 the dashboard must chart."""


def test_alert_unit_tests_pass() -> None:
    result = _promtool("test", "rules", "tests/alerts_test.yml")
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_wrong_alert_expectation_fails(tmp_path: Path) -> None:
    """The alert tests can fail: flip one expectation and promtool must say so."""
    text = (PROM / "tests" / "alerts_test.yml").read_text()
    broken = text.replace("eval_time: 2m\n        alertname: AmcastNodeDown",
                          "eval_time: 5m\n        alertname: AmcastNodeDown", 1)
    assert broken != text
    path = tmp_path / "broken_test.yml"
    path.write_text(broken.replace("../alerts.yml", str(PROM / "alerts.yml")))
    assert _promtool("test", "rules", str(path)).returncode != 0


@pytest.fixture(scope="module")
def scrape(tmp_path_factory: pytest.TempPathFactory) -> str:
    cluster = LocalCluster(2, tmp_path_factory.mktemp("prom"),
                           protocol={"insecure": True, **STEADY})
    cluster.start()
    try:
        with BlockingClient(cluster.sockets[0]) as client:
            client.join("g")
            client.send(b"hello", "g")
            assert next(client.deliveries(timeout=10)).payload == b"hello"
        port = cluster.nodes[0].metrics_port
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            return r.read().decode()
    finally:
        cluster.stop()


def test_live_metrics_pass_promtool_check_metrics(scrape: str) -> None:
    result = _promtool("check", "metrics", stdin=scrape)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_metric_in_alerts_and_dashboard_is_exported(scrape: str) -> None:
    exported = set()
    for line in scrape.splitlines():
        if line.startswith("# TYPE "):
            exported.add(line.split()[2])
        elif line and not line.startswith("#"):
            exported.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    referenced = set(METRIC.findall((PROM / "alerts.yml").read_text()))
    referenced |= {m for e in exprs for m in METRIC.findall(e)}
    assert len(referenced) >= 25
    assert sorted(referenced - exported) == []


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(text) for s in fam.samples
    }


def test_membership_metrics_in_a_live_scrape(scrape: str) -> None:
    """Node 0 of a 2-daemon cluster in its primary view of both: every membership metric
    is there, with its label values, counters at their starting values."""
    got = _samples(scrape)

    def value(name: str, **labels: str) -> float:
        return got[(name, tuple(sorted(labels.items())))]

    assert value("amcast_primary") == 1
    assert value("amcast_view_members") == 2 and value("amcast_listed_members") == 2
    assert value("amcast_quorum_needed") == 2 and value("amcast_quorum_reachable") == 2
    assert value("amcast_view_id") > 0 and value("amcast_views_installed_total") >= 1
    assert value("amcast_peer_in_view", peer="1") == 1
    assert value("amcast_peer_alive", peer="1") == 1
    assert 0 <= value("amcast_peer_last_heard_seconds", peer="1") < 5
    assert value("amcast_member_suspicions_total", peer="1") == 0
    for cause in ("excluded", "left"):
        assert value("amcast_member_exclusions_total", cause=cause) == 0
    for reason in ("no_quorum", "excluded", "paused", "left"):
        assert value("amcast_quorum_lost_total", reason=reason) == 0
    for outcome in ("undelivered", "delivered_here"):
        assert value("amcast_messages_in_doubt_total", outcome=outcome) == 0
    assert value("amcast_flush_duration_seconds_bucket", le="+Inf") == value(
        "amcast_flush_duration_seconds_count") == value("amcast_flushes_total")
    assert not any(name.startswith("amcast_engine_view_id") for name, _ in got)
