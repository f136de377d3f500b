"""``amcast bench abuse``: a daemon's memory and its honest clients under API abuse.

Theory of operation. One local cluster (``LocalCluster``, ``--nodes`` daemons, default 1)
is started with ``api.max_clients`` raised above ``--connections`` and short timeouts
(``--timeout`` seconds for ``hello_timeout_s``, ``frame_timeout_s`` and
``slow_reader_timeout_s``; ``close_grace_s`` too), so that what the daemon cuts off is
cut off within a phase. Then phases run in turn, each on node 0:

- ``baseline``: no abuse;
- ``connections``: ``--connections`` (1,000) connections that say ``hello`` and then sit
  idle (each holds a slot: the daemon must not time them out);
- ``never-read``: ``--readers`` clients join the honest group and never read a byte (the
  daemon holds its releases while they are behind, then disconnects them as
  ``slow_reader`` after the timeout);
- ``unread-answers``: ``--readers`` clients each write 200 KB of ``status`` requests in
  one go and never read the answers (about 10,000 requests each, whose answers list every
  client; the daemon handles a client's frames only while it reads what they produced,
  then disconnects it as ``slow_reader``);
- ``oversized``: ``--flooders`` threads write frames announcing 2 x ``max_frame_bytes``
  as fast as the socket takes them, never reading the ``frame_too_large`` answers (the
  daemon skips the bodies without buffering them);
- ``half-written``: ``--stallers`` connections send ``hello`` then half of a largest
  frame (half of them only its length prefix) and go silent (``frame_timeout``);
- ``half-closed``: ``--stallers`` clients join the honest group, shut down their sending
  side and never read (their slots are free at once; what is queued to them is dropped
  after ``close_grace_s``).

In every phase, once the abuse is in place, an honest client (``python -m
amcast.loadgen``, a separate process) sends ``--size``-byte messages to its own group at
``--rate`` messages/s for ``--duration`` seconds, receiving them (send-to-delivery
latency p50/p99, delivered messages/s), then, still under abuse, as fast as flow control
allows for ``--duration`` seconds (saturated messages/s). The abuse then ends (the bench
closes what is still open) and the bench waits, bounded, for the daemon to report only
the clients it had before.

Figures per phase: node 0's resident set (``VmRSS`` of ``/proc/PID/status``, sampled
every 20 ms by a thread) before the abuse, its peak during the phase and after it; the
honest client's figures next to the baseline's; the connections the daemon refused or
closed in the phase, by reason (``status`` ``clients_disconnected`` deltas); the error
frames it sent, by code. Traffic stays on loopback and one unix socket; every wait is
bounded.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from amcast import socket_protocol as sp
from amcast.argtypes import positive, whole
from amcast.client import BlockingClient
from amcast.loadgen import MIN_SIZE
from amcast.localcluster import LocalCluster

NAME = "abuse"
HELP = (
    "daemon RSS and honest clients' throughput and latency while other clients abuse "
    "the socket API (1,000 connections, never reading, oversized and half-written "
    "frames, half-closed connections)"
)
PHASES = (
    "baseline",
    "connections",
    "never-read",
    "unread-answers",
    "oversized",
    "half-written",
    "half-closed",
)
HONEST_GROUP = "honest"
RSS_PERIOD_S = 0.02
SETTLE_S = 15.0
"""Longest wait for the daemon to be back to its honest clients after a phase."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nodes", type=whole(1), default=1, help="daemons (default 1; abuse on node 0)")
    p.add_argument(
        "--connections",
        type=whole(1),
        default=1000,
        help="idle greeted connections of the 'connections' phase (default 1000)",
    )
    p.add_argument(
        "--readers",
        type=whole(1),
        default=20,
        help="clients that join the honest group and never read (default 20)",
    )
    p.add_argument(
        "--flooders", type=whole(1), default=4, help="threads writing oversized frames (default 4)"
    )
    p.add_argument(
        "--stallers",
        type=whole(1),
        default=200,
        help="half-written / half-closed connections (default 200)",
    )
    p.add_argument(
        "--duration",
        type=positive,
        default=4.0,
        help="seconds of each honest measurement (paced, then saturated; default 4)",
    )
    p.add_argument(
        "--rate", type=positive, default=2000.0, help="paced honest messages/s (default 2000)"
    )
    p.add_argument("--size", type=whole(MIN_SIZE), default=100,
                   help="honest payload bytes (default 100)")
    p.add_argument(
        "--timeout",
        type=positive,
        default=2.0,
        help="api.hello_timeout_s, frame_timeout_s, slow_reader_timeout_s and "
        "close_grace_s of the daemon under test (default 2)",
    )
    p.add_argument(
        "--queue-high",
        type=whole(0),
        default=0,
        help="api.client_queue_high_bytes of the daemon under test (default 0: the "
        "daemon's default, 4 MiB); client_queue_max_bytes is then 8 times it (at least 4 MiB)",
    )
    p.add_argument(
        "--phases",
        default=",".join(PHASES),
        help=f"comma-separated phases to run (default all: {','.join(PHASES)})",
    )
    p.add_argument("--dir", type=Path, help="keep configs and logs here (default: a temp dir)")


