"""The clients against real ``amcastd`` processes: refusals, ``sync``, ``status.health``,
``undelivered`` from a stopping daemon, and what a client sees when a daemon is killed and
restarted (views naming who was excluded and who joined, the ``OrderGap`` before the
restarted daemon's first delivery, ``welcome``'s ``gap`` for a client connecting later)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import cast

import pytest

from amcast.client import (
    BlockingClient,
    Client,
    ConnectionClosed,
    DeliveredBatch,
    Event,
    MessagesRefused,
    OrderGap,
    Undelivered,
    ViewChange,
)
from amcast.localcluster import LocalCluster
from tests.cli.helpers import amcast


@pytest.fixture
async def one_node(short_dir: Path) -> AsyncIterator[LocalCluster]:
    cluster = LocalCluster(1, short_dir / "c", protocol={"insecure": True}, metrics=False)
    await asyncio.to_thread(cluster.start)
    try:
        yield cluster
    finally:
        await asyncio.to_thread(cluster.stop)


async def test_a_real_daemon_refusal_names_the_messages(one_node: LocalCluster) -> None:
    c = await Client.connect(one_node.sockets[0])
    await c.join("g")
    assert c.send(b"fine", "g") == 0
    assert c.send(b"refused", ["g" + str(k) for k in range(100)]) == 1  # > max_groups
    assert c.send(b"also fine", "g") == 2
    with pytest.raises(MessagesRefused) as info:
        await c.sync()
    assert (info.value.code, info.value.messages) == ("too_many_groups", [1])
    got = []
    async for d in c.deliveries(20):
        got.append(d.payload)
        if len(got) == 2:
            break
    assert got == [b"fine", b"also fine"]
    await c.close()
    with BlockingClient(one_node.sockets[0]) as b:
        b.send(b"x", "g" * 1000)  # a group name over max_group_name_bytes
        with pytest.raises(MessagesRefused) as info:
            b.sync()
        assert (info.value.code, info.value.messages) == ("bad_field", [0])


async def test_the_daemon_answers_sync(one_node: LocalCluster) -> None:
    c = await Client.connect(one_node.sockets[0])
    for k in range(1000):
        c.send(b"%d" % k, "g")
    assert await c.sync() == 1000
    status = await c.status()
    assert "unknown_type" not in status["counters"]["client_errors"]  # sync is known
    await c.close()


async def test_status_carries_health(one_node: LocalCluster) -> None:
    r = await asyncio.to_thread(amcast, "status", "-s", one_node.sockets[0], "--json",
                                "--interval", "0")
    assert r.code == 0
    assert json.loads(r.out)["health"] == {"ok": True, "problems": [], "warnings": []}


async def test_a_stopping_daemon_names_undelivered_messages(short_dir: Path) -> None:
    cluster = LocalCluster(2, short_dir / "c2", protocol={"insecure": True}, metrics=False,
                           extra={"shutdown": {"grace_s": 1.0}})
    await asyncio.to_thread(cluster.start)
    frozen = cluster.nodes[1].pid
    assert frozen is not None
    try:
        os.kill(frozen, signal.SIGSTOP)  # without node 1, node 0 soon cannot deliver
        c = await Client.connect(cluster.sockets[0])
        for _ in range(10):  # ten frames, ten vertices
            for k in range(5):
                c.send(b"%d" % k, "g")
            await c.sync()
        assert c.confirmed == 50  # accepted ...
        cluster.kill_node(0)  # ... but node 0 stops before delivering (most of) them
        seen: list[Event] = []
        with pytest.raises(ConnectionClosed) as info:
            while len(seen) < 1000:  # bounded: events come before the end
                seen.append(await c.next_event(30))
        err = info.value
        # a stopping daemon first loses its primary view, then names what it did not deliver
        assert any(isinstance(e, ViewChange) and not e.primary for e in seen)
        reported = [m for e in seen if isinstance(e, Undelivered) for m in e.messages]
        assert reported == list(err.unknown_messages())
        assert err.code == "shutting_down"
        unknown = list(err.unknown_messages())
        assert unknown and unknown[-1] == 49 and unknown == list(range(unknown[0], 50))
    finally:
        os.kill(frozen, signal.SIGCONT)
        await asyncio.to_thread(cluster.stop)


def _until(c: BlockingClient, want: Callable[[Event], bool], deadline: float,
           what: str) -> list[Event]:
    """``c``'s events up to and including the first that ``want`` accepts (bounded)."""
    seen: list[Event] = []
    while True:
        left = deadline - time.monotonic()
        assert left > 0, f"{what}: not seen in time; events: {seen}"
        seen.append(c.next_event(left))
        if want(seen[-1]):
            return seen


