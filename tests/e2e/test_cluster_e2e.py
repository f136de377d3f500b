"""End-to-end: real amcastd processes on loopback multicast (127.0.0.1, 239.255.x.y)."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

from amcast.cli import main as amcast_main
from amcast.client import BlockingClient, Client
from amcast.demo import run_cluster_workload
from amcast.localcluster import LocalCluster
from daemon.frames import PREFIX, FrameDecoder, encode


@pytest.fixture
def short_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="amce-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


async def test_four_daemons_order_10000_concurrent_messages_identically(short_dir: Path) -> None:
    result = await run_cluster_workload(
        short_dir, nodes=4, per_node=2500, protocol={"insecure": True, "datagram_budget": 16000},
        timeout=150,
    )
    assert result.problems == []
    assert {r.digest for r in result.reports} == {result.reports[0].digest}
    assert all(r.delivered == 10_000 for r in result.reports)
    assert result.exit_codes == {0: 0, 1: 0, 2: 0, 3: 0}
    # the delivery logs agree with what the clients saw
    for i in range(4):
        text = (short_dir / f"node{i}" / "logs" / "delivery.jsonl").read_text()
        assert text.count('"type":"delivery"') >= 1


async def test_mixed_service_levels(short_dir: Path) -> None:
    result = await run_cluster_workload(
        short_dir, nodes=4, per_node=600, services=("causal", "agreed", "safe"),
        protocol={"insecure": True}, timeout=150,
    )
    assert result.problems == []  # same total order, same causal set, nothing lost/duplicated
    for r in result.reports:
        by_origin: dict[tuple[int, int], list[int]] = defaultdict(list)
        for position, _mid, sender, client, payload in r.sequence:
            service = ("causal", "agreed", "safe")[int.from_bytes(payload[12:16], "big") % 3]
            by_origin[(sender, client)].append(int.from_bytes(payload[12:16], "big"))
            if service == "causal":
                assert position is None
            else:
                assert position is not None
        # one client's messages come in the order it sent them, whatever their service
        # levels: each is in the causal past of the next, and a causal message never
        # overtakes an agreed/safe one in its past
        for seqs in by_origin.values():
            assert seqs == sorted(seqs)


def test_bad_client_frames_on_a_live_cluster_and_cli(short_dir: Path) -> None:
    cluster = LocalCluster(2, short_dir, protocol={"insecure": True}, metrics=False)
    cluster.start()
    try:
        sock = cluster.sockets[0]
        with BlockingClient(sock) as good:
            good.join("g")
            import socket

            bad = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            bad.connect(sock)
            bad.settimeout(10)
            dec = FrameDecoder()
            bad.sendall(encode({"t": "hello", "v": 1}))
            bad.sendall(PREFIX.pack(5) + b"\xff\xfe\xfd\xfc\xfb")  # garbage
            bad.sendall(PREFIX.pack(50_000_000))  # oversized: announced, skipped
            bad.sendall(b"\0" * 1000)
            bad.shutdown(socket.SHUT_WR)  # ... and truncated (the stream ends inside it)
            frames: list[dict] = []
            while True:
                data = bad.recv(65536)
                if not data:
                    break
                frames += dec.feed(data)
            bad.close()
            assert [f["t"] for f in frames] == ["welcome", "error", "error", "error"]
            assert [f["code"] for f in frames[1:]] == [
                "bad_frame", "frame_too_large", "truncated_frame"
            ]
            # the daemon keeps serving the good client, through the CLI too
            assert amcast_main(["send", "-s", cluster.sockets[1], "-g", "g", "--wait",
                                "hello", "world"]) == 0
            got = [d.payload for _, d in zip(range(2), good.deliveries(10), strict=False)]
            assert got == [b"hello", b"world"]
            assert amcast_main(["status", "-s", sock, "--interval", "0", "--json"]) == 0
    finally:
        codes = cluster.stop()
    assert codes == {0: 0, 1: 0}
    assert not Path(cluster.sockets[0]).exists()


async def test_sigterm_while_clients_send_is_clean(short_dir: Path) -> None:
    cluster = LocalCluster(2, short_dir, protocol={"insecure": True}, metrics=False)
    await asyncio.to_thread(cluster.start)
    try:
        client = await Client.connect(cluster.sockets[0])
        await client.join("g")
        for k in range(500):
            client.send(str(k).encode(), "g")
        await client.drain()
        got = 0
        async for _ in client.deliveries(10):
            got += 1
            if got == 500:
                break
        cluster.kill_node(0)
        assert await asyncio.to_thread(cluster.wait_node, 0, 20) == 0
        with pytest.raises(Exception, match=r"shutting_down|closed"):
            await client.next_event(5)
    finally:
        codes = await asyncio.to_thread(cluster.stop)
    assert codes[1] == 0


def test_configuration_errors_exit_2_with_a_clear_message(short_dir: Path) -> None:
    bad = short_dir / "bad.toml"
    bad.write_text("[network]\nprot = 1\n")
    proc = subprocess.run([sys.executable, "-m", "daemon.main", "--config", str(bad)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "unknown key network.prot" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "daemon.main", "--check"],
                          capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin", "AMCAST_NODE__ID": "3"})
    assert proc.returncode == 2 and "not in members" in proc.stderr
