"""``python -m nemesis.run``: real daemons, a load, a seeded schedule of faults, a verdict.

Theory of operation. A run (``nemesis``) starts ``--nodes`` ``amcastd`` processes with
``amcast.localcluster.LocalCluster`` on loopback, over multicast or over unicast (then
every directed link runs through an ``tools.faultrelay.FaultRelay``, which is how
partitions and lossy links are made without root), each daemon under libfaketime when
it is installed (clock steps). A recording client per daemon sends a paced load
(``nemesis.load``); a sampler asks every daemon for its ``status`` twice a second. The
schedule (``nemesis.schedule``, a function of ``--seed``) is played in real time by
``nemesis.faults``; when it ends, whatever is still broken is healed and the cluster
must converge: one primary view of every node, at every client. Then the load stops,
every message owed is awaited, the daemons stop gracefully (their logs flushed) and the
checks of ``nemesis.checks`` judge the delivery logs, the clients' records and the
health samples.

It prints the schedule first (``--seed`` replays it), then each action with the time it
actually ran, then the verdict: each violated property with its details, the seed and
the command line that replays the run. Exit status 0: every property held; 1: a
violation; 2: the run itself failed (the cluster did not start). ``--json`` prints one
JSON report instead.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from amcast.protocols.errors import AmcastError
from amcast.protocols.simulation.checkers import Proc

from amcast.faultload import CLOSED, DELIVER, GAP, VIEW, Recorder
from amcast.localcluster import LocalCluster, free_port
from nemesis import checks
from nemesis import schedule as S
from nemesis.faults import Faults, clock_wrappers, faketime_library
from nemesis.load import HealthSampler, Load
from nemesis.logs import read_lives
from tools.faultrelay import FaultRelay

CONVERGE_S = 60.0
"""Bound on the cluster's convergence once the faults stop (a loaded 2-core host)."""
SETTLE_S = 60.0
"""Bound on delivering every message owed once the load stops."""


@dataclass
class Options:
    nodes: int = 3
    seed: int = 0
    duration: float = 60.0
    transport: str = "multicast"
    kinds: tuple[str, ...] = S.ALL_KINDS
    rate: float = 50.0
    exclude_within: float = 6.0
    keep: bool = False
    directory: Path | None = None
    quiet: bool = False

    def replay(self) -> str:
        kinds = "" if self.kinds == S.ALL_KINDS else f" --kinds {','.join(self.kinds)}"
        return (f"python -m nemesis.run --seed {self.seed} --nodes {self.nodes} "
                f"--duration {self.duration:g} --transport {self.transport}{kinds}")


@dataclass
class Report:
    options: Options
    schedule: S.Schedule
    actions: list[dict[str, Any]] = field(default_factory=list)
    violations: list[checks.Violation] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    directory: str = ""
    samples: list[dict[str, Any]] = field(default_factory=list)
    outages: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations

    def to_json(self, full: bool = False) -> dict[str, Any]:
        """The report; ``full``: with the outages and every health sample (the file
        kept beside the logs of a failed run)."""
        more = {"outages": self.outages, "health_samples": self.samples} if full else {}
        return {**more, "ok": self.ok, "seed": self.options.seed, "replay": self.options.replay(),
                "schedule": self.schedule.to_json(), "actions": self.actions,
                "violations": [{"property": v.prop, "detail": v.detail}
                               for v in self.violations],
                "stats": self.stats, "directory": self.directory}

    def describe(self) -> str:
        lines = [f"stats: {json.dumps(self.stats, sort_keys=True)}"]
        if self.ok:
            lines.append(f"NEMESIS PASSED: seed {self.options.seed}, every property held")
        else:
            props = sorted({v.prop for v in self.violations})
            lines.append(f"NEMESIS FAILED: seed {self.options.seed}, violated: "
                         f"{', '.join(props)}")
            lines += [f"  {v}" for v in self.violations]
            lines.append(f"replay: {self.options.replay()}")
        if self.directory:
            lines.append(f"cluster directory (logs): {self.directory}")
        return "\n".join(lines)


async def play(schedule: S.Schedule, faults: Faults, t0: float) -> None:
    """Every step at its offset from ``t0``, healed ``duration`` after it began.

    Steps run side by side, one task each, so that an action that takes seconds (a
    restart waits for READY=1) delays no fault on another node; a step holds its nodes
    (a lock each, taken in order) from its beginning to its end, so a step that is late
    on one node pushes back only the next step on that node. ``faults.actions`` has the
    times things really happened."""
    locks = {n: asyncio.Lock() for n in range(schedule.nodes)}

    async def until(at: float) -> None:
        delay = at - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)

    async def one(step: S.Step) -> None:
        await until(t0 + step.at)
        held = [locks[n] for n in sorted(step.nodes)]
        for lock in held:
            await lock.acquire()
        try:
            began = time.monotonic()
            await faults.begin(step)
            await until(began + step.duration)
            await faults.end(step)
        finally:
            for lock in held:
                lock.release()

    await asyncio.gather(*(one(s) for s in schedule.steps))


