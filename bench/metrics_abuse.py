"""``amcast bench metrics-abuse``: a daemon's metrics endpoint under abuse, measured.

Theory of operation: start ``--nodes`` daemons (``LocalCluster``, node 0 is the target,
default metrics settings) and run four phases of ``--duration`` seconds each. In every
phase a load generator (``python -m amcast.loadgen``) sends ``--rate`` messages/s of
``--size`` bytes through node 0 and receives them, measuring send-to-delivery latency
(p50/p99 of the phase); a sampler thread reads node 0's ``/proc/PID/status`` every 50 ms
(threads, RSS) and its CPU time at both ends. The phases:

1. *baseline*: nothing else;
2. *half-open*: ``--half-open`` (1,000) TCP connections to node 0's metrics port that
   never send a byte, opened at the start of the phase and held to its end (then
   counted: how many the daemon had closed);
3. *scrape storm*: ``--scrapers`` (50) concurrent clients, each scraping ``/metrics``
   in a loop (a new connection per scrape) for the whole phase;
4. *after*: nothing again (does the daemon come back to its baseline?).

Then one last scrape reads the endpoint's own counters (connections refused by reason,
requests by code, renders). The attackers run in this process (one thread for the
half-open sockets, one asyncio loop for the scrapers), so they compete with the daemon
for the host's cores as a local attacker would: compare the latency of phases on the same
host, not across hosts. Every phase is bounded in time; traffic stays on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import urllib.request
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from amcast.argtypes import positive, whole
from amcast.loadgen import MIN_SIZE
from amcast.localcluster import LocalCluster

from .cluster import cpu_seconds

NAME = "metrics-abuse"
HELP = (
    "a daemon under 1,000 half-open metrics connections and a scrape storm: threads, RSS, latency"
)
SAMPLE_S = 0.05
ENDPOINT_FAMILIES = frozenset(
    {
        "amcast_metrics_connections_refused",
        "amcast_metrics_requests",
        "amcast_metrics_renders",
        "amcast_metrics_accept_pauses",
    }
)
"""The endpoint's own counters (``amcast.daemon.metrics_http.EndpointMetrics``)."""
PHASES = ("baseline", "half-open", "scrape storm", "after")
COLUMNS = [
    "phase",
    "latency samples",
    "p50 ms",
    "p99 ms",
    "threads max",
    "RSS start MiB",
    "RSS peak MiB",
    "RSS end MiB",
    "daemon CPU s",
    "attack",
]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--duration", type=positive, default=10.0, help="seconds per phase (10)")
    p.add_argument("--half-open", type=whole(1), default=1000, help="connections held (1000)")
    p.add_argument("--scrapers", type=whole(1), default=50, help="concurrent scrapers (50)")
    p.add_argument("--rate", type=positive, default=500.0, help="messages/s sent (500)")
    p.add_argument("--size", type=whole(MIN_SIZE), default=100, help="payload bytes (100)")
    p.add_argument("--nodes", type=whole(1), default=1, help="daemons (1; node 0 is attacked)")
    p.add_argument("--dir", type=Path, help="keep configs and logs here (default: temp dir)")


def proc_status(pid: int) -> tuple[int, int]:
    """(threads, RSS bytes) of a process, from ``/proc/PID/status``."""
    threads = rss = 0
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("Threads:"):
                threads = int(line.split()[1])
            elif line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
    return threads, rss


