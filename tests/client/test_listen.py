"""``amcast listen`` prints views, gaps and undelivered reports between deliveries."""

from __future__ import annotations

import argparse
import json

import pytest

from amcast.commands import listen
from tests.client.fakedaemon import FakeDaemon, _Conn

FRAMES = [
    {"t": "view", "view": 2, "members": [0, 2], "primary": False, "reason": "paused"},
    {"t": "gap", "view": 3, "after": [1, 17]},
    {"t": "view", "view": 3, "members": [0, 1, 2], "primary": True, "joined": [2],
     "left": [3], "excluded": [4], "previous": 1},
    {"t": "error", "code": "undelivered", "fatal": False, "id": 5, "first": 1, "count": 2,
     "detail": "excluded from view 2"},
]


def _script(fake: FakeDaemon) -> None:
    def on_join(conn: _Conn) -> None:
        for frame in FRAMES:
            conn.write(frame)
        fake.deliver(conn, ["g"], [b"hello"])
    fake.on_join = on_join


def _listen(sock: str, as_json: bool, capsys: pytest.CaptureFixture[str]) -> list[str]:
    args = argparse.Namespace(socket=sock, group=["g"], count=1, timeout=10.0, json=as_json,
                              members=False)
    assert listen.run(args) == 0
    return capsys.readouterr().out.splitlines()


def test_listen_prints_one_hash_line_per_view_gap_and_undelivered(
        sock: str, capsys: pytest.CaptureFixture[str]) -> None:
    with FakeDaemon(sock) as fake:
        _script(fake)
        lines = _listen(sock, False, capsys)
    assert lines[:4] == [
        "# view 2 not primary (paused) reachable 0,2",
        "# gap before view 3: missed the total order after view 1 position 17",
        "# view 3 primary members 0,1,2 previous 1 joined 2 left 3 excluded 4",
        "# undelivered 2 message(s) 6..7: excluded from view 2",
    ]
    assert lines[4].split("\t") == ["0", "0/1", "agreed", "g", "hello"]
    assert len(lines) == 5


def test_listen_json_has_an_event_key(sock: str, capsys: pytest.CaptureFixture[str]) -> None:
    with FakeDaemon(sock) as fake:
        _script(fake)
        got = [json.loads(line) for line in _listen(sock, True, capsys)]
    assert got[:4] == [
        {"event": "view", "view": 2, "members": [0, 2], "primary": False, "reason": "paused"},
        {"event": "gap", "view": 3, "after": [1, 17]},
        {"event": "view", "view": 3, "members": [0, 1, 2], "primary": True, "previous": 1,
         "joined": [2], "left": [3], "excluded": [4]},
        {"event": "undelivered", "first": 6, "count": 2, "detail": "excluded from view 2"},
    ]
    assert got[4]["event"] == "deliver" and got[4]["payload"] == "hello"
    assert got[4]["id"] == "0:0:0:0" and len(got) == 5
