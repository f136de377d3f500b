"""``amcast status --health``: the container HEALTHCHECK's probe."""

from __future__ import annotations

from pathlib import Path

import pytest

from amcast.cli import main
from amcast.localcluster import LocalCluster


def test_health_is_0_for_a_serving_daemon_and_1_without_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = LocalCluster(1, tmp_path / "c", protocol={"insecure": True}, metrics=False)
    cluster.start()
    try:
        assert main(["status", "--socket", cluster.sockets[0], "--health"]) == 0
        assert capsys.readouterr().out.startswith("healthy: node 0 view 0")
    finally:
        cluster.stop()
    assert main(["status", "--socket", cluster.sockets[0], "--health"]) == 1
    assert "unhealthy" in capsys.readouterr().err
