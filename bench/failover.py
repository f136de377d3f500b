"""``amcast bench failover``: kill -9, restart and SIGTERM under load, timed from the clients.

Theory of operation, for each N in ``--nodes`` (default 4 and 8): start N daemons on
loopback multicast with amcast's default settings (``suspect_timeout`` 0.8 s), one
recording client per node (``amcast.faultload.Recorder``, ``keep=False``) sending
``--rate`` messages/s each (paced; default 200) and receiving every message. Then
``--kills`` times (default 20): pick a random daemon, ``kill -9`` it, and measure

- *kill to new view*: from the ``time.monotonic()`` just before the signal to the
  arrival of the first primary ``view`` frame without the victim at the *last* survivor's
  client (the moment every survivor has it);
- *delivery gap*: the longest interval without any ``deliver`` frame at a survivor's
  client around the kill (the worst survivor);
- *back to 90%*: at each survivor, the earliest time after the kill from which each of
  the next three 200 ms windows delivers at least 90% of the rate of the survivors'
  messages in the second before the kill (the killed daemon's clients no longer send,
  so its share is left out); the worst survivor;
- *re-admission*: the victim is started again (``LocalCluster.restart``: same config
  and state directory, as ``Restart=on-failure`` does); from its ``READY=1`` to the
  arrival of the view with it at the last survivor's client (its Python start-up, shown
  apart, is not amcast's);

and ``--leaves`` times (default 5) ``SIGTERM`` a random daemon under the same load:
*graceful leave* is the time from the signal to the view without it at the last
survivor's client (no suspicion timeout: the daemon says goodbye); it is restarted.

Each sample is one fault; the report gives p50, p99 and max per N, the count of view
changes beyond the two per fault (a load-induced exclusion, a spurious change), and the
targets (kill -9 to new view p50 < 1 s, re-admission < 1 s, graceful leave < 50 ms).
Progress goes to stderr, one line per fault. Every wait is bounded (``--timeout``); a
fault whose view does not come in time is counted and the cluster is brought back
before the next one.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from amcast.argtypes import positive, whole
from amcast.faultload import FaultRun, Recorder, percentile
from amcast.localcluster import LocalCluster

from .options import group_sizes

NAME = "failover"
HELP = ("kill -9 / restart / SIGTERM of random daemons under load: time to the new view, "
        "delivery gap, recovery to 90%, re-admission, graceful leave")
WINDOW = 0.2  # recovery windows (s)
STEADY = 0.6  # recovery must hold this long (s)
BASELINE = 1.0  # the rate before a kill is measured over this long (s)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nodes", default="4,8", help="comma-separated cluster sizes (default 4,8)")
    p.add_argument("--kills", type=whole(0), default=20,
                   help="kill -9 per cluster size (default 20)")
    p.add_argument("--leaves", type=whole(0), default=5,
                   help="SIGTERM per cluster size (default 5)")
    p.add_argument("--rate", type=positive, default=200.0,
                   help="messages/s each node's client sends (default 200)")
    p.add_argument("--timeout", type=positive, default=30.0, help="bound on every wait (s)")
    p.add_argument("--seed", type=int, default=None, help="seed of the victim choice")
    p.add_argument("--dir", type=Path, help="keep configs and logs here (default: a temp dir)")


@dataclass
class Samples:
    n: int
    view_s: list[float] = field(default_factory=list)
    gap_s: list[float] = field(default_factory=list)
    recover_s: list[float] = field(default_factory=list)
    readmit_s: list[float] = field(default_factory=list)
    startup_s: list[float] = field(default_factory=list)
    leave_s: list[float] = field(default_factory=list)
    views: int = 0
    faults: int = 0
    timeouts: int = 0
    notes: list[str] = field(default_factory=list)


def rate_of(rec: Recorder, start: float, end: float, senders: set[int]) -> float:
    n = sum(c for at, s, c in rec.arrivals if start <= at < end and s in senders)
    return n / (end - start)


def delivery_gap(rec: Recorder, start: float, end: float) -> float:
    """Longest interval without a delivery in [start, end] (the bounds count)."""
    times = [start, *(at for at, _, _ in rec.arrivals if start < at < end), end]
    return max(b - a for a, b in itertools.pairwise(times))


def recovery(rec: Recorder, killed_at: float, until: float, senders: set[int]) -> float | None:
    """Earliest t after the kill from which every WINDOW of the next STEADY seconds
    delivers >= 90% of the pre-kill rate of ``senders``' messages; seconds after the kill."""
    target = 0.9 * rate_of(rec, killed_at - BASELINE, killed_at, senders)
    marks = sorted(at for at, s, _ in rec.arrivals if killed_at <= at and s in senders)
    for t in [killed_at, *marks]:
        if t + STEADY > until:
            return None
        windows = [(t + i * WINDOW, t + (i + 1) * WINDOW) for i in range(int(STEADY / WINDOW))]
        if all(rate_of(rec, a, b, senders) >= target for a, b in windows):
            return t - killed_at
    return None


