"""sd_notify datagrams and the rotated JSON-lines logs of docs/log-schema.md."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

from amcast.daemon.logs import DeliveryLog, RotatingJsonl
from amcast.daemon.notify import Notifier


def test_notifier_speaks_the_systemd_datagram_protocol(tmp_path: Path) -> None:
    path = str(tmp_path / "notify")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    server.bind(path)
    server.settimeout(5)
    n = Notifier({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "2000000"})
    assert n.watchdog_interval_s == 1.0
    assert n.ready("serving")
    assert server.recv(256).decode().split("\n") == [
        "READY=1", f"MAINPID={os.getpid()}", "STATUS=serving"
    ]
    assert n.watchdog() and server.recv(64) == b"WATCHDOG=1"
    assert n.stopping() and server.recv(64) == b"STOPPING=1"
    n.close()
    server.close()


def test_notifier_without_socket_is_inert() -> None:
    n = Notifier({"WATCHDOG_USEC": "100", "WATCHDOG_PID": "1"})
    assert not n.enabled and not n.ready() and n.watchdog_interval_s is None


def test_rotation_keeps_n_files(tmp_path: Path) -> None:
    f = RotatingJsonl(tmp_path / "d.jsonl", rotate_bytes=4096, keep=2)
    for i in range(1000):
        f.write(json.dumps({"i": i}) + "\n")
    f.close()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["d.jsonl", "d.jsonl.1", "d.jsonl.2"]
    lines = (tmp_path / "d.jsonl.1").read_text().splitlines()
    assert [json.loads(x)["i"] for x in lines] == sorted(json.loads(x)["i"] for x in lines)


def test_delivery_view_and_metrics_records_follow_the_schema(tmp_path: Path) -> None:
    log = DeliveryLog(tmp_path, 3, rotate_bytes=1 << 20, keep=2, incarnation=77)
    log.start(members=[0, 1, 2, 3], ts=10.0)
    log.gap(view=5, after=None, ts=10.4)
    log.view(view=5, members=[0, 1, 2, 3], previous=0, joined=[3], ts=10.5)
    log.delivery(view=5, variant="toto", phi=0.5, sender=1, seq=7, position=40, count=3,
                 nbytes=300, service="agreed", activation=9, rule="early", ntail=3, unseen=1,
                 nvt=2, send_ts=10.25, ts=10.5, envelopes=2)
    log.delivery(view=5, variant="toto", phi=0.5, sender=1, seq=8, position=None, count=1,
                 nbytes=1, service="causal", activation=None, rule="causal", ntail=None,
                 unseen=None, nvt=None, send_ts=10.3, ts=10.6, envelopes=1)
    log.lost(view=5, reason="paused", reachable=[3], ts=10.7)
    log.gap(view=9, after=(5, 42), ts=10.8)  # the daemon's: in application messages
    log.view(view=9, members=[1, 3], previous=8, excluded=[0, 2], ts=10.9)
    log.metrics({"ts": 11.0, "view": 0, "variant": "toto", "messages_sent": 1, "drops": {}})
    log.close()
    recs = [json.loads(x) for x in (tmp_path / "delivery.jsonl").read_text().splitlines()]
    head = {"schema": 1, "node": 3, "incarnation": 77}
    assert recs[0] == {**head, "type": "start", "ts": 10.0, "members": [0, 1, 2, 3]}
    assert recs[1] == {**head, "type": "gap", "ts": 10.4, "view": 5, "after": None}
    assert recs[2] == {**head, "type": "view", "ts": 10.5, "view": 5, "primary": True,
                       "members": [0, 1, 2, 3], "previous": None, "joined": [3], "left": [],
                       "excluded": []}
    assert recs[3] == {
        **head, "type": "delivery", "view": 5, "variant": "toto", "phi": 0.5,
        "sender": 1, "seq": 7, "position": 40, "count": 3, "bytes": 300, "service": "agreed",
        "activation": 9, "rule": "early", "ntail": 3, "unseen": 1, "nvt": 2, "send_ts": 10.25,
        "ts": 10.5, "envelopes": 2,
    }
    assert list(recs[3])[:4] == ["schema", "type", "node", "incarnation"]
    assert recs[4]["position"] is None and recs[4]["ntail"] is None
    assert recs[4]["rule"] == "causal"
    assert recs[5] == {**head, "type": "view", "ts": 10.7, "view": 5, "primary": False,
                       "members": [3], "reason": "paused"}
    # the last ordered message logged, in application messages: 40 + 3 - 1, as given
    assert recs[6] == {**head, "type": "gap", "ts": 10.8, "view": 9, "after": [5, 42]}
    assert recs[7]["previous"] == 8 and recs[7]["excluded"] == [0, 2]
    (m,) = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert m["type"] == "metrics" and m["node"] == 3 and m["schema"] == 1
    assert m["incarnation"] == 77


def test_membership_records_are_on_disk_at_once_deliveries_at_the_next_flush(
        tmp_path: Path) -> None:
    """A daemon killed with SIGKILL loses only the deliveries after its last flush; its
    view history (and what it logged before each change) is written through."""
    log = DeliveryLog(tmp_path, 1, rotate_bytes=1 << 20, keep=2, incarnation=5)
    log.delivery(view=5, variant="toto", phi=0.5, sender=1, seq=1, position=0, count=1,
                 nbytes=1, service="agreed", activation=0, rule="early", ntail=1, unseen=0,
                 nvt=1, send_ts=1.0, ts=1.1, envelopes=1)
    path = tmp_path / "delivery.jsonl"
    assert path.read_text() == ""
    log.view(view=6, members=[1], previous=5, ts=1.2)
    assert [json.loads(x)["type"] for x in path.read_text().splitlines()] == [
        "delivery", "view"]
    log.close()


def test_log_files_are_owner_only_in_an_owner_only_directory(tmp_path: Path) -> None:
    old = tmp_path / "old.jsonl"
    old.write_text("{}\n")
    old.chmod(0o644)
    wider = RotatingJsonl(old, rotate_bytes=1 << 20, keep=2)  # an older, wider file
    wider.close()
    assert old.stat().st_mode & 0o777 == 0o600
    f = RotatingJsonl(tmp_path / "new" / "d.jsonl", rotate_bytes=64, keep=2)
    for _ in range(10):
        f.write('{"k": "0123456789abcdef"}\n')  # rotates
    f.close()
    assert (tmp_path / "new").stat().st_mode & 0o777 == 0o700
    files = sorted((tmp_path / "new").iterdir())
    assert len(files) == 3 and {p.stat().st_mode & 0o777 for p in files} == {0o600}
