"""``amcast bench cluster``: workload W1 on real daemons over loopback multicast.

Theory of operation, for each N in ``--nodes`` (default 4 and 8):

1. *Throughput run*: start N daemons (``LocalCluster``), then one load-generator process
   per node (``python -m amcast.loadgen``) sending ``--size``-byte ``agreed`` messages as
   fast as flow control allows for warm-up + ``--duration`` seconds (with ``--receive``,
   the default, each client also joins the group and consumes every delivery). After
   the warm-up and at the end, the bench samples every daemon's ``status`` (messages
   delivered, its clock) and its CPU time (``/proc/PID/stat``). Each message is ordered
   once and delivered once per node, so a node's delivered-messages rate *is* the
   ordered distinct-messages rate it sees; the slowest node bounds the cluster. CPU
   seconds per message = all daemons' CPU seconds / messages ordered (slowest node).
2. *Latency run*: a fresh cluster, one client on node 0 sending ``--latency-rate``
   messages/s (default 1,000) for ``--latency-duration`` seconds; the client measures
   send-to-delivery latency of its own messages (p50/p99) at the sender.

Every load is bounded in time; traffic stays on 127.0.0.1 and a 239.255.x.y group.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from amcast.client import BlockingClient
from amcast.localcluster import LocalCluster

NAME = "cluster"
HELP = "W1: N daemons on loopback multicast, ordered msgs/s, CPU s/msg, latency p50/p99"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nodes", default="4,8", help="comma-separated cluster sizes (default 4,8)")
    p.add_argument("--duration", type=float, default=10.0, help="measured seconds (default 10)")
    p.add_argument("--warmup", type=float, default=3.0, help="seconds before measuring")
    p.add_argument("--size", type=int, default=100, help="payload bytes (default 100)")
    p.add_argument("--no-receive", dest="receive", action="store_false",
                   help="clients only send (do not join the group and consume deliveries)")
    p.add_argument("--latency-rate", type=float, default=1000.0)
    p.add_argument("--latency-duration", type=float, default=5.0)
    p.add_argument("--skip-latency", action="store_true")
    p.add_argument("--protocol", action="append", default=[], metavar="KEY=VALUE",
                   help="[protocol] setting for every daemon (repeatable)")
    p.add_argument("--dir", type=Path, help="keep configs and logs here (default: a temp dir)")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def protocol_settings(pairs: list[str]) -> dict[str, Any]:
    from amcast.commands.cluster import parse_protocol

    return {"datagram_budget": 65000, **parse_protocol(pairs)}


def sample(cluster: LocalCluster) -> list[dict[str, Any]]:
    out = []
    for n in cluster.nodes:
        with BlockingClient(n.socket, name="bench-probe") as c:
            st = c.status()
        assert n.pid is not None
        out.append({"now": st["now"], "delivered": st["counters"]["messages_delivered"],
                    "cpu": cpu_seconds(n.pid), "drops": st["counters"]["drops"],
                    "engine": st["engine"]})
    return out


def _loadgen(socket: str, tag: int, extra: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "amcast.loadgen", "--socket", socket, "--tag", str(tag), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _finish(procs: list[subprocess.Popen[str]],
            timeout: float) -> tuple[list[dict[str, Any]], list[str]]:
    """Reports of the load generators that finished, and one line per one that failed
    (e.g. a receiving client the daemon disconnected as a slow reader on an overloaded
    host: the daemons' rates stay valid, the failure is reported, not hidden)."""
    reports, failures = [], []
    for k, p in enumerate(procs):
        out, err = p.communicate(timeout=timeout)
        if p.returncode != 0:
            lines = [ln for ln in err.strip().splitlines() if ln.strip()]
            failures.append(f"load generator {k} exited {p.returncode}: "
                            f"{lines[-1] if lines else 'no output'}")
            continue
        reports.append(json.loads(out))
    return reports, failures


def throughput(n: int, args: argparse.Namespace, base: Path) -> dict[str, Any]:
    cluster = LocalCluster(n, base / f"throughput-n{n}", protocol=protocol_settings(args.protocol))
    print(f"[bench cluster] N={n}: starting daemons ...", file=sys.stderr, flush=True)
    cluster.start()
    try:
        total = args.warmup + args.duration
        extra = ["--duration", str(total), "--size", str(args.size), "--linger", "0"]
        if args.receive:
            extra.append("--receive")
        procs = [_loadgen(s, i, extra) for i, s in enumerate(cluster.sockets)]
        start = time.monotonic()
        print(f"[bench cluster] N={n}: {n} senders for {total:.0f} s "
              f"(warm-up {args.warmup:.0f} s) ...", file=sys.stderr, flush=True)
        time.sleep(args.warmup)
        first = sample(cluster)
        time.sleep(max(0.0, start + total - time.monotonic()))
        last = sample(cluster)
        load_cpu = sum(cpu_seconds(p.pid) for p in procs if p.poll() is None)
        wall = time.monotonic() - start
        reports, failures = _finish(procs, timeout=60)
    finally:
        cluster.stop()
    rates = [(b["delivered"] - a["delivered"]) / (b["now"] - a["now"])
             for a, b in zip(first, last, strict=True)]
    ordered = min(b["delivered"] - a["delivered"] for a, b in zip(first, last, strict=True))
    cpu = sum(b["cpu"] - a["cpu"] for a, b in zip(first, last, strict=True))
    drops: dict[str, int] = {}
    for s in last:
        for k, v in s["drops"].items():
            drops[k] = drops.get(k, 0) + v
    return {
        "n": n, "rates": rates, "slowest": min(rates), "mean": sum(rates) / len(rates),
        "cpu_per_msg": cpu / ordered if ordered else float("nan"),
        "daemon_cpu_s": cpu, "loadgen_cpu_s": load_cpu, "wall_s": wall,
        "sent": sum(r["sent"] for r in reports), "drops": drops,
        "retransmissions": sum(int(s["engine"].get("retransmissions", 0)) for s in last),
        "failures": failures,
    }


def latency(n: int, args: argparse.Namespace, base: Path) -> dict[str, Any]:
    cluster = LocalCluster(n, base / f"latency-n{n}", protocol=protocol_settings(args.protocol))
    print(f"[bench cluster] N={n}: latency run, {args.latency_rate:.0f} msgs/s from node 0 for "
          f"{args.latency_duration:.0f} s ...", file=sys.stderr, flush=True)
    cluster.start()
    try:
        proc = _loadgen(cluster.sockets[0], 0, [
            "--rate", str(args.latency_rate), "--duration", str(args.latency_duration),
            "--size", str(args.size), "--receive", "--linger", "0.5",
        ])
        reports, failures = _finish([proc], timeout=args.latency_duration + 60)
        if failures:
            raise RuntimeError(f"latency run failed: {failures[0]}")
        (report,) = reports
    finally:
        cluster.stop()
    return report


def run(args: argparse.Namespace) -> dict[str, Any]:
    sizes = [int(x) for x in str(args.nodes).split(",") if x]
    tmp = None
    if args.dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="amcast-bench-")
        base = Path(tmp.name)
    else:
        base = args.dir
    rows, lat_rows = [], []
    figures: dict[str, Any] = {}
    notes = [f"{os.cpu_count()} CPUs shared by all daemons and load generators"]
    try:
        for n in sizes:
            t = throughput(n, args, base)
            rows.append([n, t["slowest"], t["mean"], t["cpu_per_msg"] * 1e6, t["daemon_cpu_s"],
                         t["loadgen_cpu_s"] / t["wall_s"] * args.duration, t["retransmissions"],
                         sum(t["drops"].values())])
            figures[f"N={n} ordered msgs/s (slowest node)"] = t["slowest"]
            figures[f"N={n} per-node msgs/s"] = ", ".join(f"{r:,.0f}" for r in t["rates"])
            figures[f"N={n} CPU s/msg (all daemons)"] = t["cpu_per_msg"]
            notes.extend(f"N={n}: {line}" for line in t["failures"])
            if not args.skip_latency:
                lat = latency(n, args, base)
                p50 = lat.get("latency_p50_s", float("nan")) * 1e3
                p99 = lat.get("latency_p99_s", float("nan")) * 1e3
                lat_rows.append([n, lat["latency_samples"], p50, p99])
                figures[f"N={n} latency p50 ms"] = p50
                figures[f"N={n} latency p99 ms"] = p99
    finally:
        if tmp is not None:
            tmp.cleanup()
    return {
        "title": f"amcast bench cluster (W1): {args.size}-byte agreed messages, every node "
                 f"sending, {args.duration:.0f} s after {args.warmup:.0f} s warm-up"
                 f"{'' if args.receive else ', clients not receiving'}",
        "tables": [
            {"title": "throughput", "columns": ["N", "slowest msgs/s", "mean msgs/s",
                                                "CPU us/msg", "daemon CPU s", "client CPU s",
                                                "retransmissions", "drops"], "rows": rows},
            *([{"title": f"latency at the sender ({args.latency_rate:.0f} msgs/s from node 0)",
                "columns": ["N", "samples", "p50 ms", "p99 ms"], "rows": lat_rows}]
              if lat_rows else []),
        ],
        "figures": figures,
        "notes": notes,
    }
