"""``amcast bench floor``: the light-load floor of amcast's design in Python, beside amcast.

Issue 13 asks for latency and CPU at 1,000 msgs/s no worse than JGroups' and
Corosync's. amcast's cost at light load is that of a lone message: two client hops
(application to its daemon, daemon back to each application) and ToTo's votes (the data
vertex multicast to the n - 1 others, then an ack-only vertex from each of the
``prompt_ackers(n) = ceil((n - 1) / 2)`` members after the sender, multicast to all;
each member orders the message once it holds those votes). This benchmark runs exactly
that pattern with processes that do nothing else, and then amcast itself at the same
rate, so the two compare within one run on one machine.

Theory of operation, for each N in ``--nodes``:

1. *Floor run.* N bare *node* processes (``python -m bench.floor node``, on
   uvloop as ``amcastd`` is) share one loopback multicast group (``LocalCluster``'s
   socket options: ``SO_REUSEPORT``, TTL 0, loopback on; each skips its own looped-back
   copies by source address, as the daemon does) and each serves one unix-socket client
   (``... floor client``). Client 0 sends ``--rate`` messages/s (paced as
   ``amcast.loadgen`` paces) of ``--size`` bytes, each stamped with its send time, in a
   length-prefixed frame; node 0 multicasts it as a data datagram (``--size`` + 64
   bytes: amcast's sealed header and vertex fields are about that); each of nodes 1..k
   answers with a 64-byte ack datagram to the group; every node that holds k votes for
   it (its own counts) writes the message to its client, and client 0 measures send to
   delivery. No sealing, no decoding, no DAG, no logs, no metrics: only the wake-ups,
   system calls and the least Python each step needs.
2. *Embedded floor run*: the same nodes without clients, node 0 sending and measuring
   itself, as a member embedded in its application (JGroups' design) would: the
   floor without the two client hops.
3. *amcast run* (unless ``--no-amcast``): ``amcast bench cluster``'s latency run
   (``cluster.latency``: N daemons, the same rate and size from node 0, a receive-only
   client on every other node).

Both are sampled after ``--warmup`` and at the end of sending: the CPU seconds of all
processes (nodes or daemons, and clients) and the node or daemon processes' wake-ups
(``voluntary_ctxt_switches``), per ordered message. ``amcast / floor`` is what amcast's
own code adds to the design's floor (the daemon floor: amcast has the client hops);
the floors against a peer's figures (``peers`` harness, same machine) say whether a
Python process per member, with this message pattern, can meet the issue's targets at
all, with and without a daemon between the application and the group.

Every process is bounded in time; traffic stays on 127.0.0.1 and a 239.255.x.y group.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from amcast.protocols.session import prompt_ackers

from amcast.argtypes import non_negative, positive, whole
from amcast.commands._common import CommandFailed
from amcast.loadgen import MIN_SIZE
from amcast.localcluster import free_port

from . import children
from .cluster import cpu_seconds, percentile, wakeups
from .options import group_sizes

NAME = "floor"
HELP = ("light load: a lone message's pattern (client hops, data, ToTo's prompt acks) in "
        "bare Python processes, beside amcast at the same rate")
DATA, ACK = 1, 2
HEADER = struct.Struct("!BQd")
"""kind, sequence number, the client's send time (``time.monotonic``)"""
HEADER_BYTES = 64
FRAME = struct.Struct("!I")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nodes", default="4,8", help="comma-separated cluster sizes (default 4,8)")
    p.add_argument("--rate", type=positive, default=1000.0, help="messages/s from node 0")
    p.add_argument("--duration", type=positive, default=5.0, help="measured seconds (default 5)")
    p.add_argument("--warmup", type=non_negative, default=1.0, help="seconds before measuring")
    p.add_argument("--size", type=whole(MIN_SIZE), default=100, help="payload bytes (default 100)")
    p.add_argument("--no-amcast", dest="amcast", action="store_false",
                   help="run the floor only")
    p.add_argument("--peers", type=Path, metavar="RUN_DIR",
                   help="a peer-harness run directory (results/raw/<run>): its JGroups and "
                        "Corosync latency runs join the table and the chart")
    p.add_argument("--plot", type=Path, metavar="PNG",
                   help="chart latency and CPU per message against N (needs matplotlib)")


# ---- the processes of the floor run ---------------------------------------------------


def _group_sockets(group: str, port: int) -> tuple[socket.socket, socket.socket]:
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    rx.bind((group, port))
    rx.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
                  socket.inet_aton(group) + socket.inet_aton("127.0.0.1"))
    rx.setblocking(False)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
    tx.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 0)
    tx.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
    tx.bind(("127.0.0.1", 0))
    tx.setblocking(False)
    return rx, tx


