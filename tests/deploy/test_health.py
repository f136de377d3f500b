"""``amcast status --health``: the container HEALTHCHECK's probe."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from amcast.cli import main
from amcast.localcluster import LocalCluster
from tests.steady import STEADY


def test_health_is_0_for_a_serving_daemon_and_2_without_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = LocalCluster(1, tmp_path / "c", protocol={"insecure": True, **STEADY}, metrics=False)
    cluster.start()
    try:
        assert main(["status", "--socket", cluster.sockets[0], "--health"]) == 0
        # a primary view of node 0 (view ids start above the wall clock in ms)
        assert re.match(r"healthy: node 0 view [1-9][0-9]* members \[0\]",
                        capsys.readouterr().out)
    finally:
        cluster.stop()
    assert main(["status", "--socket", cluster.sockets[0], "--health"]) == 2
    assert "unreachable" in capsys.readouterr().err
