"""The demo: 4 daemons on loopback, a sender on every node, identical sequences checked.

Theory of operation: ``run_cluster_workload`` starts a ``LocalCluster`` (one 239.255.x.y
group on 127.0.0.1), connects one ``Client`` per daemon, joins every client to one group,
and sends ``per_node`` messages from every client at once (service levels cycled from
``services``). Each client digests what it receives (``amcast.loadgen.Receiver``); when
every client has received all ``nodes * per_node`` messages, the workload compares the
delivery sequences: the totally ordered messages (``agreed``/``safe``) must come in the
same order with the same positions ``0..k-1`` on every node, the ``causal`` ones must be
the same set everywhere, and nothing may be lost or duplicated. The daemons are then
stopped with SIGTERM (clean exit required) and their logs stay in the directory for
``amcast analyze``.

``amcast demo`` prints the outcome with rates and latency; the end-to-end tests call the
same function and assert on the result.

``amcast demo --faults`` (``run_fault_demo``): 4 daemons with amcast's default
membership settings, a recording client on every node sending 200 messages/s
(``amcast.faultload``); one daemon is killed (SIGKILL) and started again with the same
config, another is paused (SIGSTOP) for three suspicion timeouts and resumed. The view
changes are printed as the clients receive them (``view`` and ``gap`` frames, the end of
a connection); at the end the whole history is judged (``faultload.verdict``: identical
sequences in every view at the daemons that completed it, every message of a client that
stayed connected delivered exactly once or reported back to it), and what each client
saw is tabulated.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .argtypes import whole
from .client import Client, ClientError
from .faultload import CLOSED, GAP, FaultRun, Notice, Recorder, Verdict
from .loadgen import MIN_SIZE, LoadReport, Receiver, send_load
from .localcluster import LocalCluster
from .protocols.errors import AmcastError


@dataclass
class WorkloadResult:
    nodes: int
    per_node: int
    expected: int
    reports: list[LoadReport]
    seconds: float
    exit_codes: dict[int, int | None] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    log_dir: Path | None = None

    @property
    def ok(self) -> bool:
        return not self.problems


def check_sequences(reports: list[LoadReport], expected: int) -> list[str]:
    problems: list[str] = []
    ordered: list[list[tuple[int | None, str]]] = []
    causal: list[Counter[str]] = []
    for r in reports:
        ids = [m[1] for m in r.sequence]
        dup = [i for i, n in Counter(ids).items() if n > 1]
        if dup:
            problems.append(f"node {r.node}: {len(dup)} duplicated message ids, e.g. {dup[:3]}")
        if len(ids) != expected:
            problems.append(f"node {r.node}: delivered {len(ids)} messages, expected {expected}")
        ordered.append([(m[0], m[1]) for m in r.sequence if m[0] is not None])
        causal.append(Counter(m[1] for m in r.sequence if m[0] is None))
        per_view: dict[str, list[int]] = {}  # positions restart in every view
        for position, message_id in ordered[-1]:
            per_view.setdefault(message_id.split(":", 1)[0], []).append(position)
        for view, positions in per_view.items():
            if positions != list(range(len(positions))):
                problems.append(f"node {r.node}: total-order positions of view {view} are "
                                f"not 0..{len(positions) - 1}")
    for r, seq, cset in zip(reports[1:], ordered[1:], causal[1:], strict=True):
        if seq != ordered[0]:
            first = next((i for i, (a, b) in enumerate(zip(seq, ordered[0], strict=False))
                          if a != b), min(len(seq), len(ordered[0])))
            problems.append(f"node {r.node}: total order differs from node {reports[0].node} "
                            f"at index {first}")
        if cset != causal[0]:
            problems.append(f"node {r.node}: causal messages differ from node {reports[0].node}")
    return problems


async def run_cluster_workload(
    directory: Path, *, nodes: int = 4, per_node: int = 2500, size: int = 100,
    services: tuple[str, ...] = ("agreed",), protocol: dict[str, Any] | None = None,
    timeout: float = 120.0, progress: Any = None,
) -> WorkloadResult:
    cluster = LocalCluster(nodes, directory, protocol=protocol or {}, log_level="info")
    say = progress or (lambda _msg: None)
    say(f"starting {nodes} daemons on {cluster.group}:{cluster.port} (127.0.0.1) ...")
    await asyncio.to_thread(cluster.start)
    result = WorkloadResult(nodes, per_node, nodes * per_node, [], 0.0,
                            log_dir=cluster.directory)
    clients: list[Client] = []
    try:
        clients = [await Client.connect(s, name=f"demo-{i}") for i, s in enumerate(cluster.sockets)]
        reports = [LoadReport(node=c.node) for c in clients]
        receivers = [Receiver(c, r, tag=i, keep_sequence=True)
                     for i, (c, r) in enumerate(zip(clients, reports, strict=True))]
        for c in clients:
            await c.join("demo")
        tasks = [asyncio.create_task(rx.run()) for rx in receivers]
        for rx in receivers:
            rx.measure_latency = True
        say(f"{nodes} clients sending {per_node} x {size}-byte messages each "
            f"({'/'.join(services)}), as fast as they can: a burst ...")
        start = time.monotonic()
        await asyncio.gather(*(
            send_load(c, group="demo", size=size, count=per_node, service=list(services),
                      tag=i, report=r)
            for i, (c, r) in enumerate(zip(clients, reports, strict=True))
        ))
        try:
            await asyncio.wait_for(
                asyncio.gather(*(rx.until(result.expected) for rx in receivers)), timeout
            )
        except TimeoutError:
            result.problems.append(
                f"timeout after {timeout} s: delivered {[r.delivered for r in reports]} "
                f"of {result.expected}"
            )
        result.seconds = time.monotonic() - start
        for t in tasks:
            t.cancel()
        for r in reports:
            r.digest = total_order_digest(r)
        result.reports = reports
        result.problems += check_sequences(reports, result.expected)
    finally:
        for c in clients:
            try:
                await c.close()
            except ClientError as exc:  # e.g. a daemon that died: report, stop the rest
                result.problems.append(f"client of node {c.node}: {exc}")
        say("stopping the daemons with SIGTERM ...")
        result.exit_codes = await asyncio.to_thread(cluster.stop)
    bad = {n: c for n, c in result.exit_codes.items() if c != 0}
    if bad:
        result.problems.append(f"daemons did not exit cleanly: {bad}")
    return result


def total_order_digest(report: LoadReport) -> str:
    """Digest of the totally ordered messages only: ``causal`` ones (no position) may
    legitimately interleave differently on different nodes."""
    h = hashlib.blake2b(digest_size=16)
    for m in report.sequence:
        if m[0] is not None:
            h.update(f"{m[0]}:{m[1]};".encode())
    return h.hexdigest()


def report(result: WorkloadResult) -> dict[str, Any]:
    rows = []
    for r in result.reports:
        s = r.summary()
        rows.append([r.node, r.sent, r.delivered, r.digest[:12], r.delivery_rate,
                     s.get("latency_p50_s", 0.0) * 1e3, s.get("latency_p99_s", 0.0) * 1e3])
    digests = {r.digest for r in result.reports}
    burst = f"{result.nodes} clients x {result.per_node:,}"
    return {
        "title": f"amcast demo: {result.nodes} daemons on loopback multicast, "
                 f"{result.expected:,} messages",
        "tables": [{"title": "per node (msgs/s: delivered from its first delivery to its "
                             "last, as amcast analyze counts them; latency: send to delivery "
                             "at the sender, under the burst)",
                    "columns": ["node", "sent", "delivered", "total-order digest", "msgs/s",
                                "p50 ms", "p99 ms"], "rows": rows}],
        "figures": {
            "identical delivery sequences": "yes" if len(digests) == 1 and result.ok else "NO",
            "messages ordered": result.expected,
            "seconds (first send to last delivery)": result.seconds,
            "ordered msgs/s": result.expected / result.seconds if result.seconds else 0.0,
            "daemon exit codes (SIGTERM)": str(result.exit_codes),
            "logs": str(result.log_dir),
        },
        "notes": [
            *result.problems,
            f"the latency is that of a burst: {burst} messages sent as fast as the clients "
            "can, so a message waits behind the ones sent before it (the queues, not the "
            "protocol); amcast bench cluster (from a source checkout) measures latency at a "
            "paced rate",
            f"analyse the logs with: amcast analyze {result.log_dir}",
        ],
    }


SUSPECT_TIMEOUT = 0.8  # amcast's default, which the fault demo keeps


@dataclass
class FaultDemoResult:
    verdict: Verdict
    recorders: list[Recorder]
    steps: list[tuple[float, str]]
    seconds: float
    connected_at_end: set[int] = field(default_factory=set)
    exit_codes: dict[int, int | None] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    log_dir: Path | None = None

    @property
    def ok(self) -> bool:
        return self.verdict.ok and not self.problems


class _Narrator:
    """Prints each view change once (at its first arrival), and each client's own
    notices (no primary view, gap, end of connection), as they happen."""

    def __init__(self, t0: float, say: Any) -> None:
        self.t0 = t0
        self.say = say
        self.seen: set[int] = set()
        self.active = True

    def __call__(self, rec: Recorder, n: Notice) -> None:
        if not self.active:
            return
        f = n.frame
        at = f"+{n.at - self.t0:6.2f} s"
        if n.kind == CLOSED:
            self.say(f"{at}  client of node {rec.node}: connection closed ({f['code']})")
        elif n.kind == GAP:
            after = f.get("after")
            missed = ("from the start (it remembers nothing)" if after is None
                      else f"after view {after[0]} position {after[1]}")
            self.say(f"{at}  client of node {rec.node}: gap notice, missed the order "
                     f"{missed} up to view {f['view']}")
        elif not n.primary:
            self.say(f"{at}  client of node {rec.node}: no primary view ({f.get('reason')}), "
                     f"hears {f.get('members')}")
        elif f["view"] not in self.seen:
            self.seen.add(f["view"])
            why = ", ".join(f"{k} {f[k]}" for k in ("joined", "left", "excluded") if f.get(k))
            self.say(f"{at}  view {f['view']}: members {f['members']}"
                     + (f" ({why})" if why else ""))


async def run_fault_demo(directory: Path, *, rate: float = 200.0, timeout: float = 30.0,
                         progress: Any = None) -> FaultDemoResult:
    say = progress or (lambda _msg: None)
    cluster = LocalCluster(4, directory, log_level="info", metrics=False)
    say(f"starting 4 daemons on {cluster.group}:{cluster.port} (127.0.0.1), default "
        f"membership settings (suspect_timeout {SUSPECT_TIMEOUT} s) ...")
    await asyncio.to_thread(cluster.start, 60)
    t0 = time.monotonic()
    steps: list[tuple[float, str]] = []
    narrator = _Narrator(t0, say)
    run = FaultRun(cluster, rate=rate, on_notice=narrator)
    problems: list[str] = []
    verdict = Verdict()

    def step(at: float, short: str, what: str = "") -> None:
        steps.append((at - t0, short))
        say(f"+{at - t0:6.2f} s  >>> {what or short}")

    try:
        await run.connect_all()
        run.start_load()
        say(f"4 clients sending {rate:g} messages/s each, every client receives everything")
        await asyncio.sleep(1.5)
        step(cluster.kill(1), "kill -9 node 1", f"kill -9 node 1 (pid {cluster.nodes[1].pid})")
        at = steps[-1][0] + t0
        await run.wait_view([0, 2, 3], [run.of(i) for i in (0, 2, 3)], after=at,
                            timeout=timeout)
        await asyncio.sleep(1.0)
        await asyncio.to_thread(cluster.wait_exit, 1, timeout)
        restarted = await asyncio.to_thread(cluster.restart, 1, 60)
        step(restarted.spawned_at, "node 1 started again",
             f"node 1 started again (same config and state directory, pid "
             f"{cluster.nodes[1].pid}), a new client connects")
        await run.connect(1)
        await run.wait_view(range(4), run.live(), after=restarted.spawned_at, timeout=timeout)
        await asyncio.sleep(1.0)
        paused = cluster.pause(3)
        step(paused, "SIGSTOP node 3",
             f"SIGSTOP node 3 for {3 * SUSPECT_TIMEOUT:.1f} s (3 x suspect_timeout)")
        await run.wait_view([0, 1, 2], [run.of(i) for i in (0, 1, 2)], after=paused,
                            timeout=timeout)
        await asyncio.sleep(max(0.0, paused + 3 * SUSPECT_TIMEOUT - time.monotonic()))
        step(cluster.resume(3), "SIGCONT node 3")
        await run.wait_view(range(4), run.live(), after=steps[-1][0] + t0, timeout=timeout)
        await asyncio.sleep(1.0)
        step(time.monotonic(), "load stopped",
             "the clients stop sending; waiting for every delivery")
        verdict = await run.stop_and_judge(timeout)
    except (TimeoutError, AmcastError, ConnectionError) as exc:
        problems.append(f"the demo did not complete: {exc}")
        verdict = run.verdict(settled=False)
    finally:
        narrator.active = False
        connected = {r.tag for r in run.live()}
        await run.close()
        say("stopping the daemons with SIGTERM ...")
        codes = await asyncio.to_thread(cluster.stop)
    seconds = time.monotonic() - t0
    bad = {n: c for n, c in codes.items() if c != 0}
    if bad:
        problems.append(f"daemons did not exit cleanly: {bad}")
    return FaultDemoResult(verdict, run.recorders, steps, seconds, connected, codes, problems,
                           cluster.directory)


def fault_report(result: FaultDemoResult) -> dict[str, Any]:
    v = result.verdict
    view_rows = []
    tags = {r.tag: r for r in result.recorders}
    welcomed = {r.welcome.get("view"): r.welcome.get("members") for r in result.recorders}
    for view_id, info in sorted(v.views.items()):
        done = [f"node {tags[t].node}" for t in info["complete"]]
        members = info["members"] or welcomed.get(view_id)
        view_rows.append([str(view_id), str(members), info["messages"], ", ".join(done) or "-",
                          "not checked" if info.get("unchecked") else "yes"])
    client_rows = []
    for r in result.recorders:
        views = [n for n in r.views() if n.primary]
        lost = [n for n in r.views() if not n.primary]
        client_rows.append([
            r.node, r.tag, r.next_number, len(r.reported), r.delivered, len(views),
            len(lost), len(r.gaps()),
            "connected" if r.tag in result.connected_at_end else f"closed ({r.close_code})"])
    identical = "yes" if result.ok else "NO"
    return {
        "title": "amcast demo --faults: 4 daemons, one killed and restarted, one paused",
        "tables": [
            {"title": "views (identical: every daemon that completed the view delivered the "
                      "same sequence, positions from 0)",
             "columns": ["view", "members", "messages", "completed by", "identical"],
             "rows": view_rows},
            {"title": "faults injected", "columns": ["at (s)", "what"],
             "rows": [[round(at, 2), what] for at, what in result.steps]},
            {"title": "what each client saw",
             "columns": ["node", "client", "sent", "reported back", "delivered", "views",
                         "no-primary", "gaps", "end"],
             "rows": client_rows},
        ],
        "figures": {
            "identical delivery sequences": identical,
            "messages sent by clients that stayed connected": v.sent,
            "... delivered exactly once": v.exactly_once,
            "... reported back to their client (undelivered)": v.reported,
            "... delivered only by a daemon excluded right after (non-uniform agreed)":
                v.nonuniform_only,
            "seconds": result.seconds,
            "daemon exit codes (SIGTERM)": str(result.exit_codes),
            "logs": str(result.log_dir),
        },
        "notes": [*result.problems, *v.problems[:10]],
    }


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dir", type=Path, default=None,
                   help="configs, sockets and logs (default: var/demo, var/demo-faults with "
                        "--faults)")
    p.add_argument("--nodes", type=whole(1), default=4)
    p.add_argument("--messages", type=whole(1), default=2500, help="messages per node")
    p.add_argument("--size", type=whole(MIN_SIZE), default=100, help="payload bytes")
    p.add_argument("--mixed", action="store_true",
                   help="cycle the service levels causal/agreed/safe instead of agreed only")
    p.add_argument("--faults", action="store_true",
                   help="the failover demo: a daemon killed and restarted, another paused, "
                        "view changes printed as they happen, the identical-order verdict")
    p.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> dict[str, Any]:
    import uvloop

    progress = None if args.json else (lambda m: print(m, flush=True))
    if args.faults:
        directory = args.dir or Path("var/demo-faults")
        return fault_report(uvloop.run(run_fault_demo(directory, progress=progress)))
    services = ("causal", "agreed", "safe") if args.mixed else ("agreed",)
    result = uvloop.run(run_cluster_workload(
        args.dir or Path("var/demo"), nodes=args.nodes, per_node=args.messages, size=args.size,
        services=services,
        progress=progress,
    ))
    return report(result)
