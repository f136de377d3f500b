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

from amcast.client import BlockingClient
from amcast.localcluster import LocalCluster
from tests.deploy.conftest import REPO, require_tool

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
    assert "SUCCESS: 5 rules found" in _promtool("check", "rules", "alerts.yml").stdout


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
    cluster = LocalCluster(2, tmp_path_factory.mktemp("prom"), protocol={"insecure": True})
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
    assert len(referenced) >= 15
    assert sorted(referenced - exported) == []
