"""N ``amcastd`` processes on this host, on loopback multicast: for CLI, demo, bench, tests.

Theory of operation: ``LocalCluster`` writes one TOML config per node into a directory
(node ``i`` of ``0..n-1``, one fresh 239.255.x.y group and one free UDP port for the
whole cluster, interface 127.0.0.1, TTL 0, a unix socket, a log directory and a metrics
port per node), then starts each daemon as ``python -m daemon.main --config FILE`` with
``NOTIFY_SOCKET`` pointing at a datagram socket of ours: a daemon is up when it sends
``READY=1`` (the systemd protocol), so start-up waits on events, never on sleeps.
``stop`` sends SIGTERM and waits for every exit (through a pidfd where Linux has one).
``cluster.json`` in the directory records pids, sockets and ports for ``amcast cluster
stop`` and ``amcast status``.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import secrets
import select
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protocols.errors import AmcastError


def free_port(kind: int = socket.SOCK_DGRAM) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return repr(value)


def render_toml(tables: dict[str, dict[str, Any]]) -> str:
    out = []
    for name, table in tables.items():
        out.append(f"[{name}]")
        out += [f"{k} = {_toml_value(v)}" for k, v in table.items()]
        out.append("")
    return "\n".join(out)


@dataclass
class NodeProcess:
    node: int
    config: Path
    socket: str
    log_dir: Path
    metrics_port: int
    process: subprocess.Popen[bytes] | None = None
    pid: int | None = None


@dataclass
class LocalCluster:
    n: int
    directory: Path
    protocol: dict[str, Any] = field(default_factory=dict)
    group: str = ""
    port: int = 0
    metrics: bool = True
    log_level: str = "warning"
    extra: dict[str, dict[str, Any]] = field(default_factory=dict)
    nodes: list[NodeProcess] = field(default_factory=list)
    interfaces: list[str] = field(default_factory=list)
    """Per-node interface address (default: every node on 127.0.0.1 with TTL 0)."""
    wrappers: list[list[str]] = field(default_factory=list)
    """Per-node command prefix, e.g. ``["ip", "netns", "exec", "ns0"]`` (must exec the
    daemon in place, so its pid is the one that reports READY=1)."""

    def __post_init__(self) -> None:
        self.directory = Path(self.directory).resolve()
        if not self.group:
            rnd = random.SystemRandom()
            self.group = f"239.255.{rnd.randrange(1, 255)}.{rnd.randrange(1, 255)}"
        if not self.port:
            self.port = free_port()
        if "group_key" not in self.protocol and not self.protocol.get("insecure"):
            # one fresh secret per cluster: datagrams are authenticated (HMAC) by default
            self.protocol = {**self.protocol, "group_key": secrets.token_hex(16)}

    @property
    def sockets(self) -> list[str]:
        return [n.socket for n in self.nodes]

    def write_configs(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        members = list(range(self.n))
        self.nodes = []
        for i in members:
            ndir = self.directory / f"node{i}"
            ndir.mkdir(exist_ok=True)
            sock = str(self.directory / f"node{i}.sock")
            mport = free_port(socket.SOCK_STREAM) if self.metrics else 0
            tables: dict[str, dict[str, Any]] = {
                "node": {"id": i, "members": members, "seed": 1000 + i},
                "network": {"group": self.group, "port": self.port,
                            "interface": self.interfaces[i] if self.interfaces else "127.0.0.1",
                            "ttl": 1 if self.interfaces else 0, "loopback": True},
                "api": {"socket": sock, "socket_mode": 0o600},
                "metrics": {"enabled": self.metrics, "address": "127.0.0.1", "port": mport},
                "logs": {"dir": str(ndir / "logs"), "level": self.log_level, "format": "json",
                         "snapshot_interval_s": 2.0},
                "protocol": dict(self.protocol),
            }
            for section, values in self.extra.items():
                tables.setdefault(section, {}).update(values)
            path = ndir / "amcastd.toml"
            path.write_text(render_toml(tables))
            self.nodes.append(NodeProcess(i, path, sock, ndir / "logs", mport))

    def start(self, timeout: float = 30.0, *, detach: bool = False) -> None:
        """Start every daemon and wait for each one's READY=1 (or fail with its stderr)."""
        if not self.nodes:
            self.write_configs()
        notify_path = str(self.directory / "notify.sock")
        if os.path.exists(notify_path):
            os.unlink(notify_path)
        ready = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        ready.bind(notify_path)
        try:
            env = {k: v for k, v in os.environ.items() if not k.startswith("AMCAST_")}
            env["NOTIFY_SOCKET"] = notify_path
            env["PYTHONUNBUFFERED"] = "1"
            for n in self.nodes:
                stderr = open(n.config.parent / "amcastd.log", "ab")  # noqa: SIM115
                n.process = subprocess.Popen(
                    [*(self.wrappers[n.node] if self.wrappers else []),
                     sys.executable, "-m", "daemon.main", "--config", str(n.config)],
                    env=env, stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr,
                    start_new_session=detach,
                )
                stderr.close()
                n.pid = n.process.pid
            waiting = {n.pid: n for n in self.nodes}
            deadline = time.monotonic() + timeout
            while waiting:
                left = deadline - time.monotonic()
                for n in self.nodes:
                    if n.process is not None and n.process.poll() is not None:
                        self._abort(f"node {n.node} exited with {n.process.returncode}", n)
                if left <= 0:
                    self._abort(f"nodes {sorted(x.node for x in waiting.values())} not ready "
                                f"after {timeout} s", next(iter(waiting.values())))
                r, _, _ = select.select([ready], [], [], min(left, 0.5))
                if r:
                    msg = ready.recv(4096).decode()
                    fields = dict(line.split("=", 1) for line in msg.splitlines() if "=" in line)
                    if fields.get("READY") == "1":
                        waiting.pop(int(fields.get("MAINPID", -1)), None)
        finally:
            ready.close()
            os.unlink(notify_path)
        self.save()

    def _abort(self, why: str, culprit: NodeProcess) -> None:
        log = (culprit.config.parent / "amcastd.log").read_text(errors="replace")[-3000:]
        self.stop(timeout=5)
        raise AmcastError(f"local cluster failed to start: {why}\n{log}")

    def save(self) -> None:
        (self.directory / "cluster.json").write_text(json.dumps({
            "group": self.group, "port": self.port,
            "nodes": [{"node": n.node, "pid": n.pid, "socket": n.socket,
                       "config": str(n.config), "log_dir": str(n.log_dir),
                       "metrics_port": n.metrics_port} for n in self.nodes],
        }, indent=2))

    def kill_node(self, node: int, sig: int = signal.SIGTERM) -> None:
        pid = self.nodes[node].pid
        if pid is not None:
            os.kill(pid, sig)

    def wait_node(self, node: int, timeout: float) -> int | None:
        """Wait for one daemon's exit; its exit status (None if it was not our child)."""
        n = self.nodes[node]
        if n.process is not None:
            try:
                return n.process.wait(timeout)
            except subprocess.TimeoutExpired:
                return None
        if n.pid is not None:
            wait_pid_gone(n.pid, timeout)
        return None

    def stop(self, timeout: float = 20.0) -> dict[int, int | None]:
        """SIGTERM every daemon, wait; SIGKILL what is left. Returns exit codes."""
        for n in self.nodes:
            if n.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(n.pid, signal.SIGTERM)
        codes: dict[int, int | None] = {}
        deadline = time.monotonic() + timeout
        for n in self.nodes:
            left = max(0.1, deadline - time.monotonic())
            codes[n.node] = self.wait_node(n.node, left)
            if n.process is not None and n.process.poll() is None:
                n.process.kill()
                n.process.wait()
                codes[n.node] = -9
        return codes

    @classmethod
    def load(cls, directory: Path) -> LocalCluster:
        info = json.loads((Path(directory) / "cluster.json").read_text())
        self = cls(len(info["nodes"]), Path(directory), group=info["group"], port=info["port"])
        self.nodes = [NodeProcess(x["node"], Path(x["config"]), x["socket"], Path(x["log_dir"]),
                                  x["metrics_port"], None, x["pid"]) for x in info["nodes"]]
        return self


def wait_pid_gone(pid: int, timeout: float) -> bool:
    """Wait for a non-child process to exit, on a pidfd (no polling) where available."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    except (AttributeError, OSError):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return True
            time.sleep(0.05)
        return False
    try:
        r, _, _ = select.select([fd], [], [], timeout)
        return bool(r)
    finally:
        os.close(fd)
