"""The clients against real ``amcastd`` processes.

``test_the_daemon_answers_sync``, ``test_a_stopping_daemon_names_undelivered_messages``
and ``test_status_carries_health`` need the daemon side of the protocol contract
(``sync``/``synced``, ``undelivered``, ``status.health``): they pass once the daemon
branch is merged."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from amcast.client import BlockingClient, Client, ConnectionClosed, MessagesRefused
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
    assert json.loads(r.out)["health"] == {"ok": True, "problems": []}


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
        with pytest.raises(ConnectionClosed) as info:
            await c.next_event(30)
        err = info.value
        assert err.code == "shutting_down"
        unknown = list(err.unknown_messages())
        assert unknown and unknown[-1] == 49 and unknown == list(range(unknown[0], 50))
    finally:
        os.kill(frozen, signal.SIGCONT)
        await asyncio.to_thread(cluster.stop)
