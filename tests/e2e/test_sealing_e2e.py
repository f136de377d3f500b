"""Datagram sealing on real daemons (loopback multicast, ``LocalCluster``): an observer
joined to the group sees no payload byte; captured datagrams replayed to the group are
dropped and counted (at once, after a view change and the sender's restart, after the
freshness window), never delivered twice; a key rollover under load loses and refuses
nothing."""

from __future__ import annotations

import asyncio
import shutil
import signal
import socket
import struct
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from amcast.protocols.wire.auth import Authenticator
from amcast.protocols.wire.codec import decode_unchecked
from amcast.protocols.wire.keys import Keyring
from amcast.protocols.wire.limits import WireLimits

from amcast import keygen
from amcast.client import BlockingClient
from amcast.faultload import FaultRun
from amcast.localcluster import LocalCluster

pytestmark = pytest.mark.processes
WAIT = 30.0  # bound on every wait (a loaded 2-core machine)
CANARY = b"PLAINTEXT-CANARY"
WINDOW_S = 8.0  # protocol.replay_window of the restart test: room for a slow restart


@pytest.fixture
async def make_cluster() -> AsyncIterator[Callable[..., Any]]:
    made: list[tuple[LocalCluster, Path]] = []

    async def make(n: int, **protocol: Any) -> LocalCluster:
        directory = Path(tempfile.mkdtemp(prefix="amsl-", dir="/tmp"))
        cluster = LocalCluster(n, directory, metrics=False, protocol=protocol)
        made.append((cluster, directory))
        await asyncio.to_thread(cluster.start, 60)
        return cluster

    try:
        yield make
    finally:
        for cluster, directory in made:
            await asyncio.to_thread(cluster.stop, 20)
            shutil.rmtree(directory, ignore_errors=True)


