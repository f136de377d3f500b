"""A real multi-host cluster: three network namespaces joined by a bridge.

Each namespace gets a veth pair into a bridge in the root namespace, an address on
10.231.R.0/24 and a multicast route; one amcastd runs in each (``ip netns exec``), with
multicast crossing the bridge (IGMP snooping off, so no querier is needed). The daemons'
unix sockets are files, reachable from the test in the root namespace; every node's
client sends concurrently and all three must deliver the identical sequence. Traffic
stays inside the namespaces; everything is removed afterwards, even on failure.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from amcast.client import Client
from amcast.demo import check_sequences
from amcast.loadgen import LoadReport, Receiver
from amcast.localcluster import LocalCluster
from tests.deploy.netns import (
    add_bridge,
    ip,
    multicast_setup,
    namespaces_or_skip,
    plug,
    remove,
)
from tests.steady import STEADY

NODES = 3
PER_NODE = 300



@pytest.fixture(params=["multicast", "unicast", "multicast-ipv6", "unicast-ipv6"])
def namespaces(request: pytest.FixtureRequest) -> Iterator[tuple[list[str], list[str], str]]:
    """Namespaces on a bridge; for ``unicast`` their links have multicast off and no
    multicast route, so nothing of the unicast path can use it; ``-ipv6``: only IPv6
    unique-local addresses (fd42:R::/64, no DAD wait), an ff05:: group for multicast."""
    transport, _, version = request.param.partition("-")
    tag = namespaces_or_skip("amc")
    subnet = 1 + int(tag, 16) % 250
    bridge = f"amb{tag}"
    names = [f"amc{tag}n{i}" for i in range(NODES)]
    if version == "ipv6":
        addresses = [f"fd42:{subnet:x}::{10 + i:x}" for i in range(NODES)]
    else:
        addresses = [f"10.231.{subnet}.{10 + i}" for i in range(NODES)]
    try:
        add_bridge(bridge)
        for i, (ns, addr) in enumerate(zip(names, addresses, strict=True)):
            outer, inner = f"amo{tag}{i}", f"ami{tag}{i}"
            ip("netns", "add", ns)
            plug(ns, outer, inner, bridge)
            if version == "ipv6":
                setup = [("-6", "addr", "add", f"{addr}/64", "dev", inner, "nodad"),
                         ("link", "set", "lo", "up")]
            else:
                setup = [("addr", "add", f"{addr}/24", "dev", inner),
                         ("link", "set", "lo", "up")]
            if transport == "multicast" and version == "ipv6":  # ff00::/8 comes with the link
                setup += [("link", "set", inner, "up", "multicast", "on")]
            else:
                setup += multicast_setup(inner, transport)
            for args in setup:
                ip("-n", ns, *args)
        yield names, addresses, request.param
    finally:
        remove(names, [bridge])


async def _run(cluster: LocalCluster) -> list[LoadReport]:
    clients = [await Client.connect(s, name=f"netns-{i}") for i, s in enumerate(cluster.sockets)]
    reports = [LoadReport(node=c.node) for c in clients]
    receivers = [Receiver(c, r, tag=i, keep_sequence=True)
                 for i, (c, r) in enumerate(zip(clients, reports, strict=True))]
    try:
        for c in clients:
            await c.join("g")
        tasks = [asyncio.create_task(rx.run()) for rx in receivers]
        for k in range(PER_NODE):
            for i, c in enumerate(clients):
                c.send(f"{i}:{k}".encode(), "g")
        for c in clients:
            await c.drain()

        expected = NODES * PER_NODE
        await asyncio.wait_for(asyncio.gather(*(rx.until(expected) for rx in receivers)), 30)
        for t in tasks:
            t.cancel()
        return reports
    finally:
        for c in clients:
            await c.close()


def test_three_namespaces_over_a_bridge_deliver_the_identical_order(
    namespaces: tuple[list[str], list[str], str], tmp_path: Path
) -> None:
    names, addresses, kind = namespaces
    transport, _, version = kind.partition("-")
    group = {"group": f"ff05::42:{secrets.randbelow(0xffff):x}"} if version == "ipv6" else {}
    cluster = LocalCluster(NODES, tmp_path / "c", protocol={"insecure": True, **STEADY},
                           metrics=False, transport=transport, **group,
                           interfaces=addresses,
                           wrappers=[["ip", "netns", "exec", ns] for ns in names])
    cluster.start(timeout=30)
    try:
        reports = asyncio.run(_run(cluster))
    finally:
        codes = cluster.stop()
    assert check_sequences(reports, NODES * PER_NODE) == []
    assert [r.delivered for r in reports] == [NODES * PER_NODE] * NODES
    assert set(codes.values()) == {0}