def converged(load: Load, nodes: int) -> bool:
    """The latest client of every node is connected and in one primary view of all."""
    want = list(range(nodes))
    seen = set()
    for n in want:
        try:
            rec = load.run.of(n)
        except StopIteration:
            return False
        view = rec.current_view()
        last = rec.last_view()
        members = last.frame["members"] if last is not None else rec.welcome.get("members")
        if not rec.open_ or view is None or not view[1] or sorted(members or []) != want:
            return False
        seen.add(view[0])
    return len(seen) == 1


def daemon_errors(directories: dict[str, Path]) -> list[str]:
    """Unhandled exceptions in the daemons' stderr logs (``amcastd.log``)."""
    out = []
    for source, d in directories.items():
        path = d.parent / "amcastd.log"
        if path.exists() and "Traceback" in (text := path.read_text(errors="replace")):
            i = text.index("Traceback")
            out.append(f"{source}: {text[i:i + 600]}")
    return out


def write_clients(path: Path, recorders: list[Recorder], t0: float) -> None:
    """Every client's history, one JSON line each, beside the logs of a failed run:
    what it sent, what was reported back, and its timeline (``["d", t, view, position,
    tag, number]`` per delivered message, ``["v"|"g"|"c", t, frame]`` per view, gap,
    end of connection): the evidence behind a client-side violation."""
    kinds = {DELIVER: "d", VIEW: "v", GAP: "g", CLOSED: "c"}
    with path.open("w") as fh:
        for r in recorders:
            line = [[kinds[e[0]], round(e[1] - t0, 4), *e[2:]] for e in r.timeline]
            fh.write(json.dumps({
                "client": r.tag, "node": r.node, "connected_at": round(r.connected_at - t0, 4),
                "closed_at": None if r.closed_at is None else round(r.closed_at - t0, 4),
                "close_code": r.close_code, "sent": r.next_number, "welcome": r.welcome,
                "reported": sorted(r.reported), "unknown": sorted(r.unknown),
                "delivered_away": sorted(r.delivered_away),
                "errors": r.errors[:20], "timeline": line}, default=str) + "\n")


async def nemesis(opts: Options) -> Report:
    """One run (module docstring)."""
    say = (lambda _s: None) if opts.quiet else (lambda s: print(s, flush=True))
    library = faketime_library()
    kinds = S.usable_kinds(opts.kinds, opts.transport, library is not None)
    sched = S.generate(opts.seed, opts.nodes, opts.duration, opts.transport, kinds)
    report = Report(opts, sched)
    say(sched.describe())
    directory = opts.directory or Path(tempfile.mkdtemp(prefix="nemesis-", dir="/tmp"))
    directory.mkdir(parents=True, exist_ok=True)
    relay: FaultRelay | None = None
    kw: dict[str, Any] = {}
    if opts.transport == "unicast":
        ports = [free_port() for _ in range(opts.nodes)]
        relay = FaultRelay(ports, seed=opts.seed)
        kw = {"unicast_ports": ports, "peers": [relay.peers_of(i) for i in range(opts.nodes)]}
    cluster = LocalCluster(opts.nodes, directory, metrics=False, log_level="warning",
                           transport=opts.transport, **kw)
    clock_dir = directory if library is not None else None
    if library is not None:
        cluster.wrappers = clock_wrappers(library, directory, opts.nodes)
    load = Load(cluster, opts.rate)
    try:
        if relay is not None:
            relay.start()
        await asyncio.to_thread(cluster.start, 60)
        t0 = time.monotonic()
        faults = Faults(cluster, relay, clock_dir, load.connect, t0, say)
        for n in range(opts.nodes):
            await load.connect(n)
        load.start()
        sampler = HealthSampler(lambda: {
            **{f"node {n}": (n, cluster.nodes[n].socket) for n in faults.serving()},
            **{imp.name: (imp.node, imp.socket) for imp in faults.impostors
               if imp.process.poll() is None}})
        sampler.start()
        say(f"  [{0:7.2f}s] cluster up, load running ({opts.rate:g} msg/s per client)")
        await play(sched, faults, t0)
        await faults.heal_all()
        healed = time.monotonic()
        say(f"  [{healed - t0:7.2f}s] faults over: waiting for one view of every node")
        v = report.violations
        try:
            await load.run.until(lambda: converged(load, opts.nodes), CONVERGE_S,
                                 "one primary view of every node at every client")
        except TimeoutError as exc:
            v.append(checks.Violation("converged", f"{exc}: {load.run.unsettled()}"))
        report.stats["converge_s"] = round(time.monotonic() - healed, 2)
        await sampler.stop()
        final = await sampler.sample_once()
        v += checks.check_converged(final, range(opts.nodes))
        await load.stop(SETTLE_S)
        try:
            await load.settle(SETTLE_S)
        except TimeoutError as exc:
            health = "; ".join(f"{s.who}: {s.problem or 'ok'}" for s in
                               await sampler.sample_once())
            v.append(checks.Violation("delivered_or_reported",
                                      f"{exc}; health then: {health}"))
        say(f"  [{time.monotonic() - t0:7.2f}s] load stopped, settled: stopping the daemons")
        # judged now: closing the clients ends their connections, and the verdict
        # owes nothing to a client whose connection ended
        v += checks.check_clients(load.run.recorders, load.joined_at)
        report.stats["clients_judged"] = len(load.run.live())
        await load.close()
        await asyncio.to_thread(cluster.stop, 30)
        if relay is not None:
            relay.stop()
            relay = None
        # the verdict
        dirs = {f"node {n.node}": n.log_dir for n in cluster.nodes}
        dirs |= {imp.name: imp.config.parent / "logs" for imp in faults.impostors}
        lv = read_lives(dirs)
        last_lives = {max((p for p in lv.deliveries if p.node == n.node
                           and lv.sources[p] == f"node {n.node}"),
                          default=Proc(n.node, 0)) for n in cluster.nodes}
        starts = 1 + sum(1 for s in sched.steps if s.kind == S.RESTART_ALL)
        v += checks.check_logs(lv, live=last_lives, first_views=starts)
        v += checks.check_health(sampler.samples, faults.all_outages(), opts.exclude_within)
        v += checks._cap("actions", faults.errors + load.connect_errors)
        v += checks._cap("daemon_errors", daemon_errors(dirs))
        report.actions = faults.actions
        report.samples = [{**x.to_json(), "at": round(x.at - t0, 3)} for x in sampler.samples]
        report.outages = [{"node": o.node, "since": o.since - t0, "why": o.why,
                           "until": None if o.until is None else o.until - t0,
                           "by": None if o.by is None else sorted(o.by)}
                          for o in faults.all_outages()]
        recs = load.run.recorders
        report.stats.update(
            clients=len(recs), sent=sum(r.next_number for r in recs),
            reported_undelivered=sum(len(r.reported) for r in recs),
            delivered_at_clients=sum(r.delivered for r in recs),
            health_samples=len(sampler.samples), unanswered_status=sampler.unanswered,
            lives=len(lv.deliveries),
            views=len({x.view for vs in lv.views.values() for x in vs}),
            logged_deliveries=sum(len(d) for d in lv.deliveries.values()),
            clock_steps=library is not None)
    finally:
        await load.close()
        await asyncio.to_thread(cluster.stop, 30)
        if relay is not None:
            relay.stop()
    if opts.keep or not report.ok:
        report.directory = str(directory)
        (directory / "report.json").write_text(json.dumps(report.to_json(full=True),
                                                          indent=1, default=str))
        write_clients(directory / "clients.jsonl", load.run.recorders, t0)
    else:
        shutil.rmtree(directory, ignore_errors=True)
    return report


