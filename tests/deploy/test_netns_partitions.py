"""Partitions of a real multi-host cluster: 4 network namespaces, links cut and healed.

Each namespace has a veth pair whose outer end is a port of bridge A (the LAN, as in
test_netns.py: addresses on 10.231.R.0/24, a multicast route, IGMP snooping off). A
partition moves the outer ends of one side to bridge B (``ip link set ... master``):
the two sides no longer hear each other, exactly as when a switch splits; healing moves
them back. One amcastd per namespace with amcast's default membership settings, a
recording client on each (``amcast.faultload``, over the daemons' unix sockets, which
are files reachable from the root namespace) sending 200 messages/s throughout:

- 3|1: the majority installs a view of 3 and goes on ordering; the minority's client is
  told (a ``view`` frame with ``"primary": false``) and receives nothing more until the
  heal; healed, one view of 4 again, with a gap notice at the minority;
- 2|2: no side holds a majority of 4: every client is told, nobody orders, no primary
  view is installed anywhere until the heal; then one view of 4;
- the whole history: identical sequences in every view at the daemons that completed
  it, every message of every client delivered exactly once or reported back to it.

``tc netem`` loss and delay on one link runs when the kernel has the netem qdisc and is
skipped with the reason otherwise (``tests/e2e/test_lossy_links.py`` runs loss, duplication
and reordering between real daemons without it, through a userspace relay). Traffic
stays inside the namespaces; everything is removed afterwards, even on failure.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from amcast.faultload import GAP, FaultRun, Recorder
from amcast.localcluster import LocalCluster
from tests.deploy.netns import (
    add_bridge,
    delivered_between,
    ip,
    multicast_setup,
    namespaces_or_skip,
    plug,
    remove,
)

NODES = 4
WAIT = 30.0
LOAD_S = 1.0



@dataclass
class Lan:
    names: list[str]
    addresses: list[str]
    outer: list[str]  # the bridge-side end of each namespace's veth
    bridges: tuple[str, str]  # A: the LAN; B: where a cut-off side is moved
    transport: str = "multicast"  # unicast: no multicast on the links, no route for it

    def partition(self, side: list[int]) -> float:
        """Cut ``side`` off from the others; the time just before."""
        at = time.monotonic()
        for i in side:
            ip("link", "set", self.outer[i], "master", self.bridges[1])
        return at

    def heal(self) -> float:
        at = time.monotonic()
        for port in self.outer:
            ip("link", "set", port, "master", self.bridges[0])
        return at


@pytest.fixture(params=["multicast", "unicast"])
def lan(request: pytest.FixtureRequest) -> Iterator[Lan]:
    transport = request.param
    tag = namespaces_or_skip("amq")
    subnet = 1 + int(tag, 16) % 250
    bridges = (f"amqa{tag}", f"amqb{tag}")
    names = [f"amq{tag}n{i}" for i in range(NODES)]
    addresses = [f"10.232.{subnet}.{10 + i}" for i in range(NODES)]
    outer = [f"amqo{tag}{i}" for i in range(NODES)]
    try:
        for bridge in bridges:
            add_bridge(bridge)
        for i, (ns, addr) in enumerate(zip(names, addresses, strict=True)):
            inner = f"amqi{tag}{i}"
            ip("netns", "add", ns)
            plug(ns, outer[i], inner, bridges[0])
            setup = [("addr", "add", f"{addr}/24", "dev", inner), ("link", "set", "lo", "up"),
                     *multicast_setup(inner, transport)]
            for args in setup:
                ip("-n", ns, *args)
        yield Lan(names, addresses, outer, bridges, transport)
    finally:
        remove(names, bridges)


def lost_notice(rec: Recorder, after: float) -> float | None:
    """Arrival of the first ``"primary": false`` view frame at or after ``after``."""
    return next((n.at for n in rec.notices
                 if n.at >= after and n.kind != GAP and not n.primary), None)


async def _scenario(cluster: LocalCluster, lan: Lan) -> None:
    run = FaultRun(cluster, rate=200)
    try:
        await run.connect_all()
        run.start_load()
        recs = list(run.recorders)
        await asyncio.sleep(LOAD_S)

        # 3|1: the majority orders, the minority is told and delivers nothing more
        cut = lan.partition([3])
        seen = await run.wait_view([0, 1, 2], recs[:3], after=cut, timeout=WAIT)
        told = await run.until(lambda: lost_notice(recs[3], cut), WAIT, "minority told")
        print(f"3|1: majority view {max(seen.values()) - cut:.3f} s after the cut, "
              f"minority told after {told - cut:.3f} s")
        await asyncio.sleep(LOAD_S)
        healed = lan.heal()
        assert delivered_between(recs[3], told, healed) == 0
        assert all(delivered_between(r, max(seen.values()), healed) > 0 for r in recs[:3])
        back = await run.wait_view(range(NODES), recs, after=healed, timeout=WAIT)
        print(f"3|1 healed: one view of 4 {max(back.values()) - healed:.3f} s later")
        merged = recs[3].first_view(range(NODES), healed)
        assert merged is not None
        assert any(n.kind == GAP and n.frame["view"] == merged.frame["view"]
                   for n in recs[3].notices if n.at >= healed)
        await asyncio.sleep(LOAD_S)

        # 2|2: no majority anywhere, every client told, no primary view until the heal
        cut = lan.partition([2, 3])
        lost = await run.until(
            lambda: (t if all(t := [lost_notice(r, cut) for r in recs]) else None),
            WAIT, "every client told (2|2)")
        print(f"2|2: every client told within {max(lost) - cut:.3f} s of the cut")
        await asyncio.sleep(LOAD_S)
        healed = lan.heal()
        for r, t in zip(recs, lost, strict=True):
            assert delivered_between(r, t, healed) == 0, r
            assert not [n for n in r.notices if cut <= n.at < healed and n.primary], r
        back = await run.wait_view(range(NODES), recs, after=healed, timeout=WAIT)
        print(f"2|2 healed: one view of 4 {max(back.values()) - healed:.3f} s later")
        await asyncio.sleep(LOAD_S)

        verdict = await run.stop_and_judge(WAIT)
        print(verdict.summary())
        assert verdict.problems == []
        assert verdict.lost_clients == 0 and verdict.sent > 0
        assert verdict.accounted_for
    finally:
        await run.close()


@pytest.mark.processes
def test_partitions_3_1_and_2_2_only_a_majority_orders_and_heals_merge(
    lan: Lan, tmp_path: Path,
) -> None:
    cluster = LocalCluster(NODES, tmp_path / "c", metrics=False, log_level="info",
                           transport=lan.transport, interfaces=lan.addresses,
                           wrappers=[["ip", "netns", "exec", ns] for ns in lan.names])
    cluster.start(timeout=60)
    try:
        asyncio.run(_scenario(cluster, lan))
    finally:
        codes = cluster.stop()
    assert set(codes.values()) == {0}


async def _lossy(cluster: LocalCluster) -> None:
    run = FaultRun(cluster, rate=200)
    try:
        await run.connect_all()
        run.start_load()
        await asyncio.sleep(3 * LOAD_S)
        verdict = await run.stop_and_judge(WAIT)
        print(verdict.summary())
        assert verdict.problems == [] and verdict.sent > 0
        assert verdict.accounted_for
    finally:
        await run.close()


@pytest.mark.processes
def test_netem_loss_and_delay_on_one_link(lan: Lan, tmp_path: Path) -> None:
    """2% loss and 5 +- 1 ms delay on node 0's link: repair and ordering still give
    identical sequences and exactly-once delivery (an extra view change, should the loss
    make a member suspected, is judged like any other)."""
    if shutil.which("tc") is None:
        pytest.skip("tc (iproute2) not found: no loss or delay injected")
    probe = subprocess.run(["tc", "qdisc", "add", "dev", lan.outer[0], "root", "netem",
                            "delay", "5ms", "1ms", "loss", "2%"],
                           capture_output=True, text=True, timeout=20, check=False)
    if probe.returncode != 0:
        pytest.skip(f"tc netem is not available on this kernel ({probe.stderr.strip()}; "
                    "the sch_netem module is missing): no loss or delay injected here "
                    "(tests/e2e/test_lossy_links.py runs loss with a userspace relay)")
    cluster = LocalCluster(NODES, tmp_path / "c", metrics=False, log_level="info",
                           transport=lan.transport, interfaces=lan.addresses,
                           wrappers=[["ip", "netns", "exec", ns] for ns in lan.names])
    cluster.start(timeout=60)
    try:
        asyncio.run(_lossy(cluster))
    finally:
        codes = cluster.stop()
    assert set(codes.values()) == {0}
