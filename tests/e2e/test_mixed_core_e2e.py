"""A mixed cluster of real daemons: two on the native core, two on the Python one.

4 amcastd on loopback multicast, ``AMCAST_CORE=native`` for nodes 0 and 1 (node 0 as
the native core runs by default: it also seals, opens and guards against replays
natively and moves datagrams with ``recvmmsg``/``sendmmsg``; node 1 with
``AMCAST_SEAL=pure``, ``AMCAST_RELIABLE=pure`` and ``AMCAST_IO=pure``: Python sealing,
reliable layer and socket loop on the native core)
and ``AMCAST_CORE=pure`` for nodes 2 and 3 (a per-daemon ``env`` wrapper, which execs
the daemon in place). Each daemon must report the core it was given (``amcast
status``'s ``core``). Two recording clients per daemon send under load, one ``agreed``, one
``safe``; a native daemon (0) and then a pure one (2) is killed with SIGKILL and
restarted under load. ``faultload.verdict`` judges the whole history: one order at every
daemon that completed a view, whatever core decoded and sealed it, and every message of
a client that stayed connected delivered exactly once or reported back to it.

Skipped, with the reason, where the extension is not built (``make rust``): the
Python-only tier has no native daemon to mix.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from amcast.protocols.wire.native import native_module

from amcast.client import BlockingClient
from amcast.faultload import DELIVER, FaultRun, Recorder
from amcast.localcluster import LocalCluster

pytestmark = [
    pytest.mark.processes,
    pytest.mark.skipif(native_module() is None,
                       reason="amcast_native is not built (make rust): no native daemon to mix"),
]
ENV = (("AMCAST_CORE=native",),
       ("AMCAST_CORE=native", "AMCAST_SEAL=pure", "AMCAST_RELIABLE=pure", "AMCAST_IO=pure"),
       ("AMCAST_CORE=pure",),
       ("AMCAST_CORE=pure",))
CORES = ({"decode": "native", "seal": "native", "reliable": "native", "io": "native"},
         {"decode": "native", "seal": "pure", "reliable": "pure", "io": "pure"},
         {"decode": "pure", "seal": "pure", "reliable": "pure", "io": "pure"},
         {"decode": "pure", "seal": "pure", "reliable": "pure", "io": "pure"})
"""What each daemon runs (``ENV``) and must report (``Node.core``)."""
SERVICES = ("agreed", "safe")
RATE = 60.0  # messages/s per client: 8 clients on a small shared machine
WAIT = 45.0  # bound on every wait for a view or for settling
LOAD_S = 1.0  # seconds of load between the steps


@pytest.fixture
async def run() -> AsyncIterator[FaultRun]:
    directory = Path(tempfile.mkdtemp(prefix="ammix-", dir="/tmp"))
    cluster = LocalCluster(4, directory, metrics=False, log_level="info",
                           wrappers=[["env", *env] for env in ENV])
    fault_run = FaultRun(cluster, rate=RATE)
    try:
        await asyncio.to_thread(cluster.start, 90)
        yield fault_run
    finally:
        await fault_run.close()
        await asyncio.to_thread(cluster.stop, 20)
        shutil.rmtree(directory, ignore_errors=True)


async def connect(run: FaultRun, node: int) -> list[Recorder]:
    """One loaded client per service at ``node``."""
    recs = []
    for service in SERVICES:
        rec = await run.connect(node)
        rec.start_load(RATE, service=service, size=run.size)
        recs.append(rec)
    return recs


def status(cluster: LocalCluster, node: int) -> dict[str, Any]:
    with BlockingClient(cluster.nodes[node].socket) as client:
        return client.status(timeout=10)


async def assert_core(cluster: LocalCluster, node: int) -> None:
    core = (await asyncio.to_thread(status, cluster, node))["core"]
    assert {k: core[k] for k in CORES[node]} == CORES[node], (node, core)
    assert core["order"] == core["decode"], (node, core)  # the ToTo engine follows the core


def settled(run: FaultRun) -> bool:
    """Every live client in one primary view, at the same last position of it, and every
    message owed to a live client delivered. (``FaultRun.settle`` also wants as many
    deliveries at each client in that view: a client that connected to a restarted
    daemon after the view began saw fewer.)"""
    live = run.live()
    views = {r.current_view() for r in live}
    if len(views) != 1:
        return False
    (view,) = views
    if view is None or not view[1]:
        return False
    delivered: set[tuple[int, int]] = set()
    ends = set()
    for r in live:
        delivered |= r.delivered_keys()
        ends.add(max((e[3] for e in r.timeline if e[0] == DELIVER and e[2] == view[0]),
                     default=-1))
    return len(ends) == 1 and all(
        (r.tag, k) in delivered for r in live for k in range(r.next_number)
        if k not in r.reported and k not in r.delivered_away)


async def kill_and_restart(run: FaultRun, node: int) -> None:
    cluster = run.cluster
    others = [i for i in range(4) if i != node]
    killed_at = cluster.kill(node)
    watchers = [run.of(i) for i in others]
    await run.wait_view(others, watchers, after=killed_at, timeout=WAIT)
    await asyncio.sleep(LOAD_S)  # the survivors order on without it
    await asyncio.to_thread(cluster.wait_exit, node, 10)
    restarted = await asyncio.to_thread(cluster.restart, node, 90)
    back = await connect(run, node)
    await run.wait_view(range(4), watchers, after=restarted.spawned_at, timeout=WAIT)
    rejoined = watchers[0].first_view(range(4), restarted.spawned_at)
    assert rejoined is not None and node in rejoined.frame["joined"]
    # its new clients are in that view too (from their welcome when they connected
    # after it was installed, else from a view frame)
    await run.until(lambda: all(r.current_view() == (rejoined.frame["view"], True)
                                for r in back), WAIT, f"node {node}'s clients in the view")
    await assert_core(cluster, node)


async def test_two_native_and_two_pure_daemons_order_alike_through_kill9_and_restart(
    run: FaultRun,
) -> None:
    cluster = run.cluster
    for node in range(4):
        await assert_core(cluster, node)
        await connect(run, node)
    await asyncio.sleep(LOAD_S)
    await kill_and_restart(run, 0)  # a native daemon (sealing natively too)
    await asyncio.sleep(LOAD_S)
    await kill_and_restart(run, 2)  # a pure one
    await asyncio.sleep(LOAD_S)
    await run.stop_load(WAIT)
    await run.until(lambda: settled(run), WAIT, "settling (one view, everything delivered)")
    verdict = run.verdict()
    print(verdict.summary())
    assert verdict.problems == [] and verdict.accounted_for
    final = run.of(1).last_view()
    assert final is not None and final.frame["members"] == [0, 1, 2, 3]
    # the clients that saw the final view from its start completed it with one sequence
    info = verdict.views[final.frame["view"]]
    assert {r.tag for r in run.recorders if r.node in (1, 3)} <= set(info["complete"])
    # every service was ordered at every core: the final view's sequence is one and the
    # same at all eight clients, and holds messages of each service from each daemon
    for rec in run.live():
        told = [k for k in range(rec.next_number) if k not in rec.reported]
        assert told, rec
        last = (rec.tag, told[-1])
        assert all(last in other.delivered_keys() for other in run.live()), (rec, last)
    # the clients of the daemons that stayed up (1 native, 3 pure) lost nothing
    for rec in run.recorders:
        if rec.node in (1, 3):
            assert rec.closed_at is None, rec
            missing = [k for k in range(rec.next_number) if k not in rec.reported
                       and (rec.tag, k) not in rec.delivered_keys()]
            assert missing == [], (rec, missing[:5])
