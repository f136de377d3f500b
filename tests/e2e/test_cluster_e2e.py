"""End-to-end: real amcastd processes on loopback multicast (127.0.0.1, 239.255.x.y)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from amcast.cli import main as amcast_main
from amcast.client import BlockingClient
from amcast.demo import run_cluster_workload
from amcast.localcluster import LocalCluster
from amcast.socket_protocol import PREFIX, FrameDecoder
from amcast.socket_protocol import encode_frame as encode
from tests.daemon.daemon_helpers import Raw
from tests.steady import STEADY

pytestmark = pytest.mark.processes


@pytest.fixture
def short_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="amce-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


async def test_four_daemons_order_10000_concurrent_messages_identically(short_dir: Path) -> None:
    result = await run_cluster_workload(
        short_dir, nodes=4, per_node=2500,
        protocol={"insecure": True, **STEADY, "datagram_budget": 16000},
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
        protocol={"insecure": True, **STEADY}, timeout=150,
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
    cluster = LocalCluster(2, short_dir, protocol={"insecure": True, **STEADY}, metrics=False)
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
    """SIGTERM while a client keeps sending: every message the daemon accepted is
    delivered (to the sender itself, before the daemon goes) or reported ``undelivered``;
    refused frames are told so; the frames never read form a suffix of what was sent."""
    cluster = LocalCluster(2, short_dir, protocol={"insecure": True, **STEADY}, metrics=False,
                           log_level="info")
    await asyncio.to_thread(cluster.start)
    per = 5  # messages per send frame
    try:
        raw = await Raw.open(cluster.sockets[0])
        raw.send({"t": "join", "groups": ["g"]})
        await raw.until("groups")
        delivered: dict[int, list[int]] = defaultdict(list)  # frame id -> message indexes
        outcome: dict[int, tuple[str, int]] = {}  # frame id -> (error code, first)
        frames: list[dict[str, Any]] = []

        async def read_all() -> None:
            with contextlib.suppress(EOFError, ConnectionError):
                while True:
                    frame = await raw.next(30)
                    frames.append(frame)
                    if frame["t"] == "deliver":
                        for b in frame["batches"]:
                            for p in b[3]:
                                ref, k = map(int, p.split(b":"))
                                delivered[ref].append(k)
                    elif frame["t"] == "error" and "id" in frame:
                        outcome[frame["id"]] = (frame["code"], frame.get("first", 0))

        reader = asyncio.create_task(read_all())
        sent = 0
        killed = False
        with contextlib.suppress(ConnectionError):
            while not reader.done() and sent < 200_000:
                for _ in range(50):
                    raw.send({"t": "send", "id": sent, "groups": ["g"],
                              "payloads": [b"%d:%d" % (sent, k) for k in range(per)]})
                    sent += 1
                await asyncio.wait_for(raw.writer.drain(), 30)
                if not killed and sum(map(len, delivered.values())) >= 2000:
                    cluster.kill_node(0)  # SIGTERM while we keep writing
                    killed = True
        await asyncio.wait_for(reader, 30)
        assert killed and await asyncio.to_thread(cluster.wait_node, 0, 30) == 0
        assert frames[-1]["t"] == "error" and frames[-1]["code"] == "shutting_down"
        assert frames[-1]["fatal"] is True
        unanswered = []
        for ref in range(sent):
            got = delivered.get(ref, [])
            code, first = outcome.get(ref, ("", per))
            assert got == list(range(len(got))), (ref, got)  # in order, no duplicate
            if code == "undelivered":
                assert got == list(range(first)), (ref, got, first)
            elif code:
                assert code == "shutting_down" and got == [], (ref, code, got)
            elif len(got) < per:
                assert got == [], (ref, got)  # partly delivered yet not reported: a loss
                unanswered.append(ref)
        # what the daemon never read is a suffix of what was sent, nothing in between
        assert unanswered == list(range(sent - len(unanswered), sent))
        assert any(code == "shutting_down" for code, _ in outcome.values()) or unanswered
        # the daemon's own account: accepted = delivered here + reported undelivered
        stopped = [json.loads(x) for x in (short_dir / "node0" / "amcastd.log").read_text()
                   .splitlines() if '"amcastd stopped"' in x]
        (last,) = stopped
        accepted = sum(len(delivered.get(r, [])) for r in range(sent)) + sum(
            per - first for code, first in outcome.values() if code == "undelivered")
        assert last["accepted"] == accepted
        assert last["accepted"] == last["own_delivered"] + last["reported_undelivered"]
    finally:
        codes = await asyncio.to_thread(cluster.stop)
    assert codes[1] == 0


def test_configuration_errors_exit_2_with_a_clear_message(short_dir: Path) -> None:
    bad = short_dir / "bad.toml"
    bad.write_text("[network]\nprot = 1\n")
    proc = subprocess.run([sys.executable, "-m", "amcast.daemon", "--config", str(bad)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "unknown key network.prot" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "amcast.daemon", "--check"],
                          capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin", "AMCAST_NODE__ID": "3"})
    assert proc.returncode == 2 and "not in members" in proc.stderr