def _delivery(ev: Event) -> bool:
    return isinstance(ev, DeliveredBatch)


def _primary(ev: Event) -> bool:
    return isinstance(ev, ViewChange) and ev.primary


def test_views_name_who_was_excluded_joined_and_left_and_a_restart_reports_its_gap(
    short_dir: Path,
) -> None:
    """kill -9 one daemon of three: the survivors' clients see a view that names it
    excluded; messages are delivered without it; restarted with the same config and state
    directory, its new client learns of the gap in the total order (an ``OrderGap`` event,
    or ``welcome`` when it rejoined before the client connected) before its first
    delivery, which is in the gap's view; the survivors see it joined. Then one daemon
    stops gracefully: its client sees it leave, the others' a view naming it left."""
    cluster = LocalCluster(3, short_dir / "c3", protocol={"insecure": True}, metrics=False)
    cluster.start()
    try:
        deadline = time.monotonic() + 20
        observer = BlockingClient(cluster.sockets[0], timeout=10)
        victim = BlockingClient(cluster.sockets[2], timeout=10)
        observer.join("g")
        victim.join("g")
        observer.send(b"before", "g")
        observer.sync()
        seen = _until(victim, _delivery, deadline, "delivery before the crash")
        before = cast(DeliveredBatch, seen[-1])
        first_view = before.view
        victim.abort()
        cluster.kill(2)
        seen = _until(observer, lambda e: _primary(e) and 2 not in e.members,  # type: ignore[union-attr]
                      deadline, "a primary view without node 2")
        excluded = cast(ViewChange, seen[-1])
        assert excluded.primary and excluded.excluded == [2] and excluded.left == []
        assert excluded.previous == first_view and sorted(excluded.members) == [0, 1]
        observer.send(b"missed", "g")  # delivered without node 2: its gap
        observer.sync()
        _until(observer, _delivery, deadline, "delivery without node 2")
        cluster.wait_exit(2, 5)
        cluster.restart(2)
        back = BlockingClient(cluster.sockets[2], timeout=10)
        in_welcome = back.welcome.get("gap")  # set when it rejoined before we connected
        back.join("g")
        seen = _until(observer, lambda e: _primary(e) and 2 in e.members,  # type: ignore[union-attr]
                      deadline, "a primary view with node 2 again")
        rejoined = cast(ViewChange, seen[-1])
        assert rejoined.primary and rejoined.joined == [2] and sorted(rejoined.members) == [0, 1, 2]
        observer.send(b"after", "g")
        observer.sync()
        seen = _until(back, lambda e: isinstance(e, DeliveredBatch) and e.view == rejoined.view,
                      deadline, "the restarted daemon's first delivery in the new view")
        gaps = [e for e in seen if isinstance(e, OrderGap)]
        if in_welcome is None:  # the client connected before the daemon rejoined
            assert len(gaps) == 1
            i = seen.index(gaps[0])
            assert not any(_delivery(e) for e in seen[:i])
            assert any(isinstance(e, ViewChange) and e.primary for e in seen[i:])
        else:
            assert back.welcome["primary"] is True and not gaps
            assert in_welcome == {"t": "gap", "view": rejoined.view,
                                  "after": None if back.gap is None or back.gap.after is None
                                  else list(back.gap.after)}
        gap = back.gap
        assert gap is not None and gap.view == rejoined.view
        # after: (view, position) of the last delivery it remembers, or None (a SIGKILLed
        # daemon may remember none)
        assert gap.after is None or (gap.after[0] == first_view and gap.after[1] >= 0)
        assert not any(isinstance(e, DeliveredBatch) and e.view < gap.view for e in seen)
        late = BlockingClient(cluster.sockets[2], timeout=10)  # connects after the gap
        assert late.gap == gap and late.view is not None and late.view.primary
        assert late.view.view == rejoined.view
        for c in (back, late):
            c.close()
        leaver = BlockingClient(cluster.sockets[1], timeout=10)
        cluster.terminate(1)  # a graceful stop: it leaves the view
        seen = []
        with pytest.raises(ConnectionClosed) as info:
            while len(seen) < 100:
                seen.append(leaver.next_event(max(0.1, deadline - time.monotonic())))
        assert info.value.code == "shutting_down"
        assert any(isinstance(e, ViewChange) and e.reason == "left" for e in seen), seen
        seen = _until(observer, lambda e: _primary(e) and 1 not in e.members,  # type: ignore[union-attr]
                      deadline, "a primary view without node 1")
        assert cast(ViewChange, seen[-1]).left == [1] and seen[-1].excluded == []  # type: ignore[union-attr]
        observer.close()
    finally:
        cluster.stop()