async def paced(rate: float, start: float, end: float, send: Callable[[int], None]) -> int:
    """Call ``send(seq)`` at ``rate``/s from ``start`` until ``end`` (monotonic), on a
    fixed schedule as ``amcast.loadgen`` keeps it; returns how many were sent."""
    loop = asyncio.get_running_loop()
    seq = 0
    while time.monotonic() < end:
        delay = start + seq / rate - time.monotonic()
        if delay > 0:
            fut = loop.create_future()
            loop.call_at(loop.time() + delay, fut.set_result, None)
            await fut
        send(seq)
        seq += 1
    return seq


def _report(sent: int, latencies: list[float]) -> None:
    print(json.dumps({"sent": sent, "samples": len(latencies),
                      "p50_s": percentile(latencies, 0.5) if latencies else None,
                      "p99_s": percentile(latencies, 0.99) if latencies else None}), flush=True)


async def node_main(node: int, n: int, group: str, port: int, path: str,
                    load: tuple[float, float, float, int] | None = None) -> None:
    """One member: multicasts the messages it is handed as data datagrams (node 0),
    acks data (nodes 1..k), and delivers each message once it holds k votes: to its
    client over ``path``, or, embedded (``load``: node 0 sends ``rate`` msgs/s of ``size``
    bytes itself for ``warmup + duration`` s; ``path`` unused), to nobody, node 0
    measuring send to delivery as its client would."""
    k = prompt_ackers(n, n / 2)
    acker = 1 <= node <= k
    loop = asyncio.get_running_loop()
    rx, tx = _group_sockets(group, port)
    me = tx.getsockname()
    dest = (group, port)
    votes: dict[int, int] = {}
    bodies: dict[int, bytes] = {}
    client: list[asyncio.StreamWriter] = []
    ack_pad = bytes(HEADER_BYTES - HEADER.size)
    latencies: list[float] = []
    measure_from = math.inf

    def vote(seq: int) -> None:
        count = votes[seq] + 1
        if count < k:
            votes[seq] = count
            return
        del votes[seq]
        body = bodies.pop(seq)
        if client:
            client[0].write(FRAME.pack(len(body)) + body)
        elif load is not None and node == 0:
            sent_at = struct.unpack_from("!Qd", body)[1]
            if sent_at >= measure_from:
                latencies.append(time.monotonic() - sent_at)

    class Member(asyncio.DatagramProtocol):
        def datagram_received(self, data: bytes, addr: Any) -> None:
            if addr == me:
                return
            kind, seq, _ = HEADER.unpack_from(data)
            if kind == DATA:
                votes[seq] = 0
                bodies[seq] = data[HEADER_BYTES:]
                if acker:
                    tx.sendto(HEADER.pack(ACK, seq, 0.0) + ack_pad, dest)
                    vote(seq)
            elif seq in votes:  # on loopback a message's data is queued before its acks
                vote(seq)

    def multicast(body: bytes) -> None:
        seq, sent_at = struct.unpack_from("!Qd", body)
        votes[seq] = 0
        bodies[seq] = body
        tx.sendto(HEADER.pack(DATA, seq, sent_at).ljust(HEADER_BYTES, b"\0") + body, dest)

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        client.append(writer)
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                (size,) = FRAME.unpack(await reader.readexactly(FRAME.size))
                multicast(await reader.readexactly(size))
        stop.set()

    stop = asyncio.Event()
    await loop.create_datagram_endpoint(Member, sock=rx)
    if load is None:
        server = await asyncio.start_unix_server(serve, path)
        print("ready", flush=True)
        await stop.wait()
        server.close()
        return
    print("ready", flush=True)
    if node != 0:
        await stop.wait()  # killed by the bench
        return
    rate, duration, warmup, size = load
    start = time.monotonic()
    measure_from = start + warmup
    pad = bytes(max(0, size - 16))
    sent = await paced(rate, start, start + warmup + duration,
                       lambda seq: multicast(struct.pack("!Qd", seq, time.monotonic()) + pad))
    await asyncio.sleep(0.3)  # the last messages' votes
    _report(sent, latencies)


async def client_main(path: str, rate: float, duration: float, warmup: float,
                      size: int) -> None:
    """Node 0's client (``rate`` > 0) sends and measures; the others only receive."""
    reader, writer = await asyncio.open_unix_connection(path)
    latencies: list[float] = []
    start = time.monotonic()
    end = start + warmup + duration

    async def receive() -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                (n,) = FRAME.unpack(await reader.readexactly(FRAME.size))
                body = await reader.readexactly(n)
                now = time.monotonic()
                _, sent_at = struct.unpack_from("!Qd", body)
                if sent_at >= start + warmup:
                    latencies.append(now - sent_at)

    receiving = asyncio.ensure_future(receive())
    if rate > 0:
        pad = bytes(max(0, size - 16))

        def send(seq: int) -> None:
            body = struct.pack("!Qd", seq, time.monotonic()) + pad
            writer.write(FRAME.pack(len(body)) + body)

        sent = await paced(rate, start, end, send)
        await asyncio.sleep(0.3)  # the last messages' votes
        _report(sent, latencies)
        writer.close()
    else:
        await asyncio.sleep(max(0.0, end + 0.5 - time.monotonic()))
    receiving.cancel()


