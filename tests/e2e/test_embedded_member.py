"""End-to-end: an embedded member (``amcast.member.Member``, the daemon inside this test's
process) and two ``amcastd`` processes in one group: one order at all three, through a
kill -9 of a daemon and its restart."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from amcast.client import Client, DeliveredBatch
from amcast.localcluster import LocalCluster
from amcast.member import Member
from tests.steady import STEADY

pytestmark = pytest.mark.processes


@pytest.fixture
def short_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="amce-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


async def take(client: Client, tag: str, count: int, timeout: float = 60.0) -> list[str]:
    """Delivered message ids, in delivery order, until ``count`` messages whose payload
    starts with ``tag`` have come."""
    ids: list[str] = []
    seen = 0
    while seen < count:
        event = await client.next_event(timeout=timeout)
        if isinstance(event, DeliveredBatch):
            for d in event:
                if seen < count:
                    ids.append(d.message_id)
                    seen += d.payload.startswith(tag.encode())
    return ids


async def send(clients: list[Client], count: int, tag: str) -> None:
    for i in range(count):
        for k, c in enumerate(clients):
            await c.send_wait(f"{tag}-{k}-{i}".encode(), "g")
    for c in clients:
        await c.drain(timeout=60)


async def test_an_embedded_member_and_daemons_deliver_one_order(short_dir: Path) -> None:
    cluster = LocalCluster(3, short_dir, protocol=dict(STEADY), metrics=False)
    cluster.write_configs()
    embedded = cluster.nodes[2]
    cluster.nodes = cluster.nodes[:2]
    await asyncio.to_thread(cluster.start, 60.0, wait_view=False)
    member = None
    clients: list[Client] = []
    try:
        member = await Member.start(embedded.config, name="embedded")
        assert member.node_id == 2 and member.running
        c0 = await Client.connect(cluster.sockets[0], name="d0")
        c1 = await Client.connect(cluster.sockets[1], name="d1")
        clients = [c0, c1, member.client]
        for c in clients:
            await c.join("g", members=True)
        for c in clients:
            await c.wait_for_members("g", 3, timeout=60)
        view = await member.client.wait_for_view(3, timeout=60)
        assert sorted(view.members) == [0, 1, 2]

        await send(clients, 100, "a")
        orders = await asyncio.gather(*(take(c, "a", 300) for c in clients))
        assert orders[0] == orders[1] == orders[2]
        assert {m.split(":")[1] for m in orders[0]} == {"0", "1", "2"}

        # kill -9 of a daemon: the other daemon and the embedded member go on in one order
        cluster.kill(1)
        c1.abort()
        await member.client.wait_for_view([0, 2], timeout=60)
        survivors = [c0, member.client]
        await send(survivors, 50, "b")
        after = await asyncio.gather(*(take(c, "b", 100) for c in survivors))
        assert after[0] == after[1]

        # its restart: back to three members, one order again
        await asyncio.to_thread(cluster.restart, 1, 60.0)
        c1 = await Client.connect(cluster.sockets[1], name="d1b")
        await c1.join("g", members=True)
        await member.client.wait_for_view(3, timeout=60)
        for c in (c0, c1, member.client):
            await c.wait_for_members("g", 3, timeout=60)
        clients = [c0, c1, member.client]
        await send(clients, 30, "c")
        tails = await asyncio.gather(*(take(c, "c", 90) for c in clients))
        assert tails[0] == tails[1] == tails[2]
        status = await member.client.status()
        assert status["node"] == 2
    finally:
        for c in clients:
            c.abort()
        if member is not None:
            assert await member.stop() == 0
        await asyncio.to_thread(cluster.stop)
