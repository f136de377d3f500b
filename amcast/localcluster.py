"""N ``amcastd`` processes on this host, on loopback multicast: for CLI, demo, bench, tests.

Theory of operation: ``LocalCluster`` writes one TOML config per node into a directory
(node ``i`` of ``0..n-1``, one fresh 239.255.x.y group and one free UDP port for the
whole cluster, interface 127.0.0.1, TTL 0, a unix socket, a log directory and a metrics
port per node), then starts each daemon as ``python -m amcast.daemon --config FILE`` with
``NOTIFY_SOCKET`` pointing at a datagram socket of ours: a daemon is up when it sends
``READY=1`` (the systemd protocol), so start-up waits on events, never on sleeps.
``stop`` sends SIGTERM and waits for every exit (through a pidfd where Linux has one).
``cluster.json`` in the directory records pids, sockets and ports for ``amcast cluster
stop`` and ``amcast status``.

Faults, for the failover tests, ``amcast demo --faults`` and ``amcast bench failover``:
``kill`` (SIGKILL, a crash), ``pause``/``resume`` (SIGSTOP/SIGCONT), ``terminate``
(SIGTERM, a graceful leave) each return the ``time.monotonic()`` taken just before the
signal; ``wait_exit`` waits (bounded) for the process to be gone; ``restart`` starts a
stopped daemon again with its config and state directory, as systemd's
``Restart=on-failure`` does, and waits (bounded) for its ``READY=1`` on a notify socket
of its own, and optionally for it to report a primary view of a given size.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import select
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from .keygen import new_keyring, write_keyring
from .protocols.errors import AmcastError


class ClusterStateError(AmcastError):
    """The directory's cluster is not in the state a request needs (one already runs
    there, or there is none)."""


PORT_ATTEMPTS = 3
"""Starts of a cluster whose daemon found a port taken, before ``start`` gives up."""


class PortTaken(AmcastError):
    """A daemon exited at start-up because an address it was to bind is in use."""


EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
PORT_FLOOR = 10000
"""Lowest port ``free_port`` picks: below it are the well-known and registered services."""


def _ephemeral_low() -> int:
    """The lowest port the kernel gives a socket bound to port 0 (Linux's default where
    that is unreadable)."""
    try:
        return int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(kind: int = socket.SOCK_DGRAM) -> int:
    """A port of 127.0.0.1 free for ``kind`` now, picked at random below the kernel's
    ephemeral range where that leaves room: the kernel never hands it to a socket bound to
    port 0, so a daemon that is killed and restarted finds its port still free. In the
    ephemeral range (the kernel's pick) when no random pick is free."""
    low = _ephemeral_low()
    rng = random.SystemRandom()
    for _ in range(64 if low - PORT_FLOOR >= 1000 else 0):
        port = rng.randrange(PORT_FLOOR, low)
        with socket.socket(socket.AF_INET, kind) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
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
    if isinstance(value, dict):  # an inline table, e.g. an [access] rule
        return "{" + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}"
                               for k, v in value.items()) + "}"
    return repr(value)


def _toml_key(key: str) -> str:
    bare = key and all(c.isascii() and (c.isalnum() or c in "_-") for c in key)
    return key if bare else json.dumps(key)


def _peers(addresses: list[str], ports: list[int], me: int) -> dict[str, str]:
    """``network.peers`` of node ``me``: every other node's ``host:port``."""
    return {str(j): (f"[{a}]" if ":" in a else a) + f":{ports[j]}"
            for j, a in enumerate(addresses) if j != me}


def render_toml(tables: dict[str, dict[str, Any]]) -> str:
    out = []
    for name, table in tables.items():
        out.append(f"[{name}]")
        out += [f"{k} = {_toml_value(v)}" for k, v in table.items()]
        out.append("")
    return "\n".join(out)


class Restarted(NamedTuple):
    """``LocalCluster.restart``'s times (``time.monotonic()``): the process was spawned,
    it sent ``READY=1`` (serving its socket), it reported the primary view waited for
    (``None`` when not waited for)."""

    spawned_at: float
    ready_at: float
    in_view_at: float | None