class Observer:
    """A socket joined to the cluster's group: records every datagram; can replay them."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.address = (cluster.group, cluster.port)
        rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        rx.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        rx.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        rx.bind(self.address)
        mreq = struct.pack("4s4s", socket.inet_aton(cluster.group), socket.inet_aton("127.0.0.1"))
        rx.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, mreq)
        rx.setblocking(False)
        tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        tx.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
        tx.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 0)
        self.rx, self.tx = rx, tx
        self.captured: list[bytes] = []

    def drain(self) -> list[bytes]:
        """What arrived so far (loopback multicast is queued at send time)."""
        while True:
            try:
                self.captured.append(self.rx.recv(70_000))
            except BlockingIOError:
                return self.captured

    def replay(self, datagrams: list[bytes]) -> None:
        for data in datagrams:
            self.tx.sendto(data, self.address)

    def close(self) -> None:
        self.rx.close()
        self.tx.close()


def send_and_receive(cluster: LocalCluster, sender: int, receiver: int,
                     payloads: list[bytes]) -> list[bytes]:
    """Send from one daemon, return what a client of another got (in order)."""
    with BlockingClient(cluster.sockets[receiver]) as rx, \
            BlockingClient(cluster.sockets[sender]) as tx:
        rx.join("g", timeout=WAIT)
        for p in payloads:
            tx.send(p, "g")
        tx.sync(timeout=WAIT)
        got = []
        for d in rx.deliveries(timeout=WAIT):
            got.append(d.payload)
            if len(got) == len(payloads):
                break
        return got


def drops(cluster: LocalCluster, node: int) -> dict[str, int]:
    with BlockingClient(cluster.sockets[node]) as c:
        return dict(c.status(timeout=WAIT)["counters"]["drops"])


def key_status(cluster: LocalCluster, node: int) -> dict[str, Any]:
    with BlockingClient(cluster.sockets[node]) as c:
        return dict(c.status(timeout=WAIT)["keys"])


def senders(cluster: LocalCluster, datagrams: list[bytes]) -> list[int]:
    """Who sent each datagram (the test holds the key file, as a member would)."""
    assert cluster.key_file is not None
    auth = Authenticator(Keyring.parse(cluster.key_file.read_text()), bytes(16))
    return [decode_unchecked(d, auth, WireLimits())[1].sender for d in datagrams]


async def test_an_observer_sees_no_payload_and_every_replay_is_dropped(make_cluster) -> None:
    cluster: LocalCluster = await make_cluster(3)
    observer = Observer(cluster)
    try:
        payloads = [CANARY + b"-%03d" % i for i in range(40)]
        assert await asyncio.to_thread(send_and_receive, cluster, 0, 1, payloads) == payloads
        captured = list(observer.drain())
        assert sum(map(len, captured)) > sum(map(len, payloads))  # the payloads went by
        assert not [d for d in captured if CANARY in d or b"CANARY" in d]
        before = [await asyncio.to_thread(drops, cluster, i) for i in range(3)]
        observer.replay(captured)
        # the marker goes out after the copies: once it is delivered, they were handled
        assert await asyncio.to_thread(send_and_receive, cluster, 0, 1, [b"marker"]) == [
            b"marker"]  # and nothing was delivered a second time before it
        for i in range(3):
            after = await asyncio.to_thread(drops, cluster, i)
            replayed = after.get("replayed", 0) - before[i].get("replayed", 0)
            assert replayed == len(captured), (i, before[i], after)
    finally:
        observer.close()


async def test_replays_after_a_restart_and_after_the_window_are_dropped(make_cluster) -> None:
    cluster: LocalCluster = await make_cluster(3, replay_window=WINDOW_S)
    observer = Observer(cluster)
    try:
        payloads = [b"first life %d" % i for i in range(20)]
        assert await asyncio.to_thread(send_and_receive, cluster, 2, 0, payloads) == payloads
        captured = list(observer.drain())
        captured_at = time.monotonic()
        old_life = [d for d, s in zip(captured, senders(cluster, captured), strict=True) if s == 2]
        assert old_life
        cluster.kill(2)  # kill -9, then start again: a new session, a new incarnation
        await asyncio.to_thread(cluster.wait_exit, 2, WAIT)
        await asyncio.to_thread(cluster.restart, 2, 60, 3)
        assert time.monotonic() - captured_at < WINDOW_S - 1, "the restart took too long"
        before = [await asyncio.to_thread(drops, cluster, i) for i in (0, 1)]
        observer.replay(old_life)
        assert await asyncio.to_thread(send_and_receive, cluster, 2, 1, [b"after"]) == [b"after"]
        for k, i in enumerate((0, 1)):  # the survivors remember the old session
            after = await asyncio.to_thread(drops, cluster, i)
            assert after.get("replayed", 0) - before[k].get("replayed", 0) == len(old_life)
        # past the freshness window, every copy is stale, at every daemon, the restarted
        # one included (which remembers nothing of what it admitted before)
        await asyncio.sleep(max(0.0, captured_at + WINDOW_S + 0.2 - time.monotonic()))
        before = [await asyncio.to_thread(drops, cluster, i) for i in range(3)]
        observer.replay(captured)
        assert await asyncio.to_thread(send_and_receive, cluster, 0, 2, [b"later"]) == [b"later"]
        for i in range(3):
            after = await asyncio.to_thread(drops, cluster, i)
            assert after.get("stale", 0) - before[i].get("stale", 0) == len(captured), i
    finally:
        observer.close()


async def test_a_key_rollover_under_load_loses_and_refuses_nothing(make_cluster) -> None:
    cluster: LocalCluster = await make_cluster(3)
    assert cluster.key_file is not None
    run = FaultRun(cluster, rate=200)
    await run.connect_all()
    run.start_load()
    try:
        async def until(done: Callable[[list[dict[str, Any]]], bool], what: str) -> None:
            deadline = time.monotonic() + WAIT
            while True:
                states = [await asyncio.to_thread(key_status, cluster, i) for i in range(3)]
                if done(states):
                    return
                assert time.monotonic() < deadline, f"{what}: {states}"
                await asyncio.sleep(0.2)  # each daemon re-chooses its key every 0.5 s

        await asyncio.sleep(0.5)
        keygen.rotate(cluster.key_file)  # step 1: keys 1 and 2, copied to every node
        cluster.kill_node(0, signal.SIGHUP)  # only node 0 reloads for now
        await until(lambda s: s[0]["ids"] == [1, 2], "node 0 holds both keys")
        await asyncio.sleep(1.0)  # node 0 would switch within 0.5 s if it were allowed to
        states = [await asyncio.to_thread(key_status, cluster, i) for i in range(3)]
        assert [s["sends_with"] for s in states] == [1, 1, 1], states  # the others lack 2
        for node in (1, 2):
            cluster.kill_node(node, signal.SIGHUP)
        await until(lambda s: all(x["sends_with"] == 2 and
                                  all(p["sends_with"] == 2 for p in x["peers"]) for x in s),
                    "every node sends with key 2")
        keygen.retire(cluster.key_file)  # step 2: key 2 only
        for node in range(3):
            cluster.kill_node(node, signal.SIGHUP)
        await until(lambda s: all(x["ids"] == [2] for x in s), "key 1 retired everywhere")
        await asyncio.sleep(0.5)
        verdict = await run.stop_and_judge(WAIT)
        print(verdict.summary())
        assert verdict.problems == [] and verdict.accounted_for
        for i in range(3):
            d = await asyncio.to_thread(drops, cluster, i)
            assert not {"unknown_key", "auth_failed"} & set(d), (i, d)
    finally:
        await run.close()
