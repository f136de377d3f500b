"""Metrics and logs: what the daemon tells about itself while it runs.

The Prometheus scrape thread reads only ``MetricsSnapshot`` objects built on the event
loop (``take_metrics_snapshot``; ``scrape_snapshot`` asks the loop for a fresh one and
falls back to the latest periodic one), so it never reads live state from another
thread. The delivery log gets a ``metrics`` record every ``logs.snapshot_interval_s``
(``log_snapshot``); log files the disk refuses are counted and said once when they fail
and once when they are written again (``check_logs``). An exception caught while
handling one input or event is a counted drop and a sparse log line (``failed``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any, Protocol

import structlog

from ..protocols.node import Node
from ..protocols.node_config import NodeConfig
from .api import ApiServer
from .config import DaemonConfig
from .federation import Federation
from .logs import DeliveryLog, StderrLogger
from .metrics import Counters, MetricsSnapshot
from .submitq import SubmitQueue
from .trace import DatagramTrace
from .transports import AnyTransport

log = structlog.get_logger("amcastd")
SCRAPE_WAIT_S = 1.0  # a scrape waits this long for a fresh snapshot from the loop


class LogHost(Protocol):
    """The daemon's log files."""

    dlog: DeliveryLog | None
    trace: DatagramTrace | None


class Host(LogHost, Protocol):
    """What metrics and logs read of the daemon."""

    config: DaemonConfig
    node_config: NodeConfig
    node_id: int
    node: Node | None
    variant: str
    started: float
    view_id: int
    members: list[int]
    primary: bool
    position: int
    counters: Counters
    queue: SubmitQueue
    api: ApiServer
    transport: AnyTransport | None
    federation: Federation | None
    metrics_snapshot: MetricsSnapshot | None
    log_errors: list[str]

    def now(self) -> float: ...

    def health(self) -> dict[str, Any]: ...

    def status(self) -> dict[str, Any]: ...


def log_files(d: LogHost) -> list[Any]:
    """The log files this daemon writes (the delivery log, the latency trace)."""
    return [x for x in (d.dlog, d.trace) if x is not None]


def log_write_failures(d: LogHost) -> int:
    """Refused writes of the log files, and log lines stderr refused."""
    return sum(f.failures for f in log_files(d)) + StderrLogger.refused


def check_logs(d: Host) -> None:
    """Count the log writes the disk refused, and say so once when the logs become
    unwritable and once when they are written again (``RotatingJsonl``)."""
    files = log_files(d)
    d.counters.log_write_failures = log_write_failures(d)
    errors = [e for f in files for e in f.errors]
    if errors and not d.log_errors:
        log.error("cannot write the logs: records are lost until it can (deliveries and "
                  "ordering go on)", node=d.node_id, errors=errors,
                  failures=d.counters.log_write_failures)
    elif d.log_errors and not errors:
        log.warning("the logs are written again", node=d.node_id,
                    failures=d.counters.log_write_failures)
    d.log_errors = errors


def take_metrics_snapshot(d: Host) -> MetricsSnapshot:
    """Copy what a scrape reports (on the event loop only)."""
    t = d.transport
    snap = MetricsSnapshot.build(
        taken_at=d.now(), counters=d.counters,
        send_errors=t.send_errors if t is not None else {},
        queued=[conn.queued_bytes for conn in d.api.clients.values()],
        submit_queue_frames=len(d.queue), submit_queue_bytes=d.queue.nbytes,
        view=d.view_id, members=len(d.members), healthy=d.health()["ok"],
        transport={
            "datagrams_sent": t.datagrams_sent if t else 0,
            "datagrams_received": t.datagrams_received if t else 0,
            "bytes_sent": t.bytes_sent if t else 0,
            "bytes_received": t.bytes_received if t else 0,
        },
        engine=d.node.stats if d.node is not None else None,
        primary=d.primary, started=d.started,
        peers=d.node.peers() if d.node is not None else None,
        quorum=d.node.quorum if d.node is not None else None,
        federation=d.federation.metrics_sample() if d.federation is not None else None,
    )
    d.metrics_snapshot = snap
    return snap


def scrape_snapshot(d: Host, loop: asyncio.AbstractEventLoop | None,
                    loop_thread: int | None) -> MetricsSnapshot:
    """The collector's source: on the loop (the endpoint renders there), a fresh
    snapshot; from another thread, ask the loop for one; if it does not answer within
    ``SCRAPE_WAIT_S`` (busy, stopping), serve the latest periodic one. Never reads
    live state from another thread."""
    latest = d.metrics_snapshot
    if loop is None or threading.get_ident() == loop_thread:
        return take_metrics_snapshot(d)  # not running yet, or on the loop already
    fut: concurrent.futures.Future[MetricsSnapshot] = concurrent.futures.Future()

    def take() -> None:
        if fut.set_running_or_notify_cancel():
            try:
                fut.set_result(take_metrics_snapshot(d))
            except BaseException as exc:
                fut.set_exception(exc)

    try:
        loop.call_soon_threadsafe(take)
        return fut.result(SCRAPE_WAIT_S)
    except Exception:  # loop closed, timed out, or the snapshot failed
        fut.cancel()
        if latest is None:
            raise
        return latest


def log_snapshot(d: Host) -> None:
    """The periodic ``metrics`` record of the delivery log (``logs.snapshot_interval_s``,
    and a last one at shutdown); flushes the latency trace."""
    if d.trace is not None:
        d.trace.flush()
    if d.dlog is None:
        return
    s = d.status()
    c = s["counters"]
    e = s["engine"]
    d.dlog.metrics({
        "ts": s["now"], "view": d.view_id, "variant": d.variant,
        "messages_sent": c["messages_sent"], "messages_delivered": c["messages_delivered"],
        "datagrams_sent": c["datagrams_sent"], "datagrams_received": c["datagrams_received"],
        "retransmissions": int(e.get("retransmissions", 0)),
        "nacks_sent": int(e.get("nack_ranges_sent", 0)),
        "drops": c["drops"],
        "pending": int(e.get("pending_dag_size", 0)),
        "backpressure_events": c["backpressure_events"],
        "clients": len(s["clients"]), "position": d.position, "engine": e,
    })


def log_unresolved(d: Host, node: int, host: str) -> None:
    """A unicast peer's name does not resolve yet: the transport retries it."""
    log.warning("peer address does not resolve (yet): its datagrams wait for it",
                node=d.node_id, peer=node, host=host,
                retry_every_s=d.config.network.resolve_interval_s)


def log_sealing(d: Host) -> None:
    """At start-up: whether datagrams are sealed, and with which keys."""
    keys = d.node_config.keys()
    if keys is None:
        log.warning(
            "INSECURE: protocol.insecure = true; datagrams are neither encrypted nor "
            "authenticated: anyone on the network can read, forge and replay them",
            node=d.node_id)
    else:
        log.info("datagrams sealed with AES-256-GCM", node=d.node_id,
                 key_file=d.config.security.key_file, key_ids=list(keys.ids))


def log_send_error(d: Host, reason: str, hint: str) -> None:
    """A send the kernel refused (counted by the transport): what to check."""
    log.warning("multicast send failed", node=d.node_id, reason=reason, hint=hint)


def failed(d: Host, reason: str, where: str) -> None:
    """Count (and log, sparsely) an exception caught while handling one input/event."""
    drops = d.counters.drops
    drops[reason] += 1
    n = drops[reason]
    if n & (n - 1) == 0:  # the 1st, 2nd, 4th, 8th, ... occurrence
        log.error("exception while handling an event; it was dropped", node=d.node_id,
                  reason=reason, where=where, count=n, exc_info=True)
