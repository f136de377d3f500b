"""The CLI against a real ``amcastd`` with ``[access]`` rules: ``status`` shows who each
client is; a forbidden ``listen`` or ``send`` fails with one line and exit status 1."""

from __future__ import annotations

import os
import pwd
from collections.abc import Iterator
from pathlib import Path

import pytest

from amcast.client import BlockingClient
from amcast.localcluster import LocalCluster
from tests.cli.helpers import amcast

ME = pwd.getpwuid(os.getuid()).pw_name


@pytest.fixture
def guarded(short_dir: Path) -> Iterator[LocalCluster]:
    rules = [
        {"groups": "open", "join": ["*"], "send": [f"user:{ME}"]},
        {"groups": "closed*", "join": [f"uid:{os.getuid() + 1}"], "send": []},
    ]
    cluster = LocalCluster(
        1,
        short_dir / "c",
        protocol={"insecure": True},
        metrics=False,
        extra={"access": {"rules": rules}},
    )
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def test_status_lists_each_clients_identity(guarded: LocalCluster) -> None:
    with BlockingClient(guarded.sockets[0], name="watcher") as c:
        c.join("open")
        r = amcast("status", "-s", guarded.sockets[0], "--interval", "0")
        assert r.code == 0, r.err
    line = next(ln for ln in r.out.splitlines() if "watcher" in ln)
    assert f"{ME} ({os.getuid()})" in line and "open" in line
    assert "user (uid)" in r.out and "pid" in r.out


def test_forbidden_listen_and_send_exit_1_with_one_line(guarded: LocalCluster) -> None:
    sock = guarded.sockets[0]
    r = amcast("listen", "-s", sock, "-g", "closed.x", timeout=30)
    assert r.code == 1, (r.code, r.err)
    assert "forbidden" in r.one_error_line() and "closed.x" in r.err
    r = amcast("send", "-s", sock, "-g", "closed", "hello", timeout=30)
    assert r.code == 1, (r.code, r.err)
    assert "forbidden" in r.err and "Traceback" not in r.err
    r = amcast("send", "-s", sock, "-g", "open", "hello", timeout=30)
    assert r.code == 0, r.err