def parse(argv: list[str] | None = None) -> tuple[Options, bool]:
    p = argparse.ArgumentParser(prog="python -m nemesis.run", description=__doc__.split(
        "\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, default=3, help="daemons, 3 to 7 (default 3)")
    p.add_argument("--seed", type=int, default=None, help="schedule seed (default: random, "
                   "printed)")
    p.add_argument("--duration", type=float, default=60.0,
                   help="seconds of faults (default 60); convergence and checks follow")
    p.add_argument("--transport", choices=("multicast", "unicast"), default="multicast",
                   help="unicast runs every link through a relay (partitions, lossy links)")
    p.add_argument("--kinds", default=",".join(S.ALL_KINDS),
                   help=f"fault kinds, comma-separated (default all: {','.join(S.ALL_KINDS)})")
    p.add_argument("--rate", type=float, default=50.0, help="messages/s per client")
    p.add_argument("--exclude-within", type=float, default=6.0,
                   help="seconds a primary view may still hold a node that cannot be heard")
    p.add_argument("--dir", type=Path, default=None, help="cluster directory (default: a "
                   "fresh one in /tmp, removed after a passed run)")
    p.add_argument("--keep", action="store_true", help="keep the cluster directory")
    p.add_argument("--json", action="store_true", help="print one JSON report")
    a = p.parse_args(argv)
    if not 3 <= a.nodes <= 7:
        p.error("--nodes must be 3 to 7")
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 31)
    kinds = tuple(k for k in a.kinds.split(",") if k)
    try:
        S.usable_kinds(kinds, a.transport, True)
    except ValueError as exc:
        p.error(str(exc))
    return Options(a.nodes, seed, a.duration, a.transport, kinds, a.rate, a.exclude_within,
                   a.keep, a.dir, quiet=a.json), a.json


def main(argv: list[str] | None = None) -> int:
    opts, as_json = parse(argv)
    try:
        report = asyncio.run(nemesis(opts))
    except AmcastError as exc:
        print(f"NEMESIS ERROR: seed {opts.seed}: the run failed: {exc}", file=sys.stderr)
        return 2
    if as_json:
        print(json.dumps(report.to_json(), indent=2, default=str))
    else:
        print(report.describe())
    return 0 if report.ok else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
