"""IPv6 on the loopback (::1): three real daemons over UDP unicast order one client's
messages identically at the others. (IPv6 multicast needs a link with multicast: it is
tested in network namespaces, ``tests/deploy/test_netns.py``.)"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path

import pytest

from amcast.client import BlockingClient
from amcast.localcluster import LocalCluster

pytestmark = pytest.mark.processes
WAIT = 30.0


def exchange(cluster: LocalCluster, count: int) -> list[list[bytes]]:
    receivers = [BlockingClient(s) for s in cluster.sockets[1:]]
    try:
        for rx in receivers:
            rx.join("g", timeout=WAIT)
        with BlockingClient(cluster.sockets[0]) as tx:
            for i in range(count):
                tx.send(b"v6 %d" % i, "g")
            tx.sync(timeout=WAIT)
        out = []
        for rx in receivers:
            got: list[bytes] = []
            for d in rx.deliveries(timeout=WAIT):
                got.append(d.payload)
                if len(got) == count:
                    break
            out.append(got)
        return out
    finally:
        for rx in receivers:
            rx.close()


async def test_three_daemons_over_ipv6_unicast_on_the_loopback() -> None:
    directory = Path(tempfile.mkdtemp(prefix="amv6-", dir="/tmp"))
    cluster = LocalCluster(3, directory, metrics=False, transport="unicast",
                           interfaces=["::1"] * 3)
    await asyncio.to_thread(cluster.start, 60)
    try:
        config = cluster.nodes[0].config.read_text()
        assert 'interface = "::1"' in config and "[::1]:" in config
        got = await asyncio.to_thread(exchange, cluster, 200)
        assert got == [[b"v6 %d" % i for i in range(200)]] * 2
    finally:
        await asyncio.to_thread(cluster.stop, 20)
        shutil.rmtree(directory, ignore_errors=True)
