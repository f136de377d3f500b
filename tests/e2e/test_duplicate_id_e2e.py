"""A second daemon started with a live member's id while the group has no quorum, with
real daemons.

Four amcastd on loopback multicast; node 0 is killed (SIGKILL) and node 2 paused
(SIGSTOP), so nodes 1 and 3 hold a view that lost its quorum. A fifth daemon is then
started with node 1's id (its own socket, state and logs). Node 1 refuses it although
its own view is not primary, and node 3 takes node 1's word for it: when node 2 comes
back, the view of nodes 1, 2 and 3 forms with the real node 1, and the other daemon
stays refused. (Before, only a member of a primary view refused such a daemon: node 3
took it for node 1's restart, the next view was formed with it, and the real node 1 was
refused as its duplicate for good.)
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from amcast.client import BlockingClient
from amcast.client.errors import ClientError
from amcast.localcluster import LocalCluster, render_toml, write_private

pytestmark = [pytest.mark.processes, pytest.mark.slow]
WAIT = 45.0  # bound on each wait: a few seconds, a loaded CI machine more


@pytest.fixture
def cluster() -> Iterator[LocalCluster]:
    directory = Path(tempfile.mkdtemp(prefix="amdup-", dir="/tmp"))
    c = LocalCluster(4, directory, metrics=False, log_level="info")
    try:
        c.start(90)
        yield c
    finally:
        for n in c.nodes:  # a paused daemon cannot stop
            if n.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(n.pid, signal.SIGCONT)
        c.stop(20)
        shutil.rmtree(directory, ignore_errors=True)


def status(socket_path: str) -> dict[str, Any] | None:
    try:
        with BlockingClient(socket_path) as client:
            return client.status(timeout=5)
    except (OSError, ClientError):  # not serving yet, or stopped
        return None


def until(done: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def known_incarnation(st: dict[str, Any] | None, node: int) -> int | None:
    if st is None:
        return None
    return next((p["incarnation"] for p in st["peers"] if p["node"] == node), None)


def impostor_config(c: LocalCluster, node: int) -> Path:
    """``node``'s configuration with a socket, state and logs of its own."""
    tables = tomllib.loads(c.nodes[node].config.read_text())
    home = c.directory / "impostor"
    home.mkdir(mode=0o700)
    tables["node"]["state_dir"] = str(home / "state")
    tables["api"]["socket"] = str(c.directory / "impostor.sock")
    tables["logs"]["dir"] = str(home / "logs")
    path = home / "amcastd.toml"
    write_private(path, render_toml(tables))
    return path


def test_a_member_without_quorum_keeps_its_id_against_a_second_daemon(
        cluster: LocalCluster) -> None:
    c = cluster
    sockets = c.sockets
    real = known_incarnation(status(sockets[3]), 1)
    assert real is not None
    c.kill(0)
    c.pause(2)

    def without_quorum(i: int) -> bool:
        st = status(sockets[i])
        return st is not None and not st["view"]["primary"]

    until(lambda: without_quorum(1) and without_quorum(3), "nodes 1 and 3 to lose quorum")
    path = impostor_config(c, 1)
    impostor = subprocess.Popen([sys.executable, "-m", "amcast.daemon", "--config", str(path)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def refused() -> bool:
            st = status(str(c.directory / "impostor.sock"))
            problems = st["health"]["problems"] if st is not None else []
            return any(p.startswith("the group refused this daemon's join: duplicate_node_id")
                       for p in problems)

        until(refused, "the second daemon to be refused")
        c.resume(2)

        def formed() -> bool:
            states = [status(sockets[i]) for i in (1, 2, 3)]
            return all(st is not None and st["view"]["primary"]
                       and st["view"]["members"] == [1, 2, 3] for st in states)

        until(formed, "the view of nodes 1, 2 and 3")
        for i in (2, 3):
            assert known_incarnation(status(sockets[i]), 1) == real
        st = status(str(c.directory / "impostor.sock"))
        assert st is not None and not st["view"]["primary"]
        warnings = status(sockets[1])["health"]["warnings"]  # type: ignore[index]
        assert warnings and warnings[0].startswith("another daemon claims this node's id 1")
    finally:
        impostor.send_signal(signal.SIGTERM)
        try:
            impostor.wait(20)
        except subprocess.TimeoutExpired:
            impostor.kill()
            impostor.wait(5)
