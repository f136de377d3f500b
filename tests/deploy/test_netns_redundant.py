"""Redundant links in network namespaces: two bridges, two links per daemon
(``network.redundant``); one link is cut, then the other, under load, and nothing stalls.

Three namespaces, each with a veth on bridge A (10.233.R.0/24) and one on bridge B
(10.234.R.0/24). A recording client on every daemon sends 200 msgs/s. Link A is cut
(every namespace's port leaves bridge A) for 1.5 s, healed, then link B for 1.5 s. Over
multicast and over unicast: messages keep being delivered during each cut, no view
changes (no member was suspected), and the whole history is judged by
``faultload.verdict`` (identical order, exactly once, nothing accepted lost).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from amcast.faultload import FaultRun
from amcast.localcluster import LocalCluster
from tests.deploy.netns import (
    add_bridge,
    delivered_between,
    ip,
    namespaces_or_skip,
    plug,
    remove,
)

NODES = 3
CUT_S = 1.5
WAIT = 30.0



@dataclass
class TwoLinks:
    names: list[str]
    addresses: tuple[list[str], list[str]]  # link A, link B
    outer: tuple[list[str], list[str]]  # bridge-side veth ends, per link
    bridges: tuple[str, str]

    def cut(self, link: int) -> float:
        at = time.monotonic()
        for port in self.outer[link]:
            ip("link", "set", port, "nomaster")
        return at

    def heal(self, link: int) -> float:
        at = time.monotonic()
        for port in self.outer[link]:
            ip("link", "set", port, "master", self.bridges[link])
        return at


@pytest.fixture
def two_links() -> Iterator[TwoLinks]:
    tag = namespaces_or_skip("amr")
    subnet = 1 + int(tag, 16) % 250
    bridges = (f"amra{tag}", f"amrb{tag}")
    names = [f"amr{tag}n{i}" for i in range(NODES)]
    addresses = ([f"10.233.{subnet}.{10 + i}" for i in range(NODES)],
                 [f"10.234.{subnet}.{10 + i}" for i in range(NODES)])
    outer = ([f"amroa{tag}{i}" for i in range(NODES)], [f"amrob{tag}{i}" for i in range(NODES)])
    try:
        for bridge in bridges:
            add_bridge(bridge)
        for i, ns in enumerate(names):
            ip("netns", "add", ns)
            ip("-n", ns, "link", "set", "lo", "up")
            for link in (0, 1):
                inner = f"amri{'ab'[link]}{tag}{i}"
                plug(ns, outer[link][i], inner, bridges[link])
                ip("-n", ns, "addr", "add", f"{addresses[link][i]}/24", "dev", inner)
                ip("-n", ns, "link", "set", inner, "up", "multicast", "on")
                ip("-n", ns, "route", "add", "224.0.0.0/4", "dev", inner,
                    "metric", str(100 + link))
        yield TwoLinks(names, addresses, outer, bridges)
    finally:
        remove(names, bridges)


async def _cut_each_link_in_turn(cluster: LocalCluster, links: TwoLinks) -> None:
    run = FaultRun(cluster, rate=200)
    try:
        await run.connect_all()
        run.start_load()
        await asyncio.sleep(1.0)
        windows = []
        for link in (0, 1):
            cut_at = links.cut(link)
            await asyncio.sleep(CUT_S)
            healed_at = links.heal(link)
            windows.append((cut_at, healed_at))
            await asyncio.sleep(1.0)
        verdict = await run.stop_and_judge(WAIT)
        print(verdict.summary())
        assert verdict.problems == [] and verdict.accounted_for
        for rec in run.live():
            assert rec.views() == [], (rec, rec.views())  # nobody was suspected
            for cut_at, healed_at in windows:  # and the order went on during each cut
                assert delivered_between(rec, cut_at + 0.3, healed_at) > 0, (rec, cut_at)
    finally:
        await run.close()


@pytest.mark.processes
@pytest.mark.parametrize("transport", ["multicast", "unicast"])
def test_cutting_either_link_under_load_stalls_nothing(
    two_links: TwoLinks, tmp_path: Path, transport: str,
) -> None:
    cluster = LocalCluster(NODES, tmp_path / "c", metrics=False, log_level="info",
                           transport=transport, interfaces=two_links.addresses[0],
                           redundant_interfaces=two_links.addresses[1],
                           wrappers=[["ip", "netns", "exec", ns] for ns in two_links.names])
    cluster.start(timeout=60)
    try:
        asyncio.run(_cut_each_link_in_turn(cluster, two_links))
    finally:
        codes = cluster.stop()
    assert set(codes.values()) == {0}
