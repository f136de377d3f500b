"""``amcast bench federation``: several clusters against one big cluster (broadcast and
filter), real daemons, the same load.

For each number of clusters k (``--clusters``) and share of global messages g
(``--global-share``), two set-ups of the same k x ``--nodes`` daemons on loopback:

- **federation**: k clusters (``amcast.localfederation``); a global message goes to the
  sender's cluster and the next one (``send(..., clusters=[own, next])``), a local one to
  the sender's cluster alone (its own order only);
- **broadcast and filter**: one cluster of all k x nodes daemons ordering everything;
  each "shard" is a group, a global message goes to the groups of the sender's shard and
  the next one, and every daemon orders every message.

One client process per shard (at its first daemon) joins the shard's group and sends
100-byte ``agreed`` messages closed loop (at most ``--window`` unconfirmed) for
``--duration`` seconds after ``--warmup``, and counts what it delivers. Reported: the
messages delivered per second summed over the shards' clients (local and global apart)
and the p50 latency of each client's own messages (send to own delivery).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import uvloop

from amcast.argtypes import non_negative, positive
from amcast.client import Client, ClientTimeout, DeliveredBatch
from amcast.localcluster import LocalCluster
from amcast.localfederation import LocalFederation

from .children import collect_children, spawn_child
from .options import group_sizes

NAME = "federation"
HELP = "several clusters against one cluster ordering everything (real daemons, same load)"
COLUMNS = ["clusters", "global %", "set-up", "local deliveries/s", "global deliveries/s",
           "local p50 ms", "global p50 ms"]
PAYLOAD = b"x" * 84


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--clusters", default="1,2,3", help="numbers of clusters (default 1,2,3)")
    p.add_argument("--nodes", type=int, default=2, help="daemons per cluster (default 2)")
    p.add_argument("--global-share", default="0,50,100",
                   help="percentages of global messages (default 0,50,100)")
    p.add_argument("--duration", type=positive, default=5.0, help="measured seconds")
    p.add_argument("--warmup", type=non_negative, default=1.0, help="seconds not measured")
    p.add_argument("--window", type=int, default=64, help="unconfirmed messages per client")
    p.add_argument("--child", help=argparse.SUPPRESS)


# ---- one shard's client process ---------------------------------------------------------
async def _shard(spec: dict[str, Any]) -> dict[str, Any]:
    client = await Client.connect(spec["socket"], name=f"shard-{spec['shard']}")
    me, nxt = spec["group"], spec["next_group"]
    await client.join(me, members=True)
    await client.wait_for_members(me, spec["members"], timeout=120)
    sent_at: dict[int, float] = {}
    lat = {"local": [], "global": []}
    count = {"local": 0, "global": 0}
    t0 = time.monotonic()
    w0, w1 = t0 + spec["warmup"], t0 + spec["warmup"] + spec["duration"]
    stop = asyncio.Event()

    async def receive() -> None:
        while not stop.is_set():
            try:
                event = await client.next_event(timeout=0.5)
            except ClientTimeout:  # look at the clock again
                continue
            if not isinstance(event, DeliveredBatch):
                continue
            now = time.monotonic()
            for d in event:
                kind = "global" if d.payload[:1] == b"g" else "local"
                if w0 <= now < w1:
                    count[kind] += 1
                if d.sender == client.node and d.client == client.client_id:
                    seq = int(d.payload[1:9])
                    start = sent_at.pop(seq, None)
                    if start is not None and w0 <= start < w1:
                        lat[kind].append(now - start)

    task = asyncio.create_task(receive())
    share, seq = spec["share"], 0
    step = 100 / share if share else 0.0
    next_global = 0.0
    while time.monotonic() < w1:
        while len(sent_at) >= spec["window"] and time.monotonic() < w1:
            await asyncio.sleep(0.0005)
        is_global = bool(share) and seq >= next_global
        if is_global:
            next_global += step
        body = (b"g" if is_global else b"l") + b"%08d" % seq + PAYLOAD
        sent_at[seq] = time.monotonic()
        if spec["federation"]:
            clusters = [spec["cluster"], spec["next_cluster"]] if is_global else None
            await client.send_wait(body, me, clusters=clusters)
        else:
            await client.send_wait(body, [me, nxt] if is_global else me)
        seq += 1
    await asyncio.sleep(1.0)
    stop.set()
    await task
    await client.close()

    def p50(xs: list[float]) -> float | None:
        return sorted(xs)[len(xs) // 2] if xs else None

    return {"count": count, "p50": {k: p50(v) for k, v in lat.items()}}


# ---- the run ----------------------------------------------------------------------------
def _row(k: int, share: int, setup: str, reports: list[dict[str, Any]],
         duration: float) -> list[Any]:
    def rate(kind: str) -> float:
        return round(sum(r["count"][kind] for r in reports) / duration)

    def ms(kind: str) -> float | None:
        values = [r["p50"][kind] for r in reports if r["p50"][kind] is not None]
        return round(1000 * sorted(values)[len(values) // 2], 2) if values else None

    return [k, share, setup, rate("local"), rate("global"), ms("local"), ms("global")]


def _one(k: int, shares: list[int], args: argparse.Namespace, base: Path) -> list[list[Any]]:
    rows = []
    names = [chr(ord("a") + i) for i in range(k)]
    common = {"duration": args.duration, "warmup": args.warmup, "window": args.window}
    total = args.warmup + args.duration + 120
    print(f"[bench federation] {k} clusters of {args.nodes} ...", file=sys.stderr, flush=True)
    fed = LocalFederation(k, args.nodes, base / f"fed-{k}", metrics=False)
    fed.start(timeout=120)
    try:
        for share in shares if k > 1 else [0]:  # one cluster: every message is local
            procs = [spawn_child(NAME, {**common, "federation": True, "share": share, "shard": i,
                             "socket": fed.sockets(name)[0], "group": "shard",
                             "next_group": "shard", "cluster": name,
                             "next_cluster": names[(i + 1) % k], "members": 1})
                     for i, name in enumerate(names)]
            reports = collect_children(procs, total, "shard")
            rows.append(_row(k, share, "federation", reports, args.duration))
    finally:
        fed.stop(timeout=20)
    print(f"[bench federation] one cluster of {k * args.nodes} ...", file=sys.stderr,
          flush=True)
    one = LocalCluster(k * args.nodes, base / f"one-{k}", metrics=False)
    one.start(timeout=120)
    try:
        for share in shares if k > 1 else [0]:
            procs = [spawn_child(NAME, {**common, "federation": False, "share": share, "shard": i,
                             "socket": one.sockets[i * args.nodes], "group": f"shard-{i}",
                             "next_group": f"shard-{(i + 1) % k}", "cluster": "",
                             "next_cluster": "", "members": 1})
                     for i in range(k)]
            reports = collect_children(procs, total, "shard")
            rows.append(_row(k, share, "broadcast and filter", reports, args.duration))
    finally:
        one.stop(timeout=20)
    return rows


def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.child:
        json.dump(uvloop.run(_shard(json.loads(args.child))), sys.stdout)
        sys.stdout.write("\n")
        sys.stdout.flush()
        os._exit(0)
    shares = [int(x) for x in args.global_share.split(",")]
    if any(not 0 <= s <= 100 for s in shares):
        raise ValueError("--global-share: percentages from 0 to 100")
    rows: list[list[Any]] = []
    with tempfile.TemporaryDirectory(prefix="amcast-bench-fed-") as tmp:
        for k in group_sizes(args.clusters, "--clusters", minimum=1):
            rows.extend(_one(k, shares, args, Path(tmp)))
    return {
        "title": f"amcast bench federation: {args.nodes} daemons per cluster, one closed-loop "
                 f"client per cluster (window {args.window}), {args.duration:.0f} s after "
                 f"{args.warmup:.0f} s warm-up",
        "tables": [{"title": "several clusters against one cluster ordering everything",
                    "columns": COLUMNS, "rows": rows}],
        "figures": {},
        "notes": [f"{os.cpu_count()} CPUs shared by every process; {time.strftime('%F')}",
                  "a global message goes to the sender's cluster (shard) and the next one",
                  "msgs/s: deliveries in the window summed over the shards' clients"],
    }