async def _wait_views(run: FaultRun, members: list[int], recs: list[Recorder], after: float,
                      timeout: float) -> dict[Recorder, float]:
    return await run.wait_view(members, recs, after=after, timeout=timeout)


async def _restore(run: FaultRun, s: Samples, node: int, timeout: float) -> float | None:
    """Start ``node`` again, connect a client, wait for the view of all; READY time."""
    cluster = run.cluster
    await asyncio.to_thread(cluster.wait_exit, node, timeout)
    restarted = await asyncio.to_thread(cluster.restart, node, max(timeout, 60.0))
    s.startup_s.append(restarted.ready_at - restarted.spawned_at)
    await run.connect(node)
    try:
        seen = await _wait_views(run, list(range(s.n)), run.live(), restarted.spawned_at,
                                 timeout)
    except TimeoutError as exc:
        s.timeouts += 1
        s.notes.append(f"N={s.n}: {exc}")
        return None
    survivors = [t for r, t in seen.items() if r.node != node]
    return max(survivors) - restarted.ready_at


async def _one_n(n: int, args: argparse.Namespace, rng: random.Random, say: Any) -> Samples:
    s = Samples(n)
    base = args.dir or Path(tempfile.mkdtemp(prefix="ambf-", dir="/tmp"))
    cluster = LocalCluster(n, Path(base) / f"n{n}", metrics=False, log_level="info")
    say(f"N={n}: starting {n} daemons ...")
    await asyncio.to_thread(cluster.start, 120)
    run = FaultRun(cluster, rate=args.rate, keep=False)
    try:
        await run.connect_all()
        run.start_load()
        await asyncio.sleep(BASELINE + 0.2)
        for k in range(args.kills + args.leaves):
            graceful = k >= args.kills
            victim = rng.randrange(n)
            survivors = [r for r in run.live() if r.node != victim]
            senders = {r.node for r in survivors}
            members = sorted(senders)
            for r in run.recorders:
                r.arrivals = [a for a in r.arrivals if a[0] >= time.monotonic() - 2 * BASELINE]
            at = cluster.terminate(victim) if graceful else cluster.kill(victim)
            s.faults += 1
            try:
                seen = await _wait_views(run, members, survivors, at, args.timeout)
            except TimeoutError as exc:
                s.timeouts += 1
                s.notes.append(f"N={n}: {exc}")
                await _restore(run, s, victim, args.timeout)
                continue
            took = max(seen.values()) - at
            line = (f"N={n} {'SIGTERM' if graceful else 'kill -9'} "
                    f"{k + 1 - (args.kills if graceful else 0)}/"
                    f"{args.leaves if graceful else args.kills}: node {victim}, "
                    f"view without it after {took * 1e3:.0f} ms")
            if graceful:
                s.leave_s.append(took)
                await asyncio.sleep(0.3)
            else:
                s.view_s.append(took)
                until = max(seen.values()) + STEADY + 2 * WINDOW + 0.3
                await asyncio.sleep(max(0.0, until - time.monotonic()))
                gap = max(delivery_gap(r, at - 0.05, max(seen.values()) + 0.3)
                          for r in survivors)
                rec = [recovery(r, at, until, senders) for r in survivors]
                s.gap_s.append(gap)
                if all(x is not None for x in rec):
                    s.recover_s.append(max(x for x in rec if x is not None))
                    line += f", gap {gap * 1e3:.0f} ms, 90% after {s.recover_s[-1] * 1e3:.0f} ms"
                else:
                    s.notes.append(f"N={n}: throughput not back to 90% within {until - at:.1f} "
                                   f"s after kill {k + 1}")
            readmit = await _restore(run, s, victim, args.timeout)
            if readmit is not None:
                if not graceful:
                    s.readmit_s.append(readmit)
                line += f", back in the view {readmit * 1e3:.0f} ms after READY"
            say(line)
            await asyncio.sleep(0.3)
        views = {n.frame["view"] for r in run.recorders for n in r.views() if n.primary}
        s.views = len(views)
    finally:
        await run.close()
        await asyncio.to_thread(cluster.stop, 30)
    return s