def write_private(path: Path, text: str) -> None:
    """Write ``text`` readable by its owner only (0600, also when the file existed with a
    wider mode): a config file holds the group key."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)


@dataclass
class NodeProcess:
    node: int
    config: Path
    socket: str
    log_dir: Path
    metrics_port: int
    process: subprocess.Popen[bytes] | None = None
    pid: int | None = None
    log_offset: int = 0
    """Where this run of the daemon began writing its ``amcastd.log``."""


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
    redundant_interfaces: list[str] = field(default_factory=list)
    """Per-node address of a second link (``network.redundant``; with ``interfaces``)."""
    transport: str = "multicast"
    """``unicast``: every node listens on its own UDP port of 127.0.0.1 (or its
    interface) and sends each datagram to every other one's (``network.peers``)."""
    unicast_ports: list[int] = field(default_factory=list)
    """Unicast: per-node UDP port (default: a free one each)."""
    peers: list[dict[str, str]] = field(default_factory=list)
    """Unicast: per-node ``network.peers`` (default: every other node's own address and
    port), e.g. a ``FaultRelay``'s port for each link."""
    _port_chosen: bool = field(default=False, init=False, repr=False)
    """``port`` was picked here (free), not given: ``start`` may pick another."""
    key_path: Path | None = None
    """A key ring shared with other clusters (a local federation writes it once); unset:
    a fresh ring in ``directory``."""
    wrappers: list[list[str]] = field(default_factory=list)
    """Per-node command prefix, e.g. ``["ip", "netns", "exec", "ns0"]`` (must exec the
    daemon in place, so its pid is the one that reports READY=1)."""

    def __post_init__(self) -> None:
        self.directory = Path(self.directory).resolve()
        if not self.group:
            rnd = random.SystemRandom()
            self.group = f"239.255.{rnd.randrange(1, 255)}.{rnd.randrange(1, 255)}"
        self._port_chosen = not self.port
        if not self.port:
            self.port = free_port()

    @property
    def key_file(self) -> Path | None:
        """The cluster's key ring (``None``: insecure); one fresh ring per cluster unless
        ``key_path`` names a shared one."""
        if self.protocol.get("insecure"):
            return None
        return self.key_path if self.key_path is not None else self.directory / "authkey"

    @property
    def sockets(self) -> list[str]:
        return [n.socket for n in self.nodes]

    def refuse_if_running(self) -> None:
        """Starting over a running cluster would orphan its daemons: refuse instead."""
        path = self.directory / "cluster.json"
        if not path.exists():
            return
        try:
            alive = LocalCluster.load(self.directory).alive()
        except AmcastError:
            return  # an unreadable record: nothing we could stop anyway
        if alive:
            raise ClusterStateError(
                f"a cluster is already running in {self.directory} (pids "
                f"{', '.join(map(str, alive))}): stop it first with "
                f"amcast cluster stop --dir {self.directory}"
            )

    def alive(self) -> list[int]:
        """Pids of this cluster's daemons that still run (checked against their command
        line, so a recycled pid does not count)."""
        return [n.pid for n in self.nodes if n.pid is not None and _is_daemon(n.pid, n.config)]

    def write_configs(self) -> None:
        self.refuse_if_running()
        self.directory.mkdir(parents=True, exist_ok=True)
        if self.key_file is not None and self.key_path is None:
            write_keyring(self.key_file, new_keyring())  # 0400: datagrams are sealed
        members = list(range(self.n))
        self.nodes = []
        unicast_ports = ((self.unicast_ports or [free_port() for _ in members])
                         if self.transport == "unicast" else [])
        for i in members:
            ndir = self.directory / f"node{i}"
            ndir.mkdir(mode=0o700, exist_ok=True)
            ndir.chmod(0o700)  # its config holds the group key; its logs, the traffic
            sock = str(self.directory / f"node{i}.sock")
            mport = free_port(socket.SOCK_STREAM) if self.metrics else 0
            tables: dict[str, dict[str, Any]] = {
                "node": {"id": i, "members": members, "seed": 1000 + i,
                         "state_dir": str(ndir / "state")},
                "network": {"group": self.group, "port": self.port,
                            "interface": self.interfaces[i] if self.interfaces else "127.0.0.1",
                            "ttl": 1 if self.interfaces else 0, "loopback": True},
                "api": {"socket": sock, "socket_mode": 0o600},
                "metrics": {"enabled": self.metrics, "address": "127.0.0.1", "port": mport},
                "logs": {"dir": str(ndir / "logs"), "level": self.log_level, "format": "json",
                         "snapshot_interval_s": 2.0},
                "protocol": dict(self.protocol),
            }
            if self.key_file is not None:
                tables["security"] = {"key_file": str(self.key_file)}
            if unicast_ports:
                address = [self.interfaces[j] if self.interfaces else "127.0.0.1"
                           for j in members]
                tables["network"].update(
                    transport="unicast", port=unicast_ports[i],
                    peers=self.peers[i] if self.peers else _peers(address, unicast_ports, i))
            if self.redundant_interfaces:
                second: dict[str, Any] = {"interface": self.redundant_interfaces[i]}
                if unicast_ports:
                    second["peers"] = _peers(self.redundant_interfaces, unicast_ports, i)
                tables["network"]["redundant"] = second
            for section, values in self.extra.items():
                tables.setdefault(section, {}).update(values)
            path = ndir / "amcastd.toml"
            write_private(path, render_toml(tables))
            self.nodes.append(NodeProcess(i, path, sock, ndir / "logs", mport))

    def start(self, timeout: float = 30.0, *, detach: bool = False,
              wait_view: bool = True) -> None:
        """Start every daemon and wait for each one's READY=1 and (``wait_view``) until
        all of them report the same primary view of every node (or fail with a log).

        Ports are picked free before the daemons bind them, so another process can take
        one in between: when a daemon exits at start-up because an address is in use,
        and the configs are ours (written by this call), every daemon is stopped and
        the cluster starts again on fresh ports (up to ``PORT_ATTEMPTS`` times).

        Refuses (``AmcastError``) when ``cluster.json`` records daemons that still run."""
        ours = not self.nodes
        for attempt in range(1, PORT_ATTEMPTS + 1):
            if ours:
                self.write_configs()
            else:
                self.refuse_if_running()
            try:
                self._start(timeout, detach=detach, wait_view=wait_view)
                return
            except PortTaken as taken:
                if not ours or attempt == PORT_ATTEMPTS:
                    raise AmcastError(f"local cluster failed to start: {taken}") from None
                self.nodes = []
                if self._port_chosen:
                    self.port = free_port()

    def _start(self, timeout: float, *, detach: bool, wait_view: bool) -> None:
        notify_path = str(self.directory / "notify.sock")
        if os.path.exists(notify_path):
            os.unlink(notify_path)
        ready = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        ready.bind(notify_path)
        try:
            for n in self.nodes:
                self._spawn(n, notify_path, detach=detach)
            waiting = {n.pid: n for n in self.nodes}
            views: dict[int, str] = {}  # pid -> its latest STATUS
            full = f"({len(self.nodes)} members)"

            def viewless() -> set[int]:
                if not wait_view:
                    return set()
                latest = {views.get(p, "") for p in waiting_for_view}
                if len(latest) == 1 and next(iter(latest)).endswith(full):
                    return set()
                return {p for p in waiting_for_view
                        if not views.get(p, "").startswith("primary view")} or waiting_for_view

            waiting_for_view = {n.pid for n in self.nodes}
            deadline = time.monotonic() + timeout
            while waiting or viewless():
                left = deadline - time.monotonic()
                for n in self.nodes:
                    if n.process is not None and n.process.poll() is not None:
                        why = f"node {n.node} exited with {n.process.returncode}"
                        if self._address_in_use(n):
                            self.stop(timeout=5)
                            raise PortTaken(self._why(n, why))
                        self._abort(why, n)
                if left <= 0:
                    lagging = viewless()
                    late = {**waiting, **{p: n for n in self.nodes if (p := n.pid) in lagging}}
                    self._abort(f"nodes {sorted(x.node for x in late.values())} not ready (or "
                                f"not in a primary view) after {timeout} s",
                                next(iter(late.values())))
                r, _, _ = select.select([ready], [], [], min(left, 0.5))
                if r:
                    msg = ready.recv(4096).decode()
                    fields = dict(line.split("=", 1) for line in msg.splitlines() if "=" in line)
                    pid = int(fields.get("MAINPID", -1))
                    if fields.get("READY") == "1":
                        waiting.pop(pid, None)
                    if "STATUS" in fields:
                        views[pid] = fields["STATUS"]
        finally:
            ready.close()
            os.unlink(notify_path)
        self.save()

    def _spawn(self, n: NodeProcess, notify_path: str, *, detach: bool = False) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AMCAST_")}
        env["NOTIFY_SOCKET"] = notify_path
        env["PYTHONUNBUFFERED"] = "1"
        stderr = open(n.config.parent / "amcastd.log", "ab")  # noqa: SIM115
        n.log_offset = stderr.tell()
        try:
            n.process = subprocess.Popen(
                [*(self.wrappers[n.node] if self.wrappers else []),
                 sys.executable, "-m", "amcast.daemon", "--config", str(n.config)],
                env=env, stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr,
                start_new_session=detach,
            )
        finally:
            stderr.close()
        n.pid = n.process.pid

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

    def kill_node(self, node: int, sig: int = signal.SIGTERM) -> float:
        """Send ``sig`` to one daemon; returns ``time.monotonic()`` taken just before."""
        pid = self.nodes[node].pid
        if pid is None:
            raise ClusterStateError(f"node {node} has no process")
        at = time.monotonic()
        os.kill(pid, sig)
        return at

    def kill(self, node: int) -> float:
        """SIGKILL (a crash: no goodbye, no state written); the time of the signal."""
        return self.kill_node(node, signal.SIGKILL)

    def pause(self, node: int) -> float:
        """SIGSTOP (a frozen process: a GC pause, a starved host); the time of the signal."""
        return self.kill_node(node, signal.SIGSTOP)

    def resume(self, node: int) -> float:
        """SIGCONT after ``pause``; the time of the signal."""
        return self.kill_node(node, signal.SIGCONT)

    def terminate(self, node: int) -> float:
        """SIGTERM (graceful: the daemon leaves the view, then exits); the time of the
        signal."""
        return self.kill_node(node, signal.SIGTERM)

    def wait_exit(self, node: int, timeout: float) -> int | None:
        """Wait up to ``timeout`` s for one daemon's exit; ``ClusterStateError`` if it still
        runs then. Returns its exit status (None if it was not our child)."""
        code = self.wait_node(node, timeout)
        n = self.nodes[node]
        if code is None and n.pid is not None and _is_daemon(n.pid, n.config):
            raise ClusterStateError(f"node {node} (pid {n.pid}) still runs after {timeout} s")
        return code

    def restart(self, node: int, timeout: float = 30.0,
                wait_view: int | None = None) -> Restarted:
        """Start a daemon that exited (killed or stopped) again with the same config and
        state directory; wait for its ``READY=1`` and, with ``wait_view``, until it reports
        a primary view of ``wait_view`` members. ``ClusterStateError`` when it still runs,
        exits, or is not there in time (the end of its log in the message)."""
        n = self.nodes[node]
        if n.pid is not None and _is_daemon(n.pid, n.config):
            raise ClusterStateError(f"node {node} (pid {n.pid}) is still running")
        notify_path = str(self.directory / f"notify{node}.sock")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(notify_path)
        ready = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        ready.bind(notify_path)
        try:
            spawned_at = time.monotonic()
            self._spawn(n, notify_path)
            ready_at: float | None = None
            in_view_at: float | None = None
            want = None if wait_view is None else f"({wait_view} members)"
            deadline = spawned_at + timeout
            while ready_at is None or (want is not None and in_view_at is None):
                if n.process is not None and n.process.poll() is not None:
                    raise ClusterStateError(self._why(n, f"node {node} exited with "
                                                         f"{n.process.returncode}"))
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ClusterStateError(self._why(n, f"node {node} not ready (or not in a "
                                                         f"primary view) {timeout} s after "
                                                         "its restart"))
                r, _, _ = select.select([ready], [], [], min(left, 0.5))
                if not r:
                    continue
                now = time.monotonic()
                msg = ready.recv(4096).decode(errors="replace")
                fields = dict(line.split("=", 1) for line in msg.splitlines() if "=" in line)
                if fields.get("READY") == "1" and ready_at is None:
                    ready_at = now
                status = fields.get("STATUS", "")
                if want is not None and status.startswith("primary view") \
                        and status.endswith(want):
                    in_view_at = now
        finally:
            ready.close()
            os.unlink(notify_path)
        self.save()
        return Restarted(spawned_at, ready_at, in_view_at)

    @staticmethod
    def _address_in_use(n: NodeProcess) -> bool:
        """Whether this run of the daemon (its log since the spawn) stopped on an address
        in use: its one line at start-up names the errno (``EADDRINUSE``)."""
        try:
            with open(n.config.parent / "amcastd.log", "rb") as fh:
                fh.seek(n.log_offset)
                return b"EADDRINUSE" in fh.read()
        except OSError:
            return False

    @staticmethod
    def _why(n: NodeProcess, what: str) -> str:
        try:
            log = (n.config.parent / "amcastd.log").read_text(errors="replace")[-2000:]
        except OSError:
            log = ""
        return f"{what}\n{log}" if log else what

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
        """SIGTERM every daemon (SIGCONT first: one may be paused), wait; SIGKILL what is
        left. Returns exit codes."""
        for n in self.nodes:
            if n.pid is not None and (n.process is None or n.process.poll() is None):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(n.pid, signal.SIGCONT)
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
        """The cluster ``start`` recorded in ``directory`` (``AmcastError`` if none)."""
        path = Path(directory) / "cluster.json"
        try:
            info = json.loads(path.read_text())
            self = cls(len(info["nodes"]), Path(directory), group=info["group"],
                       port=info["port"])
            self.nodes = [NodeProcess(x["node"], Path(x["config"]), x["socket"],
                                      Path(x["log_dir"]), x["metrics_port"], None, x["pid"])
                          for x in info["nodes"]]
        except FileNotFoundError:
            raise ClusterStateError(f"no cluster in {directory} ({path.name} not found): check "
                              "--dir") from None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ClusterStateError(f"cannot read {path}: {exc}") from None
        return self


def _is_daemon(pid: int, config: Path) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            cmdline = fh.read()
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: trust the pid
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return b"amcast.daemon" in cmdline and str(config).encode() in cmdline


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