# ---- running it ----------------------------------------------------------------------


def _spawn(*argv: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "bench.floor", *argv], env=children.env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _sample(nodes: list[subprocess.Popen[str]], clients: list[subprocess.Popen[str]]
            ) -> tuple[float, float, int]:
    """CPU seconds of the nodes and of the clients, and the nodes' wake-ups."""
    return (sum(cpu_seconds(p.pid) for p in nodes), sum(cpu_seconds(p.pid) for p in clients),
            sum(wakeups(p.pid) for p in nodes))


def floor_run(n: int, args: argparse.Namespace, base: Path, *,
              embedded: bool = False) -> dict[str, Any]:
    """One floor run: N node processes and (not ``embedded``) a client each."""
    group = f"239.255.{os.getpid() % 250 + 1}.{n}"
    port = free_port()
    paths = [str(base / f"floor-n{n}-{i}.sock") for i in range(n)]
    total = args.warmup + args.duration
    load = [str(args.rate), str(args.duration), str(args.warmup), str(args.size)]
    print(f"[bench floor] N={n}: bare processes{', embedded' if embedded else ''}, "
          f"{args.rate:.0f} msgs/s from node 0 for {total:.0f} s (warm-up "
          f"{args.warmup:.0f} s) ...", file=sys.stderr, flush=True)
    nodes: list[subprocess.Popen[str]] = []
    clients: list[subprocess.Popen[str]] = []
    try:
        # node 0 last: embedded, it starts sending once it is up
        for i in [*range(1, n), 0]:
            nodes.append(_spawn("node", str(i), str(n), group, str(port), paths[i],
                                *(load if embedded else [])))
            _wait_ready(nodes[-1])
        sender = nodes[-1]
        if not embedded:
            clients = [_spawn("client", paths[i], "0", *load[1:]) for i in range(1, n)]
            sender = _spawn("client", paths[0], *load)
            clients.insert(0, sender)
        start = time.monotonic()
        time.sleep(args.warmup)
        first = _sample(nodes, clients)
        time.sleep(max(0.0, start + total - time.monotonic()))
        last = _sample(nodes, clients)
        out, err = sender.communicate(timeout=total + 30)
        if sender.returncode != 0:
            raise CommandFailed(f"the floor's sender failed: {err.strip()[-500:]}")
        report = json.loads(out.strip().splitlines()[-1])
    finally:
        for p in [*clients, *nodes]:
            if p.poll() is None:
                p.kill()
            p.wait()
            for stream in (p.stdout, p.stderr):
                if stream is not None:
                    stream.close()
    return {"n": n, "p50_s": report["p50_s"], "p99_s": report["p99_s"],
            "samples": report["samples"], "node_cpu_s": last[0] - first[0],
            "client_cpu_s": last[1] - first[1], "wakeups": last[2] - first[2],
            "ordered": report["samples"]}


def _wait_ready(p: subprocess.Popen[str]) -> None:
    line = p.stdout.readline() if p.stdout else ""
    if line.strip() != "ready":
        p.kill()
        why = p.stderr.read() if p.stderr else ""
        raise CommandFailed(f"a floor node did not start: {why.strip()[-500:]}")


def amcast_run(n: int, args: argparse.Namespace, base: Path) -> dict[str, Any]:
    from . import cluster

    lat = cluster.latency(n, argparse.Namespace(
        latency_rate=args.rate, latency_duration=args.duration, latency_warmup=args.warmup,
        size=args.size, protocol=[], transport="multicast", trace=False), base)
    w, report = lat["window"], lat["report"]
    return {"n": n, "p50_s": report.get("latency_p50_s"), "p99_s": report.get("latency_p99_s"),
            "samples": report.get("latency_samples", 0), "node_cpu_s": w["daemon_cpu_s"],
            "client_cpu_s": w["clients_cpu_s"],
            "wakeups": w["wakeups"], "ordered": w["ordered"]}


def row(what: str, r: dict[str, Any]) -> list[Any]:
    ordered = max(1.0, float(r["ordered"]))
    cpu = r["node_cpu_s"] + r["client_cpu_s"]
    return [r["n"], what, r["samples"], _ms(r["p50_s"]), _ms(r["p99_s"]), cpu,
            r["node_cpu_s"], r["client_cpu_s"], 1e6 * cpu / ordered, r["wakeups"] / ordered]


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1e3