def _row(name: str, values: list[float], scale: float = 1e3) -> list[Any]:
    return [name, len(values), percentile(values, 0.5) * scale, percentile(values, 0.99) * scale,
            (max(values) if values else 0.0) * scale]


def report(results: list[Samples], args: argparse.Namespace) -> dict[str, Any]:
    tables = []
    figures: dict[str, Any] = {}
    notes: list[str] = []
    for s in results:
        tables.append({
            "title": f"N = {s.n}: {args.kills} kill -9, {args.leaves} SIGTERM, "
                     f"{args.rate:g} msgs/s per client (ms)",
            "columns": ["measure", "samples", "p50", "p99", "max"],
            "rows": [
                _row("kill -9 to the new view (last survivor)", s.view_s),
                _row("delivery gap at a survivor (worst)", s.gap_s),
                _row("kill -9 to 90% throughput (worst survivor)", s.recover_s),
                _row("restart: READY to the view with it", s.readmit_s),
                _row("restart: spawn to READY (Python start-up)", s.startup_s),
                _row("SIGTERM to the view without it", s.leave_s),
            ],
        })
        expected = 1 + 2 * s.faults
        figures[f"N={s.n} view changes beyond two per fault"] = max(0, s.views - expected)
        figures[f"N={s.n} waits timed out"] = s.timeouts
        figures[f"N={s.n} target kill -9 -> view p50 < 1 s"] = _met(s.view_s, 1.0)
        figures[f"N={s.n} target re-admission p50 < 1 s"] = _met(s.readmit_s, 1.0)
        figures[f"N={s.n} target graceful leave p50 < 50 ms"] = _met(s.leave_s, 0.05)
        notes += s.notes
    notes.append("times are taken from the clients' view frames (arrival at the last "
                 "survivor's client) and the time of the signal; suspect_timeout 0.8 s")
    return {"title": "amcast bench failover: kill -9, restart and SIGTERM under load on "
                     "loopback multicast",
            "tables": tables, "figures": figures, "notes": notes}


def _met(values: list[float], bound: float) -> str:
    if not values:
        return "no samples"
    p50 = percentile(values, 0.5)
    return f"{'yes' if p50 < bound else 'NO'} (p50 {p50 * 1e3:.0f} ms)"


def run(args: argparse.Namespace) -> dict[str, Any]:
    import uvloop

    sizes = group_sizes(args.nodes, "--nodes", minimum=3, why="a kill must leave a majority")
    rng = random.Random(args.seed)

    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    async def main() -> list[Samples]:
        return [await _one_n(n, args, rng, say) for n in sizes]

    return report(uvloop.run(main()), args)
