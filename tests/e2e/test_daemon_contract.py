"""Real amcastd processes: message sizes, backpressure, health, the socket, ``--check``.

Clients here write raw frames (``Raw``), one message per frame where it matters, so the
client library's batching cannot hide what the daemon does.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from amcast import keygen
from amcast.localcluster import LocalCluster, free_port, render_toml
from tests.daemon.daemon_helpers import Raw
from tests.steady import STEADY

pytestmark = pytest.mark.processes
MiB = 1 << 20


@pytest.fixture
def short_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    import shutil
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="amcc-", dir="/tmp"))  # short: unix socket paths
    yield path
    shutil.rmtree(path, ignore_errors=True)


async def listener(path: str, group: str = "g") -> Raw:
    raw = await Raw.open(path)
    raw.send({"t": "join", "groups": [group]})
    await raw.until("groups")
    return raw


async def collect(raw: Raw, n: int, timeout: float = 60) -> list[bytes]:
    """The payloads of the next ``n`` delivered messages (fails on an error frame)."""
    got: list[bytes] = []
    while len(got) < n:
        frame = await raw.next(timeout)
        assert frame["t"] in ("deliver", "view"), frame
        if frame["t"] == "deliver":
            got += [p for b in frame["batches"] for p in b[3]]
    return got


def start(cluster: LocalCluster) -> Any:
    return asyncio.to_thread(cluster.start, 60)


# ---- item 4: one size limit; 1 MiB by default, 16 MiB end to end when configured


async def test_the_default_configuration_passes_a_one_mib_message(short_dir: Path) -> None:
    cluster = LocalCluster(2, short_dir, protocol={"insecure": True, **STEADY}, metrics=False)
    await start(cluster)
    try:
        ears = [await listener(s) for s in cluster.sockets]
        sender = await Raw.open(cluster.sockets[0])
        welcome_limit = 1 * MiB
        message = random.randbytes(welcome_limit)
        sender.send({"t": "send", "id": 1, "groups": ["g"], "payloads": [message]})
        sender.send({"t": "send", "id": 2, "groups": ["g"], "payloads": [message + b"!"]})
        errors = await sender.sync(3, timeout=60)
        assert [(e["code"], e["id"], e["fatal"]) for e in errors] == [
            ("message_too_large", 2, False)
        ]
        for ear in ears:
            assert await collect(ear, 1) == [message]
    finally:
        codes = await asyncio.to_thread(cluster.stop)
    assert codes == {0: 0, 1: 0}


async def test_a_sixteen_mib_message_through_real_daemons(short_dir: Path) -> None:
    cluster = LocalCluster(2, short_dir, protocol={"insecure": True, **STEADY}, metrics=False,
                           extra={"api": {"max_message_bytes": 16 * MiB}})
    await start(cluster)
    try:
        ears = [await listener(s) for s in cluster.sockets]
        sender = await Raw.open(cluster.sockets[1])
        message = random.randbytes(16 * MiB)
        digest = hashlib.sha256(message).digest()
        sender.send({"t": "send", "id": 1, "groups": ["g"], "payloads": [message]})
        sender.send({"t": "send", "id": 2, "groups": ["g"], "payloads": [message + b"!"]})
        sender.send({"t": "send", "id": 3, "groups": ["g"], "payloads": [b"after"]})
        errors = await sender.sync(4, timeout=120)
        assert [(e["code"], e["id"]) for e in errors] == [("message_too_large", 2)]
        for ear in ears:
            got = await collect(ear, 2, timeout=120)
            assert [hashlib.sha256(got[0]).digest(), got[1]] == [digest, b"after"]
    finally:
        codes = await asyncio.to_thread(cluster.stop)
    assert codes == {0: 0, 1: 0}


# ---- item 8: backpressure, not refusal


@pytest.mark.parametrize("window", [256, 16])
async def test_three_clients_bursting_single_message_frames_lose_nothing(
    short_dir: Path, window: int
) -> None:
    """3 clients x 4,000 one-message frames, then sync: 12,000 delivered on every node.

    With the engine's window at 16 vertices it fills within the burst on any machine;
    the daemon before this change refused about 20% of such a burst with ``overloaded``.
    """
    cluster = LocalCluster(3, short_dir,
                           protocol={"insecure": True, **STEADY, "window_size": window},
                           metrics=False)
    await start(cluster)
    try:
        ears = [await listener(s) for s in cluster.sockets]
        senders = [await Raw.open(cluster.sockets[0]) for _ in range(3)]
        per = 4000
        pad = b"." * 100  # ~10 messages per datagram: the engine's window fills
        for k, raw in enumerate(senders):
            raw.write(b"".join(
                _send_frame(i, [b"%d:%d:" % (k, i) + pad]) for i in range(per)
            ))
        results = await asyncio.gather(*(raw.sync(per, timeout=120) for raw in senders))
        assert results == [[], [], []]  # no error frame: every frame was accepted
        expected = {b"%d:%d:" % (k, i) + pad for k in range(3) for i in range(per)}
        for ear in ears:
            got = await collect(ear, 3 * per, timeout=120)
            assert len(got) == 3 * per and set(got) == expected
    finally:
        codes = await asyncio.to_thread(cluster.stop)
    assert codes == {0: 0, 1: 0, 2: 0}


def _send_frame(ref: int, payloads: list[bytes]) -> bytes:
    from amcast.socket_protocol import encode_frame

    return encode_frame({"t": "send", "id": ref, "groups": ["g"], "payloads": payloads})


# ---- item 9: health


async def wait_health(raw: Raw, ok: bool, timeout: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    ref = 1000
    while True:
        ref += 1
        raw.send({"t": "status", "id": ref})
        frames = await raw.until("status")
        health = frames[-1]["health"]
        if health["ok"] is ok:
            return health
        assert time.monotonic() < deadline, f"health stayed {health}"
        await asyncio.sleep(0.2)


async def wait_stopped(pid: int | None, timeout: float = 10) -> None:
    """Until the kernel has stopped ``pid`` (state T in /proc/PID/stat)."""
    deadline = time.monotonic() + timeout
    while Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "T":
        assert time.monotonic() < deadline, "SIGSTOP did not take effect"
        await asyncio.sleep(0.01)


async def test_a_stalled_cluster_reports_unhealthy(short_dir: Path) -> None:
    # lex waits for a message from every member: with one stopped, nothing can be ordered
    # (GL-ToTo's prefix rule may still deliver some of a single sender's messages)
    cluster = LocalCluster(2, short_dir, protocol={"insecure": True, **STEADY, "rule": "lex"},
                           metrics=False,
                           extra={"health": {"stall_after_s": 1.0}})
    await start(cluster)
    stopped = False
    try:
        ear = await listener(cluster.sockets[0])
        ear.send({"t": "send", "id": 1, "groups": ["g"], "payload": b"warm-up"})
        assert await collect(ear, 1) == [b"warm-up"]
        assert (await wait_health(ear, True))["problems"] == []
        cluster.kill_node(1, signal.SIGSTOP)
        stopped = True
        await wait_stopped(cluster.nodes[1].pid)
        for i in range(10):
            ear.send({"t": "send", "id": 10 + i, "groups": ["g"], "payload": b"m%d" % i})
        health = await wait_health(ear, False)
        assert len(health["problems"]) == 1
        assert health["problems"][0].startswith("cannot order: 10 own messages")
        cluster.kill_node(1, signal.SIGCONT)
        stopped = False
        assert await collect(ear, 10) == [b"m%d" % i for i in range(10)]
        assert (await wait_health(ear, True))["problems"] == []
    finally:
        if stopped:
            cluster.kill_node(1, signal.SIGCONT)
        codes = await asyncio.to_thread(cluster.stop)
    assert codes == {0: 0, 1: 0}


# ---- item 11: one daemon per socket


def daemon(config: Path, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AMCAST_", "NOTIFY_"))}
    return subprocess.run([sys.executable, "-m", "amcast.daemon", "--config", str(config),
                           *args], capture_output=True, text=True, timeout=timeout, env=env)


def one_line(text: str) -> str:
    lines = [x for x in text.splitlines() if x.strip()]
    assert len(lines) == 1, text
    return lines[0]


async def test_a_second_daemon_on_a_live_socket_refuses_to_start(short_dir: Path) -> None:
    stale = short_dir / "node0.sock"  # a stale socket file where node 0 will serve
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(stale))
    s.close()
    cluster = LocalCluster(1, short_dir, protocol={"insecure": True, **STEADY}, metrics=False)
    await start(cluster)  # the stale file is taken over
    try:
        path = cluster.sockets[0]
        assert path == str(stale)
        second = short_dir / "second.toml"
        second.write_text(render_toml({
            "node": {"id": 0, "members": [0], "state_dir": str(short_dir / "second-state")},
            "network": {"group": cluster.group, "port": cluster.port, "ttl": 0},
            "api": {"socket": path},
            "metrics": {"enabled": False},
            "logs": {"dir": str(short_dir / "second-logs"), "format": "json"},
            "protocol": {"insecure": True, **STEADY},
        }))
        for args in ((), ("--check",)):
            proc = await asyncio.to_thread(daemon, second, *args)
            assert proc.returncode == 2, proc
            assert "serving api.socket" in one_line(proc.stderr)
        assert not (short_dir / "second-logs").exists()  # it touched nothing
        raw = await Raw.open(path)  # the first daemon still serves its socket
        raw.send({"t": "status", "id": 1})
        assert (await raw.until("status"))[-1]["node"] == 0
    finally:
        codes = await asyncio.to_thread(cluster.stop)
    assert codes == {0: 0}
    assert not stale.exists()


# ---- item 12: --check accepts exactly what the daemon accepts


def base_tables(d: Path) -> dict[str, dict[str, Any]]:
    return {
        "node": {"id": 0, "members": [0, 1], "state_dir": str(d / "state")},
        "network": {"group": f"239.255.{random.randrange(1, 255)}.{random.randrange(1, 255)}",
                    "port": free_port(), "ttl": 0},
        "api": {"socket": str(d / "ok.sock")},
        "metrics": {"enabled": True, "port": 0},
        "logs": {"dir": str(d / "logs"), "format": "json"},
        "protocol": {"insecure": True, **STEADY},
    }


def _hog_tcp(tables: dict[str, dict[str, Any]]) -> socket.socket:
    hog = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    hog.bind(("127.0.0.1", 0))
    hog.listen()
    tables["metrics"]["port"] = hog.getsockname()[1]
    return hog


def _hog_udp(tables: dict[str, dict[str, Any]]) -> socket.socket:
    hog = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)  # no SO_REUSEPORT
    hog.bind(("", tables["network"]["port"]))
    return hog


CASES: dict[str, tuple[Any, str]] = {
    "phi 10 with 4 members": (
        lambda t, d: (t["node"].update(members=[0, 1, 2, 3]), t["protocol"].update(phi=10)),
        "phi"),
    "gltoto with phi 0.5": (lambda t, d: t["protocol"].update(rule="gltoto", phi=0.5), "phi"),
    "interface not on this host": (
        lambda t, d: t["network"].update(interface="192.0.2.77"), "network.interface"),
    "multicast port taken": (lambda t, d: _hog_udp(t), "network.port"),
    "metrics port taken": (lambda t, d: _hog_tcp(t), "metrics"),
    "log directory cannot be created": (
        lambda t, d: t["logs"].update(dir=str(d / "a-file" / "logs")), "logs.dir"),
    "socket directory cannot be created": (
        lambda t, d: t["api"].update(socket=str(d / "a-file" / "s.sock")), "api.socket"),
    "socket path too long": (
        lambda t, d: t["api"].update(socket=str(d / ("x" * 120) / "s.sock")), "at most 107"),
    "socket group unknown": (
        lambda t, d: t["api"].update(socket_group="no-such-group-amcast"), "no group named"),
    "engine size key set": (
        lambda t, d: t["protocol"].update(max_message_size=1000), "derived"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_check_fails_exactly_where_the_daemon_fails(short_dir: Path, case: str) -> None:
    (short_dir / "a-file").write_text("not a directory")
    tables = base_tables(short_dir)
    change, needle = CASES[case]
    hog = change(tables, short_dir)
    config = short_dir / "bad.toml"
    config.write_text(render_toml(tables))
    try:
        check = daemon(config, "--check")
        assert check.returncode == 2, check
        assert needle in one_line(check.stderr), check.stderr
        assert check.stdout == ""
        run = daemon(config)  # the daemon itself refuses the same configuration
        assert run.returncode == 2, run
        one_line(run.stderr)
    finally:
        if isinstance(hog, socket.socket):
            hog.close()


def test_check_prints_the_effective_configuration(short_dir: Path) -> None:
    import json

    tables = base_tables(short_dir)
    tables["protocol"].update(rule="gtoto")
    del tables["protocol"]["insecure"]
    keygen.create(short_dir / "authkey")
    tables["security"] = {"key_file": str(short_dir / "authkey")}
    config = short_dir / "ok.toml"
    config.write_text(render_toml(tables))
    proc = daemon(config, "--check")
    assert proc.returncode == 0, proc
    shown = json.loads(proc.stdout)
    assert shown["derived"]["phi"] == 1.5  # what the engine resolved for n = 2
    assert shown["api"]["max_message_bytes"] == MiB
    assert shown["derived"]["api.max_frame_bytes"] > MiB
    assert shown["protocol"]["max_message_size"] == shown["derived"]["protocol.max_message_size"]
    assert shown["protocol"]["window_size"] == 256  # engine defaults included
    assert shown["protocol"]["keyring"] == "<set, not shown>: key ids [1]"
    key = (short_dir / "authkey").read_text().split()[-1]
    assert key not in proc.stdout and key not in proc.stderr
    assert shown["health"]["stall_after_s"] == 5.0
    assert not (short_dir / "logs").exists() and not (short_dir / "ok.sock").exists()


def test_key_file_problems_stop_the_start_with_one_line(short_dir: Path) -> None:
    tables = base_tables(short_dir)
    del tables["protocol"]["insecure"]
    key_file = short_dir / "authkey"
    tables["security"] = {"key_file": str(key_file)}
    config = short_dir / "keyed.toml"
    config.write_text(render_toml(tables))
    cases = []
    cases.append(("does not exist: make one with `amcast keygen", daemon(config, "--check")))
    keygen.create(key_file)
    key_file.chmod(0o440)
    cases.append(("is open to group or others (mode 0440): chmod 0400", daemon(config, "--check")))
    key_file.chmod(0o600)
    key_file.write_text("1 abcd\n")
    cases.append(("line 1: the key has 2 bytes, not 32", daemon(config, "--check")))
    tables["protocol"]["group_key"] = "k" * 32
    config.write_text(render_toml(tables))
    cases.append(("group_key: not a setting: the keys live in a key file",
                  daemon(config, "--check")))
    for expected, proc in cases:
        assert proc.returncode == 2, proc
        assert expected in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