# ---- pure computations (tested with hand-made samples) --------------------------------


def deltas(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    """Counters that grew between two samples, by key."""
    out = {k: int(after.get(k, 0)) - int(before.get(k, 0)) for k in set(before) | set(after)}
    return {k: v for k, v in sorted(out.items()) if v}


def describe_counts(counts: Mapping[str, int]) -> str:
    """``"frame_timeout 200, slow_reader 20"`` or ``"-"``."""
    return ", ".join(f"{k} {v}" for k, v in counts.items()) or "-"


def ratio(value: float | None, base: float | None) -> float | None:
    if value is None or base is None or base == 0:
        return None
    return value / base


@dataclass
class PhaseResult:
    name: str
    abuse: str
    rss_before: int = 0
    rss_peak: int = 0
    rss_after: int = 0
    setup_s: float = 0.0
    paced: dict[str, Any] = field(default_factory=dict)
    saturated: dict[str, Any] = field(default_factory=dict)
    disconnected: dict[str, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    opened: int = 0
    failures: list[str] = field(default_factory=list)

    @property
    def p50_ms(self) -> float | None:
        v = self.paced.get("latency_p50_s")
        return None if v is None else 1e3 * v

    @property
    def p99_ms(self) -> float | None:
        v = self.paced.get("latency_p99_s")
        return None if v is None else 1e3 * v

    @property
    def delivered_rate(self) -> float | None:
        d = self.paced.get("duration")
        return None if not d else self.paced.get("delivered", 0) / d

    @property
    def saturated_rate(self) -> float | None:
        s = self.saturated.get("send_seconds")
        return None if not s else self.saturated.get("sent", 0) / s


MIB = 1 << 20
DAEMON_COLUMNS = [
    "phase",
    "abusers",
    "RSS before MiB",
    "RSS peak MiB",
    "RSS after MiB",
    "closed by the daemon (reason n)",
    "error frames sent (code n)",
]
HONEST_COLUMNS = [
    "phase",
    "paced msgs/s",
    "p50 ms",
    "p99 ms",
    "p50 x base",
    "p99 x base",
    "saturated msgs/s",
    "x base",
]


def daemon_row(r: PhaseResult) -> list[Any]:
    return [
        r.name,
        r.opened,
        r.rss_before / MIB,
        r.rss_peak / MIB,
        r.rss_after / MIB,
        describe_counts(r.disconnected),
        describe_counts(r.errors),
    ]


def honest_row(r: PhaseResult, base: PhaseResult | None) -> list[Any]:
    return [
        r.name,
        r.delivered_rate,
        r.p50_ms,
        r.p99_ms,
        ratio(r.p50_ms, base.p50_ms if base else None),
        ratio(r.p99_ms, base.p99_ms if base else None),
        r.saturated_rate,
        ratio(r.saturated_rate, base.saturated_rate if base else None),
    ]


# ---- measuring ---------------------------------------------------------------------------


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise ValueError(f"no VmRSS for pid {pid}")


class RssSampler:
    """The largest ``VmRSS`` of a process, sampled every ``RSS_PERIOD_S`` by a thread."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = rss_bytes(pid)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(RSS_PERIOD_S):
            with contextlib.suppress(OSError, ValueError):
                self.peak = max(self.peak, rss_bytes(self.pid))

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        with contextlib.suppress(OSError, ValueError):
            self.peak = max(self.peak, rss_bytes(self.pid))
        return self.peak


def status(path: str) -> dict[str, Any]:
    with BlockingClient(path, name="bench-abuse-probe", timeout=10) as c:
        return c.status()


def wait_clients(path: str, at_most: int, timeout: float) -> int:
    """Poll ``status`` until the daemon has at most ``at_most`` clients besides the probe
    (bounded); the count then."""
    deadline = time.monotonic() + timeout
    while True:
        n = len(status(path)["clients"]) - 1
        if n <= at_most or time.monotonic() > deadline:
            return n
        time.sleep(0.1)


def loadgen(path: str, args: argparse.Namespace, *, paced: bool) -> dict[str, Any]:
    """One honest run (a separate process); its report, or ``{"error": ...}``."""
    extra = [
        "--duration",
        str(args.duration),
        "--size",
        str(args.size),
        "--receive",
        "--group",
        HONEST_GROUP,
        "--linger",
        "0.3",
    ]
    if paced:
        extra += ["--rate", str(args.rate)]
    proc = subprocess.run(
        [sys.executable, "-m", "amcast.loadgen", "--socket", path, "--tag", "1", *extra],
        capture_output=True,
        text=True,
        timeout=args.duration + 60,
    )
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
        return {"error": lines[-1] if lines else f"exit {proc.returncode}"}
    report = json.loads(proc.stdout)
    report["duration"] = args.duration
    return report


# ---- the abuses ----------------------------------------------------------------------


CONNECT_TIMEOUT_S = 10.0


def _connect(path: str) -> socket.socket:
    """A connected unix socket; retries (bounded) while the listen backlog is full (a
    unix socket's connect answers EAGAIN then instead of waiting)."""
    deadline = time.monotonic() + CONNECT_TIMEOUT_S
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
        except BlockingIOError:
            s.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.001)
            continue
        s.settimeout(CONNECT_TIMEOUT_S)
        return s


HELLO = sp.encode_frame({"t": "hello", "v": sp.PROTOCOL_VERSION, "name": "abuser"})
JOIN = sp.encode_frame({"t": "join", "groups": [HONEST_GROUP], "id": -1})


def _open(path: str, n: int, first: bytes) -> list[socket.socket]:
    socks = []
    for _ in range(n):
        s = _connect(path)
        s.sendall(first)
        socks.append(s)
    return socks


class Abuse:
    """One phase's abuse: ``start`` puts it in place, ``stop`` ends what is left."""

    description = "none"

    def __init__(self, path: str, args: argparse.Namespace, max_frame: int) -> None:
        self.path, self.args, self.max_frame = path, args, max_frame
        self.socks: list[socket.socket] = []
        self.opened = 0

    def start(self) -> None:
        return

    def stop(self) -> None:
        for s in self.socks:
            with contextlib.suppress(OSError):
                s.close()


class IdleConnections(Abuse):
    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.description = f"{self.args.connections} idle greeted connections"

    def start(self) -> None:
        self.socks = _open(self.path, self.args.connections, HELLO)
        self.opened = len(self.socks)


class NeverRead(Abuse):
    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.description = f"{self.args.readers} members of the honest group never read"

    def start(self) -> None:
        self.socks = _open(self.path, self.args.readers, HELLO + JOIN)
        for s in self.socks:  # the smallest receive buffer: the daemon queues the rest
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.opened = len(self.socks)


class UnreadAnswers(Abuse):
    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.description = (
            f"{self.args.readers} clients write {len(STATUS_BURST) // 1000} KB of status "
            "requests each and never read the answers"
        )

    def start(self) -> None:
        self.socks = _open(self.path, self.args.readers, HELLO)
        for s in self.socks:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            with contextlib.suppress(OSError):  # the socket buffer takes most of it
                s.setblocking(False)
                s.send(STATUS_BURST)
        self.opened = len(self.socks)


STATUS_BURST = b"".join(sp.encode_frame({"t": "status", "id": i}) for i in range(10_000))


class Oversized(Abuse):
    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.description = (
            f"{self.args.flooders} threads writing {2 * self.max_frame >> 20}"
            " MiB frames, not reading"
        )
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.written = 0

    def _flood(self, s: socket.socket) -> None:
        size = 2 * self.max_frame
        body = b"\0" * (256 << 10)
        s.settimeout(0.5)
        try:
            while not self._stop.is_set():
                s.sendall(sp.PREFIX.pack(size))
                left = size
                while left and not self._stop.is_set():
                    try:
                        sent = s.send(body[: min(left, len(body))])
                    except TimeoutError:
                        continue
                    left -= sent
                    self.written += sent
        except OSError:
            return  # the daemon closed it

    def start(self) -> None:
        self.socks = _open(self.path, self.args.flooders, HELLO)
        self.opened = len(self.socks)
        for s in self.socks:
            t = threading.Thread(target=self._flood, args=(s,), daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(5)
        super().stop()


class HalfWritten(Abuse):
    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.description = (
            f"{self.args.stallers} frames left unfinished (half of them a "
            "length prefix only, half a half body of a largest frame)"
        )

    def start(self) -> None:
        size = self.max_frame - 1
        half = sp.PREFIX.pack(size) + b"\0" * (size // 2)
        for i in range(self.args.stallers):
            s = _connect(self.path)
            s.sendall(HELLO + (sp.PREFIX.pack(size) if i % 2 else half))
            self.socks.append(s)
        self.opened = len(self.socks)


class HalfClosed(Abuse):
    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.description = (
            f"{self.args.stallers} members of the honest group shut down "
            "their sending side and never read"
        )

    def start(self) -> None:
        self.socks = _open(self.path, self.args.stallers, HELLO + JOIN)
        for s in self.socks:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        # they must be members when the honest load starts: wait for the joins to apply
        deadline = time.monotonic() + SETTLE_S
        while time.monotonic() < deadline:
            members = status(self.path)["group_membership"].get("members", 0)
            if members >= self.args.stallers:
                break
            time.sleep(0.05)
        for s in self.socks:
            s.shutdown(socket.SHUT_WR)
        self.opened = len(self.socks)


ABUSES: dict[str, Callable[..., Abuse]] = {
    "baseline": Abuse,
    "connections": IdleConnections,
    "never-read": NeverRead,
    "unread-answers": UnreadAnswers,
    "oversized": Oversized,
    "half-written": HalfWritten,
    "half-closed": HalfClosed,
}


@contextlib.contextmanager
def fd_limit(need: int) -> Iterator[None]:
    """Raise this process's soft ``RLIMIT_NOFILE`` to ``need`` (up to the hard limit)
    while the abusers' sockets are open; the daemons inherit it too."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = need if hard == resource.RLIM_INFINITY else min(need, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    try:
        yield
    finally:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def run_phase(
    name: str, cluster: LocalCluster, args: argparse.Namespace, max_frame: int
) -> PhaseResult:
    path = cluster.sockets[0]
    pid = cluster.nodes[0].pid
    assert pid is not None
    abuse = ABUSES[name](path, args, max_frame)
    before = status(path)
    result = PhaseResult(name, abuse.description, rss_before=rss_bytes(pid))
    print(f"[bench abuse] {name}: {abuse.description} ...", file=sys.stderr, flush=True)
    sampler = RssSampler(pid)
    try:
        t0 = time.monotonic()
        abuse.start()
        result.setup_s = time.monotonic() - t0
        result.opened = abuse.opened
        result.paced = loadgen(path, args, paced=True)
        result.saturated = loadgen(path, args, paced=False)
    finally:
        abuse.stop()
        left = wait_clients(path, 0, SETTLE_S)
        result.rss_peak = sampler.stop()
    if left:
        result.failures.append(f"{left} client(s) still connected {SETTLE_S:g} s after")
    for part in (result.paced, result.saturated):
        if "error" in part:
            result.failures.append(f"honest client: {part['error']}")
    after = status(path)
    result.rss_after = rss_bytes(pid)
    bc, ac = before["counters"], after["counters"]
    result.disconnected = deltas(bc["clients_disconnected"], ac["clients_disconnected"])
    result.errors = deltas(bc["client_errors"], ac["client_errors"])
    return result


def run(args: argparse.Namespace) -> dict[str, Any]:
    phases = [p for p in str(args.phases).split(",") if p]
    unknown = sorted(set(phases) - set(PHASES))
    if unknown:
        raise SystemExit(
            f"amcast bench abuse: unknown phase(s) {', '.join(unknown)}; known: {', '.join(PHASES)}"
        )
    tmp = None
    if args.dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="amcast-abuse-", dir="/tmp")
        base = Path(tmp.name)
    else:
        base = Path(args.dir)
    t = args.timeout
    max_clients = max(args.connections, args.stallers, args.readers) + 16
    api = {
        "max_clients": max_clients,
        # its phases open connections in bursts, each writing hello without waiting
        "max_pending_hellos": max_clients,
        "hello_timeout_s": t,
        "frame_timeout_s": t,
        "slow_reader_timeout_s": t,
        "close_grace_s": t,
    }
    if args.queue_high:
        api["client_queue_high_bytes"] = args.queue_high
        api["client_queue_max_bytes"] = max(8 * args.queue_high, 4 << 20)
    results: list[PhaseResult] = []
    try:
        with fd_limit(max_clients + 256):
            cluster = LocalCluster(
                args.nodes,
                base / "cluster",
                protocol={"datagram_budget": 65000},
                extra={"api": api},
            )
            cluster.start()
            try:
                max_frame = status(cluster.sockets[0])["limits"]["max_frame_bytes"]
                for name in phases:
                    results.append(run_phase(name, cluster, args, max_frame))
            finally:
                cluster.stop()
    finally:
        if tmp is not None:
            tmp.cleanup()
    base_result = next((r for r in results if r.name == "baseline"), None)
    peak = max((r.rss_peak for r in results), default=0)
    notes = [
        f"{os.cpu_count()} CPUs shared by the daemon(s), the abusers (this process) and "
        "the honest client",
        f"daemon settings: api.max_clients and max_pending_hellos {max_clients}, "
        "api.hello_timeout_s, "
        f"frame_timeout_s, slow_reader_timeout_s and close_grace_s {t:g} s"
        + (
            f"; client_queue_high_bytes {args.queue_high}, client_queue_max_bytes "
            f"{api['client_queue_max_bytes']}"
            if args.queue_high
            else ""
        )
        + "; other keys default",
        "paced: --rate msgs/s for --duration s, own messages received (latency: send "
        "to delivery, the whole run); saturated: as fast as flow control allows",
        "RSS: VmRSS of node 0, sampled every 20 ms; 'after' is once every abuser is "
        "gone (Python keeps some freed memory for reuse)",
    ]
    notes.extend(f"{r.name}: {r.abuse}" for r in results if r.opened)
    for r in results:
        notes.extend(f"{r.name}: {f}" for f in r.failures)
    return {
        "title": f"amcast bench abuse: {args.nodes} daemon(s); honest client "
        f"{args.size}-byte messages, {args.rate:g} msgs/s paced then saturated, "
        f"{args.duration:g} s each, during each abuse",
        "tables": [
            {
                "title": "the daemon under abuse (node 0)",
                "columns": DAEMON_COLUMNS,
                "rows": [daemon_row(r) for r in results],
            },
            {
                "title": "the honest client meanwhile (x base: against the baseline phase)",
                "columns": HONEST_COLUMNS,
                "rows": [honest_row(r, base_result) for r in results],
            },
        ],
        "figures": {
            "peak RSS of node 0, any phase (MiB)": peak / MIB,
            **{f"{r.name}: setup s": r.setup_s for r in results if r.opened},
        },
        "notes": notes,
        "phases": [r.__dict__ for r in results],
    }
