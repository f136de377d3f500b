"""``amcast bench views``: what a view change costs, in the simulator (virtual time).

Full Nodes with the default settings (suspect_timeout 0.8 s, heartbeats every 0.1 s)
over the simulated network (0.5 ms one-way delay, 0.2 ms jitter, no loss), every node
sending 20 agreed messages/s. For n = 4, 8 and 16 and many seeds:

- **crash**: one member (the coordinator in every fourth seed) stops at t = 2 s; time
  until every survivor has installed the view without it (p50 and max over seeds), the
  datagrams the view change cost (membership datagrams, plus the flush's nacks and
  repairs, from the crash to the last install, all members together; senders pause
  meanwhile), and the messages the flush delivered per member (the rest of the old
  view, ``FlushCompleted``) and those reported in doubt;
- **restart**: the crashed member starts again (state file kept) at t = 3.5 s: time
  until every member has installed the view with its new incarnation;
- **leave**: a member leaves gracefully at t = 5 s: time until the view without it.

All figures are exact for the seed (virtual time, seeded randomness); only the wall
time of the run depends on the machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from typing import Any

from amcast.protocols.events import FlushCompleted
from amcast.protocols.node_config import NodeConfig
from amcast.protocols.simulation.checkers import Proc
from amcast.protocols.simulation.cluster import Cluster, Workload
from amcast.protocols.simulation.faults import Fault
from amcast.protocols.vocabulary import ServiceLevel

from amcast.argtypes import whole

from .options import group_sizes

NAME = "views"
HELP = "time to a new view after a crash, restart or leave, and what a view change costs"
KEY = b"benchmark-group-key!"
CRASH_AT, RESTART_AT, LEAVE_AT = 2.0, 3.5, 5.0
RATE = 20.0
"""Agreed messages per second per node (100 bytes each)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seeds", type=whole(1), default=20, help="seeds per cluster size")
    parser.add_argument("--sizes", default="4,8,16", help="cluster sizes, comma-separated")
    parser.add_argument("--quick", action="store_true", help="5 seeds per size (CI smoke test)")


def _progress(line: str) -> None:
    print(f"[bench views] {line}", file=sys.stderr, flush=True)


def _when_all(c: Cluster, procs: list[Proc], after: float, pred: Any) -> float | None:
    """When the last of ``procs`` installed a view matching ``pred`` after ``after``."""
    times = []
    for p in procs:
        t = min((v.time for v in c.views.get(p, []) if v.time > after and pred(v)), default=None)
        if t is None:
            return None
        times.append(t)
    return max(times)


def _sent(cluster: Cluster) -> dict[str, int]:
    out: dict[str, int] = {}
    for node in cluster.all_nodes:
        for kind, count in node.stats.datagrams_sent.items():
            out[kind] = out.get(kind, 0) + count
    return out


