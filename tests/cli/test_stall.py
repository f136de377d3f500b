"""A stalled cluster, tried as a user would: one daemon of two is frozen (SIGSTOP), the
other's send window fills and it stops reading its clients.

With membership the survivor would give up on the frozen daemon after
``suspect_timeout`` (and, alone, lose its quorum): these tests raise the timeout to a
minute, so they see the stall a daemon goes through while it waits for a silent member
(tests/membership and tests/e2e cover what happens after the timeout)."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from amcast.localcluster import LocalCluster
from tests.cli.helpers import AMCAST, amcast, env


@pytest.fixture
def stalled(short_dir: Path) -> Iterator[LocalCluster]:
    cluster = LocalCluster(2, short_dir / "c", metrics=False,
                           protocol={"insecure": True, "window_size": 4,
                                     "suspect_timeout": 60.0},
                           extra={"shutdown": {"grace_s": 1.0}})
    cluster.start()
    frozen = cluster.nodes[1].pid
    assert frozen is not None
    os.kill(frozen, signal.SIGSTOP)
    try:
        yield cluster
    finally:
        os.kill(frozen, signal.SIGCONT)
        cluster.stop()


def test_send_into_a_stalled_cluster_exits_3_with_one_line(stalled: LocalCluster) -> None:
    lines = "".join(f"message {k} {'x' * 1000}\n" for k in range(20_000))
    r = amcast("send", "-s", stalled.sockets[0], "-g", "g", "--timeout", "2", stdin=lines,
               timeout=120)
    line = r.one_error_line()
    assert r.code == 3 and "stalled" in line and "sent" not in r.out
    r = amcast("send", "-s", stalled.sockets[0], "-g", "g", "--wait", "--timeout", "2",
               "one more", timeout=120)
    assert r.code == 3 and "stalled" in r.one_error_line()


def test_status_health_reports_the_stall(short_dir: Path) -> None:
    """Needs the daemon's ``health`` field and ``[health] stall_after_s`` (the daemon
    branch of protocol contract e)."""
    cluster = LocalCluster(2, short_dir / "h", metrics=False,
                           protocol={"insecure": True, "window_size": 4,
                                     "suspect_timeout": 60.0},
                           extra={"health": {"stall_after_s": 1.0}})
    cluster.start()
    frozen = cluster.nodes[1].pid
    assert frozen is not None
    os.kill(frozen, signal.SIGSTOP)
    try:
        lines = "".join(f"message {k} {'x' * 1000}\n" for k in range(20_000))
        assert amcast("send", "-s", cluster.sockets[0], "-g", "g", "--timeout", "2",
                      stdin=lines, timeout=120).code == 3  # stalled for 2 s > 1 s
        r = amcast("status", "-s", cluster.sockets[0], "--health", "--timeout", "2")
        assert r.code == 1 and r.one_error_line().startswith("unhealthy: node 0: ")
    finally:
        os.kill(frozen, signal.SIGCONT)
        cluster.stop()


def test_a_listener_is_not_hurt_by_the_stall(stalled: LocalCluster) -> None:
    p = subprocess.Popen([*AMCAST, "listen", "-s", stalled.sockets[0], "-g", "g",
                          "--timeout", "1"], env=env(), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    out, err = p.communicate(timeout=60)
    assert (p.returncode, out, err) == (0, "", "")  # idle timeout: a normal end