COLUMNS = ["N", "run", "samples", "p50 ms", "p99 ms", "CPU s, all processes",
           "nodes / daemons CPU s", "clients CPU s", "CPU us/msg", "node wake-ups/msg"]


def run(args: argparse.Namespace) -> dict[str, Any]:
    sizes = group_sizes(args.nodes, "--nodes", minimum=2)
    rows: list[list[Any]] = []
    figures: dict[str, Any] = {}
    notes = [f"{os.cpu_count()} CPUs shared by every process",
             f"prompt ackers: N=4 {prompt_ackers(4, 2)}, N=8 {prompt_ackers(8, 4)}"]
    with tempfile.TemporaryDirectory(prefix="amcast-floor-") as tmp:
        for n in sizes:
            floor = floor_run(n, args, Path(tmp))
            rows.append(row("floor", floor))
            figures[f"N={n} floor p50 ms"] = _ms(floor["p50_s"])
            figures[f"N={n} floor p99 ms"] = _ms(floor["p99_s"])
            embedded = floor_run(n, args, Path(tmp), embedded=True)
            rows.append(row("floor, embedded", embedded))
            figures[f"N={n} embedded floor p50 ms"] = _ms(embedded["p50_s"])
            if args.amcast:
                mine = amcast_run(n, args, Path(tmp))
                rows.append(row("amcast", mine))
                a, f = rows[-1], rows[-3]
                rows.append([n, "amcast / floor", None,
                             *(_ratio(a[i], f[i]) for i in range(3, len(COLUMNS)))])
    if getattr(args, "peers", None) is not None:
        rows.extend(peer_rows(args.peers))
        notes.append(f"peer rows: the latency runs of {args.peers} (its own run, on this "
                     "machine if it ran here)")
    if getattr(args, "plot", None) is not None:
        from . import charts

        charts.light_load(chart_series(rows), args.plot,
                         title=f"light load: {args.rate:.0f} msgs/s from one member, "
                               f"{os.cpu_count()} CPUs")
        notes.append(f"chart: {args.plot}")
    return {
        "title": f"amcast bench floor: {args.rate:.0f} msgs/s of {args.size} bytes from node "
                 f"0 for {args.duration:.0f} s after {args.warmup:.0f} s, every node "
                 "receiving; the floor runs a lone message's datagrams and client hops in "
                 "bare Python processes",
        "tables": [{"title": "light load: the design's floor beside amcast", "columns": COLUMNS,
                    "rows": rows}],
        "figures": figures,
        "notes": notes,
    }


PEERS = {"jgroups-seq": "JGroups SEQUENCER", "corosync-cpg": "Corosync CPG"}


def peer_rows(run_dir: Path) -> list[list[Any]]:
    """The JGroups and Corosync latency runs of a peer-harness run, as table rows (p50,
    p99, CPU µs of all processes per ordered message; medians over repetitions)."""
    from .peers_plot import read_run

    out = []
    for s in read_run(run_dir, set(PEERS))["series"]:
        name = PEERS[s["system"]] + (f" ({s['variant']})" if s["variant"] else "")
        for p in s["points"]:
            if p["mode"] == "lat":
                out.append([p["n"], name, None, p["lat_p50_ms"], p["lat_p99_ms"], None, None,
                            None, p["cpu_us_per_msg"], None])
    return out


def chart_series(rows: list[list[Any]]) -> list[dict[str, Any]]:
    """One series per run name of the table (ratio rows left out)."""
    series: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        if r[1] == "amcast / floor":
            continue
        series.setdefault(r[1], []).append(
            {"n": r[0], "lat_p50_ms": r[3], "lat_p99_ms": r[4], "cpu_us_per_msg": r[8]})
    labels = {"floor": "floor: bare Python, daemon + client hops",
              "floor, embedded": "floor: bare Python, embedded (no client hops)"}
    return [{"label": labels.get(name, name), "points": sorted(points, key=lambda p: p["n"])}
            for name, points in series.items()]


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def main(argv: list[str]) -> None:
    import uvloop

    if argv[0] == "node":
        node, n, group, port, path = argv[1:6]
        load = None
        if len(argv) > 6:
            rate, duration, warmup, size = argv[6:10]
            load = (float(rate), float(duration), float(warmup), int(size))
        uvloop.run(node_main(int(node), int(n), group, int(port), path, load))
    elif argv[0] == "client":
        path, rate, duration, warmup, size = argv[1:6]
        uvloop.run(client_main(path, float(rate), float(duration), float(warmup), int(size)))


if __name__ == "__main__":
    main(sys.argv[1:])
