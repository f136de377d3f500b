"""The CLI with real ``amcastd`` processes: streaming ``send``, ``cluster start`` refusals."""

from __future__ import annotations

import json
import select
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from amcast.client import BlockingClient, DeliveredBatch
from amcast.localcluster import LocalCluster
from tests.cli.helpers import AMCAST, amcast, env


@pytest.fixture
def one_node(short_dir: Path) -> Iterator[LocalCluster]:
    cluster = LocalCluster(1, short_dir / "c", protocol={"insecure": True}, metrics=False)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def readline(stream: IO[str], timeout: float = 20) -> str:
    r, _, _ = select.select([stream], [], [], timeout)
    assert r, f"no output within {timeout} s"
    return stream.readline()


def payloads(listener: BlockingClient) -> list[bytes]:
    item = listener.next_event(20)
    assert isinstance(item, DeliveredBatch)
    return [d.payload for d in item]


def test_send_sends_each_stdin_line_as_it_is_read(one_node: LocalCluster) -> None:
    sock = one_node.sockets[0]
    with BlockingClient(sock) as listener:
        listener.join("g")
        p = subprocess.Popen([*AMCAST, "send", "-s", sock, "-g", "g"], env=env(),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        try:
            assert p.stdin is not None
            p.stdin.write("first\n")
            p.stdin.flush()
            assert payloads(listener) == [b"first"]  # delivered while stdin is still open
            p.stdin.write("second\nthird\n")
            p.stdin.flush()
            got = payloads(listener)
            if got == [b"second"]:  # two reads, two frames: fine too
                got += payloads(listener)
            assert got == [b"second", b"third"]
            out, err = p.communicate("fourth", timeout=30)  # no final newline: a message
        finally:
            p.kill()
        assert (p.returncode, out, err) == (0, "sent 4 message(s) via node 0\n", "")
        assert payloads(listener) == [b"fourth"]


def test_send_wait_prints_each_delivery_as_it_comes(one_node: LocalCluster) -> None:
    sock = one_node.sockets[0]
    p = subprocess.Popen([*AMCAST, "send", "-s", sock, "-g", "g", "--wait"], env=env(),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        assert p.stdin is not None and p.stdout is not None
        p.stdin.write("a\n")
        p.stdin.flush()
        assert readline(p.stdout).split("\t")[::3] == ["0", "a\n"]
        p.stdin.write("b\n")
        p.stdin.flush()
        assert readline(p.stdout).split("\t")[::3] == ["1", "b\n"]
        p.stdin.close()
        assert p.wait(30) == 0
    finally:
        p.kill()


def test_cluster_start_refuses_a_running_cluster(short_dir: Path) -> None:
    d = str(short_dir / "cl")
    r = amcast("cluster", "start", "-n", "1", "--dir", d, "--protocol", "insecure=true")
    assert r.code == 0, r.err
    record = json.loads((Path(d) / "cluster.json").read_text())
    try:
        r = amcast("cluster", "start", "-n", "1", "--dir", d)
        line = r.one_error_line()
        assert r.code == 1 and "already running" in line and "amcast cluster stop" in line
        assert json.loads((Path(d) / "cluster.json").read_text()) == record
        assert LocalCluster.load(Path(d)).alive() == [record["nodes"][0]["pid"]]
        assert amcast("status", "-s", record["nodes"][0]["socket"], "--health").code == 0
    finally:
        r = amcast("cluster", "stop", "--dir", d)
    assert (r.code, r.out) == (0, "stopped 1 daemons\n")
    r = amcast("cluster", "stop", "--dir", d)
    assert r.code == 0 and "already stopped" in r.out
    r = amcast("cluster", "start", "-n", "1", "--dir", d, "--protocol", "insecure=true")
    assert r.code == 0, r.err  # a stopped cluster's directory can be reused
    assert amcast("cluster", "stop", "--dir", d).code == 0
