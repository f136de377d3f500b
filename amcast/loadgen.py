"""Load generation through the socket API: senders, receivers and what they measured.

Theory of operation: a *sender* connects to one daemon with ``amcast.client.Client`` and
sends ``size``-byte messages to one group, either as fast as flow control allows (it
awaits ``drain()`` after every ``chunk`` messages) or paced at ``rate`` messages/s
(``send_wait``), for ``count`` messages or ``duration`` seconds, then ``sync()``: the
messages it counts as sent were all accepted by the daemon. Every payload starts with a header
``(send time: f64, client tag: u32, sequence: u32)`` so the same process can measure
send-to-delivery latency of its own messages when they come back.

A *receiver* (the same client when it joined the group) counts deliveries, folds the
delivered sequence into a running digest (``blake2b`` of ``message_id`` in delivery
order: identical digests on two nodes mean identical sequences), and optionally keeps
the sequence itself (tests). Per-message work here is the application's: the daemon
never does it.

``python -m amcast.loadgen --socket PATH ...`` runs one sender/receiver (``--receive-only``:
a receiver that sends nothing) and prints a JSON report; ``amcast bench cluster`` starts
one such process per node. ``--wait-members N`` waits, before sending, until N clients
joined the group (the start-up barrier of members that start on their own); ``--hold``
prints the report when the load is done and keeps the process until SIGTERM. ``main``
takes another way to the group (``connect``): the benchmarks' embedded variant
(``bench/embedded_load.py``) runs the same load in a process that embeds its member.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import signal
import struct
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from .client import Client, ClientError, DeliveredBatch
from .protocols.errors import AmcastError

HEADER = struct.Struct(">dII")
MIN_SIZE = HEADER.size
"""The smallest message a load generator sends: its send time, tag and number."""


@dataclass
class LoadReport:
    node: int = -1
    sent: int = 0
    delivered: int = 0
    batches: int = 0
    digest: str = ""
    send_seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    sequence: list[tuple[int | None, str, int, int, bytes]] = field(default_factory=list)
    by_service: dict[str, int] = field(default_factory=dict)
    first_delivery: float | None = None  # time.monotonic() of the first and last batch
    last_delivery: float | None = None

    @property
    def delivery_rate(self) -> float | None:
        """Messages/s from this node's first delivery to its last (``amcast analyze``'s
        per-node rate); None before two batches."""
        if self.first_delivery is None or self.last_delivery is None:
            return None
        span = self.last_delivery - self.first_delivery
        return self.delivered / span if span > 0 else None

    def summary(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("sequence")
        lat = sorted(self.latencies)
        d.pop("latencies")
        d["latency_samples"] = len(lat)
        if lat:
            d["latency_p50_s"] = lat[len(lat) // 2]
            d["latency_p99_s"] = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
        return d


def make_payload(size: int, tag: int, seq: int) -> bytes:
    head = HEADER.pack(time.monotonic(), tag, seq)
    return head + b"x" * max(0, size - len(head))


class Receiver:
    """Consumes a client's deliveries, digests them, measures own-message latency."""

    def __init__(self, client: Client, report: LoadReport, *, tag: int,
                 keep_sequence: bool = False) -> None:
        self.client = client
        self.report = report
        self.tag = tag
        self.keep = keep_sequence
        self.measure_latency = False
        self._hash = hashlib.blake2b(digest_size=16)
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []

    def on_batch(self, batch: DeliveredBatch) -> None:
        r = self.report
        n = batch.count
        r.delivered += n
        r.batches += 1
        r.by_service[batch.service] = r.by_service.get(batch.service, 0) + n
        r.last_delivery = time.monotonic()
        if r.first_delivery is None:
            r.first_delivery = r.last_delivery
        own = batch.sender == self.client.node
        if self.keep or (own and self.measure_latency):
            now = time.monotonic()
            for d in batch:
                if self.keep:
                    r.sequence.append((d.position, d.message_id, d.sender, d.client, d.payload))
                if own and self.measure_latency and d.client == self.client.client_id:
                    r.latencies.append(now - HEADER.unpack_from(d.payload)[0])
        self._hash.update(
            b"".join(f"{batch.sender}:{batch.seq}:{b[2]}+{len(b[3])};".encode()
                     for b in batch.batches)
        )
        while self._waiters and r.delivered >= self._waiters[0][0]:
            fut = self._waiters.pop(0)[1]
            if not fut.done():
                fut.set_result(None)

    async def run(self) -> None:
        async for batch in self.client.batches():
            self.on_batch(batch)

    def until(self, delivered: int) -> asyncio.Future[None]:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self.report.delivered >= delivered:
            fut.set_result(None)
        else:
            self._waiters.append((delivered, fut))
            self._waiters.sort(key=lambda w: w[0])
        return fut

    @property
    def digest(self) -> str:
        return self._hash.hexdigest()


