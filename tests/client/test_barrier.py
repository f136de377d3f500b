"""The start-up barrier (``wait_for_members``, ``wait_for_view``), self-discard, the
``fifo``/``reliable`` service aliases and the API both clients share, against a scripted
daemon."""

from __future__ import annotations

import asyncio
import inspect
import threading
from typing import Any

import pytest

from amcast.client import (
    BlockingClient,
    Client,
    ClientError,
    ClientTimeout,
    DeliveredBatch,
    MembersChange,
    ViewChange,
)
from tests.client.fakedaemon import FakeDaemon


def notice(*clients: int, group: str = "g", position: int = 0) -> dict[str, Any]:
    """A ``members`` frame: clients ``clients`` of node 0 (named ``c<id>``) in ``group``."""
    members = [[0, c, f"c{c}"] for c in clients]
    return {"t": "members", "group": group, "members": members, "joined": members[-1:],
            "left": [], "cause": "join", "view": 1, "position": position}


async def test_wait_for_members_returns_at_the_notice_and_keeps_the_events(sock: str) -> None:
    with FakeDaemon(sock) as fake:
        c = await Client.connect(sock, name="c1")
        with pytest.raises(ClientError, match="members=True") as info:
            await c.wait_for_members("g", 3)
        assert info.value.code == "not_watching"
        await c.join("g", members=True)
        waiter = asyncio.create_task(c.wait_for_members("g", 3, timeout=10))
        fake.emit(notice(1))
        fake.emit(notice(1, 2))
        await asyncio.sleep(0.05)
        assert not waiter.done()
        fake.emit(notice(1, 2, 3, position=7))
        got = await waiter
        assert isinstance(got, MembersChange) and got.position == 7 and len(got.members) == 3
        assert c.members("g") == got
        # by names, already reached: returns at once
        assert await c.wait_for_members("g", ["c1", "c3"]) == got
        # the notices are still there for the application, in order
        events = [await c.next_event(1) for _ in range(3)]
        assert [len(e.members) for e in events] == [1, 2, 3]  # type: ignore[union-attr]
        with pytest.raises(ClientTimeout, match="'g' to have members c1, c9"):
            await c.wait_for_members("g", {"c1", "c9"}, timeout=0.1)
        with pytest.raises(ValueError):
            await c.wait_for_members("g", 0)
        await c.close()


async def test_wait_for_view_waits_for_a_primary_view_of_the_nodes(sock: str) -> None:
    with FakeDaemon(sock, welcome_extra={"primary": False}) as fake:
        c = await Client.connect(sock)
        waiter = asyncio.create_task(c.wait_for_view(3, timeout=10))
        fake.emit({"t": "view", "view": 2, "members": [0, 1, 2], "primary": False,
                   "reason": "no_quorum"})
        fake.emit({"t": "view", "view": 3, "members": [0, 1], "primary": True})
        await asyncio.sleep(0.05)
        assert not waiter.done()
        fake.emit({"t": "view", "view": 4, "members": [0, 1, 2], "primary": True})
        assert (await waiter).view == 4
        assert (await c.wait_for_view([0, 2])).view == 4
        with pytest.raises(ClientTimeout):
            await c.wait_for_view([5], timeout=0.1)
        await c.close()


def test_the_blocking_barrier(sock: str) -> None:
    with FakeDaemon(sock) as fake, BlockingClient.connect(sock, name="c1", timeout=5) as c:
        c.join("g", members=True)
        timer = threading.Timer(0.1, lambda: fake.emit(notice(1, 2, 3)))
        fake.emit(notice(1))
        timer.start()
        got = c.wait_for_members("g", 3)
        timer.join()
        assert [m[2] for m in got.members] == ["c1", "c2", "c3"]
        assert isinstance(c.next_event(1), MembersChange)  # still queued
        with pytest.raises(ClientTimeout):
            c.wait_for_members("g", 4, timeout=0.1)
        with pytest.raises(ClientError, match="members=True"):
            c.wait_for_members("other", 1)
        fake.emit({"t": "view", "view": 9, "members": [0, 1], "primary": True})
        assert c.wait_for_view(2).view == 9


async def test_self_discard_drops_only_our_own_messages(sock: str) -> None:
    with FakeDaemon(sock) as fake:
        me = await Client.connect(sock, self_discard=True)
        other = await Client.connect(sock)
        assert me.self_discard and not other.self_discard
        for c in (me, other):
            await c.join("g")
        me.send(b"mine", "g")
        await me.sync()
        other.send(b"theirs", "g")
        await other.sync()
        got = [d.payload async for d in _take(me.deliveries(5), 1)]
        assert got == [b"theirs"]
        assert [d.payload async for d in _take(other.deliveries(5), 2)] == [b"mine", b"theirs"]
        assert me.poll_event() is None
        for c in (me, other):
            await c.close()
        del fake


async def _take(it: Any, n: int) -> Any:
    k = 0
    async for x in it:
        yield x
        k += 1
        if k == n:
            return


def test_blocking_self_discard_and_service_aliases(sock: str) -> None:
    with FakeDaemon(sock) as fake:
        with BlockingClient.connect(sock, self_discard=True) as c:
            c.join("g")
            c.send(b"fifo", "g", "fifo")
            c.send(b"reliable", "g", "reliable")
            c.sync()
            with pytest.raises(ClientTimeout):
                c.next_event(0.2)  # its own messages do not come back
            with pytest.raises(ClientError) as info:
                c.send(b"x", "g", "total")
            assert info.value.code == "bad_service" and "fifo" in info.value.detail
        sent = [f for f in fake.received if f["t"] == "send"]
        assert [f["service"] for f in sent] == ["causal"]  # both in one causal frame
        assert sent[0]["payloads"] == [b"fifo", b"reliable"]


def test_blocking_events_batches_drain_and_send_wait(sock: str) -> None:
    with FakeDaemon(sock) as fake:
        c = BlockingClient.connect(sock)
        c.join("g")
        assert c.send_wait(b"a", "g", timeout=1) == 0
        c.drain()
        assert c.unconfirmed_bytes <= 1 and c.max_unconfirmed_bytes > 0
        batch = next(c.batches(5))
        assert isinstance(batch, DeliveredBatch) and [d.payload for d in batch] == [b"a"]
        fake.emit({"t": "view", "view": 2, "members": [0], "primary": True})
        fake.stop()
        assert [type(e) for e in c.events()][:1] == [ViewChange]
        c.abort()


PARITY = ["connect", "close", "abort", "send", "send_wait", "flush", "drain", "sync",
          "join", "leave", "status", "next_event", "poll_event", "events", "batches",
          "deliveries", "wait_for_members", "wait_for_view", "members", "view", "gap",
          "welcome", "node", "client_id", "sent", "confirmed", "errors",
          "unconfirmed_bytes", "max_unconfirmed_bytes", "self_discard"]


def test_both_clients_have_the_same_calls() -> None:
    for name in PARITY:
        assert hasattr(Client, name) and hasattr(BlockingClient, name), name
    for name in ("connect", "send", "sync", "join", "wait_for_members", "close"):
        a = set(inspect.signature(getattr(Client, name)).parameters)
        b = set(inspect.signature(getattr(BlockingClient, name)).parameters)
        shared = {"path", "name", "max_batch_bytes", "max_unconfirmed_bytes", "timeout",
                  "self_discard"} if name == "connect" else a
        assert shared <= a and shared <= b, (name, a ^ b)
