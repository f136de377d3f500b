"""``examples/kvstore.py`` against a real local cluster: three replicas (one per daemon)
pass the start-up barrier, write concurrently, and every replica ends with the same
contents, at the same place of the total order, when one replica's process is killed
mid-run and started again (it catches up by state transfer), and when one replica's
daemon is paused past the suspicion timeout (it rejoins with an order gap, and the
replica catches up by state transfer again)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

import pytest

from amcast.localcluster import LocalCluster

pytestmark = pytest.mark.processes

ROOT = Path(__file__).resolve().parents[2]
KVSTORE = ROOT / "examples" / "kvstore.py"
WRITES = 300


def _start(sock: str, name: str, out: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMCAST_")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.Popen(
        [sys.executable, str(KVSTORE), "-s", sock, "--name", name, "--replicas", "3",
         "--writes", str(WRITES), "--interval", "0.01", "--deadline", "45",
         "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def _wait_line(stream: IO[str], want: str, deadline: float) -> list[str]:
    """Lines of ``stream`` up to the first that starts with ``want`` (bounded)."""
    seen = []
    while time.monotonic() < deadline:
        line = stream.readline()
        if not line:
            break
        seen.append(line.rstrip("\n"))
        if line.startswith(want):
            return seen
    raise AssertionError(f"no {want!r} line in time: {seen}")


def _check(outs: list[Path], *, last_writes: bool = True) -> list[dict[str, Any]]:
    """Every replica's final contents are the same, and hold every replica's writes
    (``last_writes``: each replica's own keys hold its last value; not when writes were
    sent again after later ones)."""
    final = [json.loads(o.read_text()) for o in outs]
    contents = [{k: f[k] for k in ("data", "done", "chain")} for f in final]
    assert contents[0] == contents[1] == contents[2]
    data = contents[0]["data"]
    assert contents[0]["done"] == ["r0", "r1", "r2"]
    for name in ("r0", "r1", "r2"):  # every replica's own keys hold its last write
        assert {k for k in data if k.startswith(f"{name}/")} == {f"{name}/{i}"
                                                                 for i in range(20)}
        if last_writes:
            assert data[f"{name}/{(WRITES - 1) % 20}"] == str(WRITES - 1)
    assert {k for k in data if k.startswith("shared/")} == {f"shared/{i}" for i in range(10)}
    return final


def _finish(procs: list[subprocess.Popen[str]], deadline: float) -> None:
    for p in procs:
        stdout, _ = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
        assert p.returncode == 0, stdout


def _kill_all(procs: list[subprocess.Popen[str]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
            p.wait(5)


def test_replicas_converge_across_a_killed_and_restarted_replica(short_dir: Path) -> None:
    cluster = LocalCluster(3, short_dir / "c", protocol={"insecure": True}, metrics=False)
    cluster.start()
    procs: list[subprocess.Popen[str]] = []
    try:
        outs = [short_dir / f"r{i}.json" for i in range(3)]
        procs = [_start(cluster.sockets[i], f"r{i}", outs[i]) for i in range(3)]
        deadline = time.monotonic() + 45
        victim = procs[2]
        assert victim.stdout is not None
        first = _wait_line(victim.stdout, "applied 150", deadline)
        assert "barrier 3" in first
        victim.kill()  # mid-run: its writes are not done
        victim.wait(10)
        rest = victim.stdout.read()
        assert "wrote" not in rest and not outs[2].exists()
        procs[2] = _start(cluster.sockets[2], "r2", outs[2])
        _finish(procs, deadline)
        restarted = _check(outs)[2]
        assert restarted["stats"]["restored"] == 1, restarted["stats"]
    finally:
        _kill_all(procs)
        cluster.stop()


def test_a_replica_catches_up_after_its_daemon_missed_part_of_the_order(
    short_dir: Path,
) -> None:
    cluster = LocalCluster(3, short_dir / "c", protocol={"insecure": True}, metrics=False)
    cluster.start()
    procs: list[subprocess.Popen[str]] = []
    try:
        outs = [short_dir / f"r{i}.json" for i in range(3)]
        procs = [_start(cluster.sockets[i], f"r{i}", outs[i]) for i in range(3)]
        deadline = time.monotonic() + 50
        paused = procs[1]
        assert paused.stdout is not None
        _wait_line(paused.stdout, "applied 150", deadline)
        cluster.pause(1)  # past the suspicion timeout: the others go on without it
        time.sleep(2.5)
        cluster.resume(1)
        _finish(procs, deadline)
        final = _check(outs, last_writes=False)
        assert final[1]["stats"]["gaps"] >= 1, final[1]["stats"]
        assert final[1]["stats"]["restored"] >= 1, final[1]["stats"]
    finally:
        _kill_all(procs)
        cluster.resume(1)
        cluster.stop()
