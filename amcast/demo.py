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

from amcast.client import Client
from amcast.loadgen import LoadReport, Receiver, send_load
from amcast.localcluster import LocalCluster


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
        positions = [m[0] for m in r.sequence if m[0] is not None]
        if positions != list(range(len(positions))):
            problems.append(f"node {r.node}: total-order positions are not 0..{len(positions)-1}")
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
            f"({'/'.join(services)}) ...")
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
            await c.close()
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
        rows.append([r.node, r.sent, r.delivered, r.digest[:12],
                     r.delivered / result.seconds if result.seconds else 0.0,
                     s.get("latency_p50_s", 0.0) * 1e3, s.get("latency_p99_s", 0.0) * 1e3])
    digests = {r.digest for r in result.reports}
    return {
        "title": f"amcast demo: {result.nodes} daemons on loopback multicast, "
                 f"{result.expected:,} messages",
        "tables": [{"title": "per node (latency: send to delivery at the sender)",
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
        "notes": [*result.problems, f"analyse the logs with: amcast analyze {result.log_dir}"],
    }


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dir", type=Path, default=Path("var/demo"),
                   help="configs, sockets and logs (default: %(default)s)")
    p.add_argument("--nodes", type=int, default=4)
    p.add_argument("--messages", type=int, default=2500, help="messages per node")
    p.add_argument("--size", type=int, default=100, help="payload bytes")
    p.add_argument("--mixed", action="store_true",
                   help="cycle the service levels causal/agreed/safe instead of agreed only")
    p.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> dict[str, Any]:
    import uvloop

    services = ("causal", "agreed", "safe") if args.mixed else ("agreed",)
    result = uvloop.run(run_cluster_workload(
        args.dir, nodes=args.nodes, per_node=args.messages, size=args.size, services=services,
        progress=None if args.json else (lambda m: print(m, flush=True)),
    ))
    return report(result)
