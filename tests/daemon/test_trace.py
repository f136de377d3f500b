"""The latency trace (``logs.trace``) and the stage split of ``bench cluster --trace``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from amcast.daemon.trace import DatagramTrace
from amcast.protocols.vocabulary import ServiceLevel
from amcast.protocols.wire.codec import Datagram, Kind, Vertex, encode
from amcast.protocols.wire.limits import WireLimits

from bench.cluster import summarize_stages
from bench.trace_stages import STAGES, message_stages
from tests.wire.sealing import WALL_MS, authenticator, decode

KEY = b"k" * 32


def _vertex_datagram(kind: Kind, sender: int, seq: int, items: tuple[bytes, ...]) -> Datagram:
    v = Vertex(sender, seq, ((0, 1),), ServiceLevel.AGREED, 1.0, items)
    return Datagram(kind, sender, 1, seq, (), (v,))


def test_trace_records_frames_and_vertices_and_skips_the_rest(tmp_path: Path) -> None:
    auth, limits = authenticator(KEY), WireLimits()
    data = encode(_vertex_datagram(Kind.DATA, 1, 5, (b"x" * 100,)), auth, WALL_MS)
    ack = encode(_vertex_datagram(Kind.ACK_ONLY, 2, 3, ()), auth, WALL_MS)
    heartbeat = encode(Datagram(Kind.HEARTBEAT, 1, 1, 5, (), (), ((0, 1),)), auth, WALL_MS)
    trace = DatagramTrace(tmp_path, rotate_bytes=1 << 20, keep=2,
                          peek=lambda d: decode(d, auth, limits))
    trace.client_frame(1.25, 7, 3)
    trace.received(1.5, [data, heartbeat, b"garbage that does not authenticate"])
    trace.sent(2.0, [ack])
    trace.close()
    path = tmp_path / "trace.ndjson"
    assert [json.loads(line) for line in path.read_text().splitlines()] == [
        ["c", 1.25, 7, 3],
        ["r", 1.5, "data", 1, [[1, 5]]],
        ["s", 2.0, "ack_only", [[2, 3]]],
    ]
    assert path.stat().st_mode & 0o777 == 0o600


def _write(directory: Path, name: str, records: list[object]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_text("".join(json.dumps(r) + "\n" for r in records))


def _delivery(seq: int, made: float, ordered: float) -> dict[str, object]:
    return {"type": "delivery", "sender": 0, "seq": seq, "position": seq, "send_ts": made,
            "ts": ordered}


def test_stages_follow_the_vote_that_decided(tmp_path: Path) -> None:
    """Sender 0, voters 1 and 2. Message 2: node 1's vote reaches the sender first and
    the vertex is ordered with it; node 2's arrives after the ordering, so it did not
    decide. Message 1 has no earlier vertex to bound its frame and is left out."""
    dirs = [tmp_path / f"node{i}" for i in range(3)]
    _write(dirs[0], "trace.ndjson", [
        ["c", 9.9990, 1, 1], ["s", 9.9992, "data", [[0, 1]]],
        ["r", 10.0001, "ack_only", 1, [[1, 1]]], ["r", 10.0002, "ack_only", 2, [[2, 1]]],
        ["c", 10.0100, 1, 1], ["s", 10.0103, "data", [[0, 2]]],
        ["r", 10.0113, "ack_only", 1, [[1, 2]]], ["r", 10.0120, "ack_only", 2, [[2, 2]]],
        ["s", 10.0121, "repair", [[1, 2]]],  # another's vertex: not the sender's send
    ])
    _write(dirs[0], "delivery.jsonl", [_delivery(1, 9.9991, 10.0003),
                                       _delivery(2, 10.0101, 10.0116)])
    _write(dirs[1], "trace.ndjson", [
        ["r", 9.9995, "data", 0, [[0, 1]]], ["s", 9.9998, "ack_only", [[1, 1]]],
        ["r", 10.0106, "data", 0, [[0, 2]]], ["s", 10.0110, "ack_only", [[1, 2]]],
    ])
    _write(dirs[2], "trace.ndjson", [
        ["r", 9.9996, "data", 0, [[0, 1]]], ["s", 9.9999, "ack_only", [[2, 1]]],
        ["r", 10.0108, "data", 0, [[0, 2]]], ["s", 10.0112, "ack_only", [[2, 2]]],
    ])
    rows = message_stages(dirs, sender=0, skip_s=0.0)
    assert len(rows) == 1
    row = rows[0]
    assert row["voter"] == 1
    expected = [0.0001, 0.0002, 0.0003, 0.0004, 0.0003, 0.0003]
    assert [row[name] for name in STAGES] == pytest.approx(expected, abs=1e-9)
    assert row["total"] == pytest.approx(sum(expected), abs=1e-9)
    summary = summarize_stages(rows)
    assert summary["total"]["samples"] == 1
    assert summary["vote sent -> received"]["p50_s"] == pytest.approx(0.0003, abs=1e-9)


def test_no_trace_files_give_no_stages(tmp_path: Path) -> None:
    dirs = [tmp_path / "node0", tmp_path / "node1"]
    _write(dirs[0], "delivery.jsonl", [_delivery(1, 1.0, 1.1), _delivery(2, 2.0, 2.1)])
    assert message_stages(dirs, sender=0, skip_s=0.0) == []
    assert summarize_stages([]) == {}
