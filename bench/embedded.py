"""``amcast bench embedded``: light-load latency and CPU of the embedded member against the
daemon, in one run.

The same N-node group twice, from the same configuration files (``LocalCluster``): once
as N ``amcastd`` processes with one client process each (the default deployment), once
as N application processes that each embed their member (``amcast.member.Member``).
Every node joins the group and waits for all N (the start-up barrier); node 0 then
sends ``--size``-byte agreed messages at ``--rate`` for ``--warmup`` + ``--duration``
seconds and measures each message's latency from its send to its own delivery (the
load generator's clock); every node receives everything. Reported: the sender's p50 and
p99 after the warm-up, and the CPU of every process (daemons and clients, or the
embedding processes) per ordered message over the run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import uvloop

from amcast.argtypes import non_negative, positive
from amcast.client import Client
from amcast.loadgen import MIN_SIZE, LoadReport, Receiver, send_load
from amcast.localcluster import LocalCluster
from amcast.member import Member

from .children import collect_children, spawn_child
from .cluster import cpu_seconds, protocol_settings
from .options import group_sizes

NAME = "embedded"
HELP = "latency and CPU at light load: embedded members against daemons (same run)"
GROUP = "bench-embedded"
COLUMNS = ["N", "mode", "p50 ms", "p99 ms", "samples", "CPU-s, all processes",
           "CPU us / ordered msg", "delivered at every node"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nodes", default="4", help="comma-separated group sizes (default 4)")
    p.add_argument("--rate", type=positive, default=1000.0, help="msgs/s from node 0")
    p.add_argument("--duration", type=positive, default=5.0, help="measured seconds")
    p.add_argument("--warmup", type=non_negative, default=1.0, help="seconds not measured")
    p.add_argument("--size", type=int, default=100, help="payload bytes (at least 16)")
    p.add_argument("--protocol", action="append", default=[], metavar="KEY=VALUE",
                   help="a [protocol] setting for every node (repeatable)")
    p.add_argument("--child", help=argparse.SUPPRESS)  # the JSON arguments of one node


# ---- one node's process ---------------------------------------------------------------
async def _node(spec: dict[str, Any]) -> dict[str, Any]:
    member = None
    if spec["config"]:
        member = await Member.start(spec["config"], name=f"bench-{spec['tag']}")
        client = member.client
    else:
        client = await Client.connect(spec["socket"], name=f"bench-{spec['tag']}")
    report = LoadReport(node=client.node)
    receiver = Receiver(client, report, tag=spec["tag"])
    await client.join(GROUP, members=True)
    await client.wait_for_members(GROUP, spec["n"], timeout=120)
    task = asyncio.create_task(receiver.run())
    total = spec["warmup"] + spec["duration"]
    if spec["tag"] == 0:
        receiver.measure_latency = True
        await send_load(client, group=GROUP, size=spec["size"], duration=total,
                        rate=spec["rate"], tag=0, report=report)
        await receiver.until(report.sent)
        skip = int(spec["warmup"] * spec["rate"])
        report.latencies = report.latencies[skip:]
    else:  # until the sender is done and nothing more comes
        await asyncio.sleep(total)
        seen = -1
        while report.delivered != seen:
            seen = report.delivered
            await asyncio.sleep(1.0)
    task.cancel()
    out = report.summary()
    await client.close()
    if member is not None:
        await member.stop()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    out["cpu_s"] = usage.ru_utime + usage.ru_stime
    return out


def _child(arg: str) -> dict[str, Any]:
    return uvloop.run(_node(json.loads(arg)))


# ---- the run ----------------------------------------------------------------------------
def _one(n: int, mode: str, args: argparse.Namespace, base: Path) -> list[Any]:
    cluster = LocalCluster(n, base / f"{mode}-n{n}", protocol=protocol_settings(args.protocol),
                           metrics=False)
    total = args.warmup + args.duration
    spec = {"n": n, "rate": args.rate, "duration": args.duration, "warmup": args.warmup,
            "size": args.size}
    print(f"[bench embedded] N={n} {mode} ...", file=sys.stderr, flush=True)
    daemon_cpu = 0.0
    if mode == "daemon":
        cluster.start()
        try:
            procs = [spawn_child(NAME, {**spec, "tag": i, "config": "", "socket": s})
                     for i, s in enumerate(cluster.sockets)]
            reports = collect_children(procs, total + 180, "node")
            daemon_cpu = sum(cpu_seconds(node.pid) for node in cluster.nodes if node.pid)
        finally:
            cluster.stop()
    else:
        cluster.write_configs()
        procs = [spawn_child(NAME, {**spec, "tag": i, "config": str(node.config), "socket": ""})
                 for i, node in enumerate(cluster.nodes)]
        reports = collect_children(procs, total + 180, "node")
    sender = reports[0]
    cpu = daemon_cpu + sum(r["cpu_s"] for r in reports)
    ordered = sender["sent"]
    everywhere = min(r["delivered"] for r in reports) >= ordered
    return [n, mode, round(1000 * sender.get("latency_p50_s", float("nan")), 3),
            round(1000 * sender.get("latency_p99_s", float("nan")), 3),
            sender.get("latency_samples", 0), round(cpu, 2),
            round(1e6 * cpu / max(1, ordered), 1), everywhere]


def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.child:
        json.dump(_child(args.child), sys.stdout)
        sys.stdout.write("\n")
        sys.stdout.flush()
        os._exit(0)  # the child's report is all it owes; skip the parent's report
    if args.size < MIN_SIZE:
        raise ValueError(f"--size must be at least {MIN_SIZE}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="amcast-bench-embedded-") as tmp:
        for n in group_sizes(args.nodes, "--nodes", minimum=2):
            for mode in ("daemon", "embedded"):
                rows.append(_one(n, mode, args, Path(tmp)))
    return {
        "title": f"amcast bench embedded: {args.size}-byte agreed messages at "
                 f"{args.rate:.0f} msgs/s from node 0, {args.duration:.0f} s after "
                 f"{args.warmup:.0f} s warm-up",
        "tables": [{"title": "daemons and their clients against embedded members",
                    "columns": COLUMNS, "rows": rows}],
        "figures": {f"N={r[0]} {r[1]} p50 ms": r[2] for r in rows},
        "notes": [f"{os.cpu_count()} CPUs shared by every process; {time.strftime('%F')}",
                  "CPU: every process of the run, start-up and the barrier included"],
    }