class Sampler(threading.Thread):
    """Threads and RSS of ``pid`` every ``SAMPLE_S`` until ``stop``."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.samples: list[tuple[int, int]] = [proc_status(pid)]
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(SAMPLE_S):
            self.samples.append(proc_status(self.pid))

    def stop(self) -> dict[str, float]:
        self.done.set()
        self.join()
        self.samples.append(proc_status(self.pid))
        rss = [r for _, r in self.samples]
        return {
            "threads_max": max(t for t, _ in self.samples),
            "rss_start": rss[0],
            "rss_peak": max(rss),
            "rss_end": rss[-1],
        }


class HalfOpen:
    """``n`` connections that never send a byte, held until ``close``."""

    def __init__(self, port: int, n: int) -> None:
        self.socks: list[socket.socket] = []
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = n + 512
        if soft < want:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
        self.failed = 0
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            code = s.connect_ex(("127.0.0.1", port))
            if code not in (0, errno.EINPROGRESS):
                self.failed += 1
                s.close()
                continue
            self.socks.append(s)

    def close(self) -> dict[str, int]:
        """Close them all; how many were opened, and how many the daemon had closed."""
        closed = 0
        for s in self.socks:
            try:
                closed += s.recv(1, socket.MSG_PEEK) == b""
            except BlockingIOError:
                pass  # still open
            except OSError:
                closed += 1  # reset by the daemon, or never established
            s.close()
        return {"opened": len(self.socks), "closed_by_daemon": closed}


class Storm(threading.Thread):
    """``n`` scrapers in a loop on their own event loop until ``stop``."""

    def __init__(self, port: int, n: int) -> None:
        super().__init__(daemon=True)
        self.port, self.n = port, n
        self.ok = self.failed = 0
        self._halt = threading.Event()

    async def _scraper(self) -> None:
        request = b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        while not self._halt.is_set():
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
                writer.write(request)
                data = await asyncio.wait_for(reader.read(), 10)
                writer.close()
                if data[:12] in (b"HTTP/1.1 200", b"HTTP/1.0 200"):
                    self.ok += 1
                else:
                    self.failed += 1
            except (OSError, TimeoutError):
                self.failed += 1

    def run(self) -> None:
        async def main() -> None:
            await asyncio.gather(*(self._scraper() for _ in range(self.n)))

        asyncio.run(main())

    def stop(self) -> dict[str, int]:
        self._halt.set()
        self.join(30)
        return {"scrapes_ok": self.ok, "scrapes_refused": self.failed}


def _loadgen(sock: str, args: argparse.Namespace) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "amcast.loadgen",
            "--socket",
            sock,
            "--rate",
            str(args.rate),
            "--duration",
            str(args.duration),
            "--size",
            str(args.size),
            "--receive",
            "--linger",
            "0.5",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def phase(name: str, cluster: LocalCluster, args: argparse.Namespace) -> dict[str, Any]:
    node = cluster.nodes[0]
    assert node.pid is not None
    print(f"[bench metrics-abuse] {name}: {args.duration:.0f} s ...", file=sys.stderr, flush=True)
    sampler = Sampler(node.pid)
    cpu0 = cpu_seconds(node.pid)
    sampler.start()
    gen = _loadgen(node.socket, args)
    half = HalfOpen(node.metrics_port, args.half_open) if name == "half-open" else None
    storm = Storm(node.metrics_port, args.scrapers) if name == "scrape storm" else None
    if storm is not None:
        storm.start()
    try:
        out, err = gen.communicate(timeout=args.duration + 60)
    finally:
        attack = half.close() if half else storm.stop() if storm else {}
        figures = sampler.stop()
    if gen.returncode != 0:
        raise RuntimeError(f"load generator failed in phase {name}: {err.strip()[-300:]}")
    report = json.loads(out)
    return {
        "phase": name,
        "report": report,
        "cpu_s": cpu_seconds(node.pid) - cpu0,
        "attack": attack,
        **figures,
    }


def endpoint_counters(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name not in ENDPOINT_FAMILIES:
            continue
        for s in family.samples:
            if s.name.endswith("_created"):
                continue
            label = ",".join(f"{k}={v}" for k, v in s.labels.items())
            out[f"{s.name}{{{label}}}" if label else s.name] = s.value
    return out


def row(p: dict[str, Any]) -> list[Any]:
    r = p["report"]
    mib = 1 << 20
    return [
        p["phase"],
        r.get("latency_samples", 0),
        r.get("latency_p50_s", float("nan")) * 1e3,
        r.get("latency_p99_s", float("nan")) * 1e3,
        p["threads_max"],
        p["rss_start"] / mib,
        p["rss_peak"] / mib,
        p["rss_end"] / mib,
        p["cpu_s"],
        describe_attack(p["attack"]),
    ]


def describe_attack(a: dict[str, int]) -> str:
    if "opened" in a:
        return (
            f"{a['opened']} opened, {a['closed_by_daemon']} closed by the daemon, "
            f"{a['opened'] - a['closed_by_daemon']} still open"
        )
    if "scrapes_ok" in a:
        return f"{a['scrapes_ok']} scrapes answered 200, {a['scrapes_refused']} refused or failed"
    return ""


def run(args: argparse.Namespace) -> dict[str, Any]:
    tmp = None
    if args.dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="amcast-bench-")
        base = Path(tmp.name)
    else:
        base = args.dir
    cluster = LocalCluster(args.nodes, base / "metrics-abuse")
    print(f"[bench metrics-abuse] starting {args.nodes} daemon(s) ...", file=sys.stderr, flush=True)
    cluster.start()
    try:
        phases = [phase(name, cluster, args) for name in PHASES]
        counters = endpoint_counters(cluster.nodes[0].metrics_port)
    finally:
        cluster.stop()
        if tmp is not None:
            tmp.cleanup()
    base_p50 = phases[0]["report"].get("latency_p50_s", float("nan"))
    figures: dict[str, Any] = {}
    for p in phases[1:]:
        p50 = p["report"].get("latency_p50_s", float("nan"))
        figures[f"{p['phase']}: p50 / baseline p50"] = p50 / base_p50 if base_p50 else None
    figures.update(counters)
    return {
        "title": f"amcast bench metrics-abuse: node 0 of {args.nodes}, {args.rate:.0f} "
        f"msgs/s of {args.size} bytes, {args.duration:.0f} s per phase",
        "tables": [
            {
                "title": "node 0 per phase (latency: send to delivery at node 0)",
                "columns": COLUMNS,
                "rows": [row(p) for p in phases],
            }
        ],
        "figures": figures,
        "notes": [
            f"{os.cpu_count()} CPUs shared by the daemons, the load generator and the "
            "attackers (this process)",
            f"half-open: {args.half_open} connections that send nothing; scrape storm: "
            f"{args.scrapers} clients, a new connection per scrape",
        ],
        "phases": [
            {k: v for k, v in p.items() if k != "report"}
            | {
                "latency_p50_s": p["report"].get("latency_p50_s"),
                "latency_p99_s": p["report"].get("latency_p99_s"),
            }
            for p in phases
        ],
    }