def one_seed(n: int, seed: int) -> dict[str, float]:
    cfg = NodeConfig(group_key=KEY)
    cluster = Cluster(n, seed=seed, node_config=cfg, bootstrap="join")
    victim = 0 if seed % 4 == 0 else 1 + seed % (n - 1)
    leaver = (victim + 1) % n
    cluster.schedule(Fault(CRASH_AT, "crash", (victim,)))
    cluster.schedule(Fault(RESTART_AT, "start", (victim,)))
    cluster.schedule(Fault(LEAVE_AT, "leave", (leaver,), 3.0))

    def load(seconds: float) -> Workload:
        return Workload(messages_per_node=int(RATE * seconds), interval=1 / RATE,
                        services=((ServiceLevel.AGREED, 1.0),), min_size=100, max_size=100,
                        large_fraction=0.0)

    survivors = [Proc(i) for i in range(n) if i != victim]
    cluster.run(load(CRASH_AT), max_time=CRASH_AT)
    before = _sent(cluster)
    while (_when_all(cluster, survivors, CRASH_AT, lambda v: victim not in v.members) is None
           and cluster.now < CRASH_AT + 5):
        cluster.advance(cluster.now + 0.002)
    after = _sent(cluster)
    cost = sum(after[k] - before[k] for k in ("membership", "nack", "repair"))
    flush_delivered = [ev.delivered for i in range(n) if i != victim
                       for ev in cluster.other_events[i] if isinstance(ev, FlushCompleted)]
    result = cluster.run(load(4.0), max_time=12.0, settle=1.0)
    if not result.ok:
        raise RuntimeError(f"n={n} seed={seed}: a property failed: "
                           f"{ {k: v[:2] for k, v in result.violations.items() if v} }")
    crash = _when_all(cluster, survivors, CRASH_AT, lambda v: victim not in v.members)
    rejoin = _when_all(cluster, [*survivors, Proc(victim, 1)], RESTART_AT,
                       lambda v: victim in v.members)
    stayers = [p for p in [*survivors, Proc(victim, 1)] if p.node != leaver]
    leave = _when_all(cluster, stayers, LEAVE_AT, lambda v: leaver not in v.members)
    if crash is None or rejoin is None or leave is None:
        raise RuntimeError(f"n={n} seed={seed}: a view change did not complete")
    return {
        "crash_s": crash - CRASH_AT,
        "restart_s": rejoin - RESTART_AT,
        "leave_s": leave - LEAVE_AT,
        "cost": cost,
        "flush_delivered": statistics.mean(flush_delivered) if flush_delivered else 0.0,
        "in_doubt": sum(nd.stats.messages_in_doubt for nd in cluster.all_nodes),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    sizes = group_sizes(args.sizes, "--sizes", minimum=2)
    seeds = range(1, (5 if args.quick else args.seeds) + 1)
    rows = []
    figures: dict[str, Any] = {}
    for n in sizes:
        samples = []
        for k, seed in enumerate(seeds, 1):
            samples.append(one_seed(n, seed))
            if k % 10 == 0 or k == len(seeds):
                _progress(f"n={n}: {k}/{len(seeds)} seeds")

        def col(name: str, s: list[dict[str, float]] = samples) -> list[float]:
            return sorted(x[name] for x in s)

        crash, restart, leave = col("crash_s"), col("restart_s"), col("leave_s")
        row = [n, statistics.median(crash) * 1000, crash[-1] * 1000,
               statistics.median(restart) * 1000, restart[-1] * 1000,
               statistics.median(leave) * 1000, leave[-1] * 1000,
               statistics.mean(col("cost")),
               statistics.mean(col("flush_delivered")), sum(col("in_doubt"))]
        rows.append(row)
        figures[f"crash to new view p50 ms, n={n}"] = row[1]
        figures[f"crash to new view max ms, n={n}"] = row[2]
        figures[f"restart to re-admission p50 ms, n={n}"] = row[3]
        figures[f"graceful leave to new view p50 ms, n={n}"] = row[5]
    return {
        "title": "amcast bench views: view changes in the simulator (default settings, "
                 "0.5 ms one-way delay, 20 msgs/s per node)",
        "tables": [{
            "title": f"{len(seeds)} seeds per size; times from the fault to the last member's "
                     "install",
            "columns": ["n", "crash p50 ms", "crash max ms", "restart p50 ms",
                        "restart max ms", "leave p50 ms", "leave max ms",
                        "datagrams per crash view change",
                        "messages delivered by the flush (per member)", "in doubt"],
            "rows": rows,
        }],
        "figures": figures,
        "notes": [
            "crash: suspect_timeout (0.8 s) of silence, then one agreement round "
            "(prepare/promise, accept/accepted, install) and the flush",
            "restart: the new incarnation announces itself at once; the members wait two "
            "heartbeat intervals for the old one (a duplicate id would still be heard), "
            "then take it in",
            "every property checker ran on every seed",
        ],
    }
