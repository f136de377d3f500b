"""End-to-end: real amcastd processes ordering with a swap ordering (``protocol.ordering``
arrow; docs/swap.md), and a daemon configured with another ordering refused."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from amcast.demo import run_cluster_workload
from amcast.localcluster import LocalCluster
from tests.steady import STEADY

pytestmark = pytest.mark.processes


@pytest.fixture
def short_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="amcs-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def status(sock: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "amcast", "status", "-s", sock, "--json",
                          "--interval", "0"], capture_output=True, text=True, timeout=30)
    return json.loads(out.stdout)


async def test_three_daemons_with_the_arrow_deliver_one_order(short_dir: Path) -> None:
    result = await run_cluster_workload(
        short_dir, nodes=3, per_node=400, services=("causal", "agreed", "safe"),
        protocol={"insecure": True, **STEADY, "ordering": "arrow"}, timeout=150,
    )
    assert result.problems == []  # same total order, same causal set, nothing lost
    assert {r.digest for r in result.reports} == {result.reports[0].digest}
    assert all(r.delivered == 1200 for r in result.reports)
    assert result.exit_codes == {0: 0, 1: 0, 2: 0}


def test_a_daemon_with_another_ordering_is_refused_with_the_reason(short_dir: Path) -> None:
    cluster = LocalCluster(3, short_dir, protocol={"insecure": True, **STEADY,
                                                   "ordering": "arrow"}, metrics=False)
    cluster.write_configs()
    odd = cluster.nodes[2].config
    odd.write_text(odd.read_text().replace('ordering = "arrow"', 'ordering = "combining"'))
    cluster.start(wait_view=False)
    try:
        deadline = time.monotonic() + 60
        problems: list[str] = []
        while time.monotonic() < deadline:
            problems = status(cluster.sockets[2])["health"]["problems"]
            if problems and "refused this daemon's join" in problems[0]:
                break
            time.sleep(0.3)
        assert problems and problems[0].startswith(
            "the group refused this daemon's join: config_mismatch: ordering: "), problems
        assert ("'arrow:balanced/2' (coordinator), 'combining:balanced/2' (refused daemon)"
                in problems[0]), problems
        # the two agreeing daemons install their view of two (the refusal may come first)
        deadline = time.monotonic() + 60
        while True:
            both = [status(s) for s in cluster.sockets[:2]]
            if all(s["view"]["members"] == [0, 1] and s["view"]["primary"] for s in both):
                break
            assert time.monotonic() < deadline, both
            time.sleep(0.3)
        assert all(s["variant"] == "arrow" for s in both)  # `amcast status` names it
    finally:
        cluster.stop()
