"""Prometheus scrapes read only immutable snapshots taken on the event loop (item 7)."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
import types
import urllib.request
from typing import Any

import pytest
from amcast.daemon.metrics import AmcastCollector, Counters, MetricsSnapshot
from amcast.protocols.node import Node, NodeStats
from daemon_helpers import Raw
from prometheus_client import CollectorRegistry, generate_latest


def snapshot_of(counters: Counters, stats: NodeStats) -> MetricsSnapshot:
    return MetricsSnapshot.build(
        taken_at=1.0, counters=counters, send_errors={"send_enobufs": 2}, queued=[5, 7],
        submit_queue_frames=3, submit_queue_bytes=900, view=0, members=2, healthy=True,
        transport={"datagrams_sent": 1, "datagrams_received": 2, "bytes_sent": 3,
                   "bytes_received": 4},
        engine=stats,
    )


def scrape(snapshot: MetricsSnapshot) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(AmcastCollector(lambda: snapshot))
    return generate_latest(registry).decode()


def test_a_snapshot_is_a_frozen_copy_and_the_collector_reads_it_alone() -> None:
    counters = Counters(messages_delivered=10)
    counters.drops["bad_envelope"] += 1
    stats = NodeStats(retransmissions=4)
    snap = snapshot_of(counters, stats)
    before = scrape(snap)
    assert "amcast_messages_delivered_total 10.0" in before
    assert 'amcast_drops_total{reason="send_enobufs"} 2.0' in before
    assert "amcast_retransmissions_total 4.0" in before
    assert "amcast_submit_queue_bytes 900.0" in before and "amcast_healthy 1.0" in before
    # the live objects move on; the snapshot (and so the scrape) does not
    counters.messages_delivered = 99
    counters.drops["bad_envelope"] += 5
    stats.retransmissions = 50
    stats.datagrams_sent["data"] = 1000
    assert scrape(snap) == before
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap.view = 3  # type: ignore[misc]
    for mapping in (snap.counters, snap.drops, snap.engine, snap.engine_kinds,
                    snap.engine_kinds["datagrams_sent"], snap.transport):
        with pytest.raises(TypeError):
            mapping["x"] = 1  # type: ignore[index]


READS: list[tuple[int, str]] = []
"""(thread, attribute) of every read of the watched live objects below."""


class WatchedCounters(Counters):
    def __getattribute__(self, name: str) -> Any:
        READS.append((threading.get_ident(), name))
        return super().__getattribute__(name)


class WatchedNode(Node):
    @property
    def stats(self) -> NodeStats:
        READS.append((threading.get_ident(), "stats"))
        return super().stats


def http_get(port: int) -> str:
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()


@pytest.mark.skipif(not isinstance(Node.__dict__["submit"], types.FunctionType),
                    reason="watches the Node by swapping its class, which mypyc's compiled "
                    "classes refuse: make check's interpreted run covers it")
async def test_scrapes_never_read_live_daemon_state_on_their_thread(make_cluster: Any) -> None:
    # every scrape renders (no render cache): each must show the delivery just made
    c = await make_cluster(2, metrics={"port": 0, "render_interval_s": 0})
    d = c.daemons[0]
    loop_thread = threading.get_ident()
    d.counters = WatchedCounters(**{f.name: getattr(d.counters, f.name)
                                    for f in dataclasses.fields(Counters)})
    assert d.node is not None
    d.node.__class__ = WatchedNode
    READS.clear()
    raw = await Raw.open(c.socket(0))
    raw.send({"t": "join", "groups": ["g"]})
    await raw.until("groups")
    for i in range(5):
        raw.send({"t": "send", "id": i, "groups": ["g"], "payload": b"m"})
        await raw.until("deliver")
        text = await asyncio.to_thread(http_get, d.metrics_port)
        assert f"amcast_messages_delivered_total {i + 1}.0" in text  # fresh, not stale
    assert READS, "the guard saw no read at all"
    foreign = {name for thread, name in READS if thread != loop_thread}
    assert foreign == set(), f"read from prometheus-client's thread: {foreign}"

    # the loop is busy: the scrape does not wait for ever, nor read live state itself;
    # it serves the latest snapshot taken on the loop
    READS.clear()
    scraper = asyncio.ensure_future(asyncio.to_thread(http_get, d.metrics_port))
    await asyncio.sleep(0.05)
    time.sleep(1.6)  # block the event loop longer than the scrape waits (1 s)
    text = await scraper
    assert "amcast_messages_delivered_total 5.0" in text
    assert {name for thread, name in READS if thread != loop_thread} == set()
