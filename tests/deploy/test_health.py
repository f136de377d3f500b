"""``amcast status --health``: the container HEALTHCHECK's probe."""

from __future__ import annotations

import json
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


def test_status_and_health_follow_the_view_through_a_loss_of_quorum(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """3 daemons (default failure detection): status names the primary view, members,
    quorum and peers; after kill -9 of two, the survivor is in no primary view, its
    status text says so with the cause, and ``--health`` exits 1."""
    from amcast.client import BlockingClient, ViewChange

    cluster = LocalCluster(3, tmp_path / "c", protocol={"insecure": True}, metrics=False)
    cluster.start()
    try:
        sock = cluster.sockets[0]
        assert main(["status", "--socket", sock, "--json", "--interval", "0"]) == 0
        st = json.loads(capsys.readouterr().out)
        assert st["view"]["primary"] is True and st["view"]["members"] == [0, 1, 2]
        assert isinstance(st["view"]["id"], int) and st["quorum"]["needed"] == 2
        heard = {p["node"]: p["last_heard_s"] for p in st["peers"]}
        assert set(heard) == {1, 2} and all(0 <= s < 5 for s in heard.values())
        with BlockingClient(sock, name="watcher", timeout=10) as watcher:
            cluster.kill(1)
            cluster.kill(2)
            while True:  # view frames until the survivor stands alone (bounded: 10 s each)
                ev = watcher.next_event(10)
                if isinstance(ev, ViewChange) and list(ev.members) == [0]:
                    break
        assert main(["status", "--socket", sock, "--health"]) == 1
        assert "not in a primary view" in capsys.readouterr().err
        assert main(["status", "--socket", sock, "--interval", "0"]) == 0
        text = capsys.readouterr().out
        assert "NOT PRIMARY" in text and "lost primary view" in text, text
        assert "SUSPECTED" in text, text
    finally:
        cluster.stop()