async def send_load(client: Client, *, group: str, size: int = 100, count: int | None = None,
                    duration: float | None = None, rate: float | None = None,
                    service: str | list[str] = "agreed", tag: int = 0, chunk: int = 256,
                    report: LoadReport | None = None) -> LoadReport:
    """Send ``count`` messages, or for ``duration`` seconds; paced when ``rate`` is set."""
    report = report or LoadReport(node=client.node)
    services = [service] if isinstance(service, str) else list(service)
    start = time.monotonic()
    stop_at = None if duration is None else start + duration
    seq = 0
    loop = asyncio.get_running_loop()
    while (count is None or seq < count) and (stop_at is None or time.monotonic() < stop_at):
        if rate:
            due = start + seq / rate
            delay = due - time.monotonic()
            if delay > 0:
                fut = loop.create_future()
                loop.call_at(loop.time() + delay, fut.set_result, None)
                await fut
            await client.send_wait(make_payload(size, tag, seq), group,
                                   services[seq % len(services)])
            seq += 1
            continue
        n = chunk if count is None else min(chunk, count - seq)
        for i in range(n):
            svc = services[(seq + i) % len(services)]
            client.send(make_payload(size, tag, seq + i), group, svc)
        seq += n
        await client.drain()
    await client.sync()  # every message accepted (MessagesRefused otherwise)
    report.sent += seq
    report.send_seconds = time.monotonic() - start
    return report


def _stop_on_signal() -> asyncio.Event:
    """An event SIGTERM or SIGINT sets (instead of ending the process)."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def _receive_only(duration: float | None, stop: asyncio.Event) -> None:
    """Wait ``duration`` seconds, or until ``stop`` when it is None."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), duration)


Finish = Callable[[], Awaitable[Any]]
Connect = Callable[[argparse.Namespace], Awaitable[tuple[Client, Finish | None]]]
"""How a load generator reaches the group: its client, and what to await at the end."""


async def connect_socket(args: argparse.Namespace) -> tuple[Client, Finish | None]:
    """The default: a client of the daemon at ``--socket``."""
    return await Client.connect(args.socket, name=f"loadgen-{args.tag}"), None


async def _main(args: argparse.Namespace, connect: Connect) -> dict[str, Any] | None:
    if args.receive_only:
        args.receive = True
    stop = _stop_on_signal() if args.receive_only or args.hold else None
    client, finish = await connect(args)
    try:
        report = await _run(client, args, stop)
        if stop is not None and args.hold:
            _print(report)  # now, while the node stays up for the bench's last sample
            await stop.wait()
            return None
        return report
    finally:
        if finish is not None:
            await finish()


def _print(report: dict[str, Any]) -> None:
    json.dump(report, sys.stdout)
    sys.stdout.write("\n")
    sys.stdout.flush()


async def _run(client: Client, args: argparse.Namespace,
               stop: asyncio.Event | None) -> dict[str, Any]:
    report = LoadReport(node=client.node)
    receiver = Receiver(client, report, tag=args.tag)
    task = None
    if args.receive or args.wait_members:
        await client.join(args.group, members=bool(args.wait_members))
        if args.wait_members:
            await client.wait_for_members(args.group, args.wait_members,
                                          timeout=args.start_timeout)
    if args.receive:
        task = asyncio.create_task(receiver.run())
    if args.start_at:
        await asyncio.sleep(max(0.0, args.start_at - time.time()))
    receiver.measure_latency = True
    if args.receive_only:
        assert stop is not None
        await _receive_only(args.duration, stop)
    elif args.rate or args.duration or args.count:
        await send_load(client, group=args.group, size=args.size, count=args.count,
                        duration=args.duration, rate=args.rate, service=args.service,
                        tag=args.tag, report=report)
    if task is not None:
        if args.linger:
            await asyncio.sleep(args.linger)
        task.cancel()
    report.digest = receiver.digest
    await client.close()  # a node held up (--hold) stays, without this client
    return report.summary()


def build_parser(prog: str = "python -m amcast.loadgen", *, socket: bool = True
                 ) -> argparse.ArgumentParser:
    """The load generator's options (``socket``: with the required ``--socket``)."""
    p = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    if socket:
        p.add_argument("--socket", required=True, help="the API socket of the node's amcastd")
    p.add_argument("--wait-members", type=int, default=0, metavar="N",
                   help="before sending, wait until N clients joined the group")
    p.add_argument("--start-timeout", type=float, default=120.0,
                   help="seconds for --wait-members (and for a node the process starts)")
    p.add_argument("--hold", action="store_true",
                   help="print the report when done, then keep running (a node the process "
                        "runs stays in the group) until SIGTERM or SIGINT")
    p.add_argument("--group", default="bench")
    p.add_argument("--size", type=int, default=100)
    p.add_argument("--count", type=int)
    p.add_argument("--duration", type=float)
    p.add_argument("--rate", type=float)
    p.add_argument("--service", default="agreed")
    p.add_argument("--tag", type=int, default=0)
    p.add_argument("--receive", action="store_true")
    p.add_argument("--receive-only", action="store_true",
                   help="join and receive, send nothing: for --duration seconds (then "
                        "--linger), or until SIGTERM/SIGINT without --duration")
    p.add_argument("--linger", type=float, default=0.5, help="keep receiving after sending (s)")
    p.add_argument("--start-at", type=float, default=0.0, help="unix time to start sending at")
    return p


def main(argv: list[str] | None = None, *, connect: Connect = connect_socket,
         parser: argparse.ArgumentParser | None = None) -> int:
    args = (parser or build_parser()).parse_args(argv)
    import uvloop

    try:
        report = uvloop.run(_main(args, connect))
    except (ClientError, AmcastError) as exc:  # AmcastError: e.g. a node that did not start
        print(f"loadgen: error: {exc}", file=sys.stderr)
        return 1
    if report is not None:
        _print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
