"""sd_notify datagrams and the rotated JSON-lines logs of docs/log-schema.md."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

from daemon.logs import DeliveryLog, RotatingJsonl
from daemon.notify import Notifier


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
    log = DeliveryLog(tmp_path, 3, rotate_bytes=1 << 20, keep=2)
    log.view(view=0, members=[0, 1, 2, 3], ts=10.5)
    log.delivery(view=0, variant="toto", phi=0.5, sender=1, seq=7, position=40, count=3,
                 nbytes=300, service="agreed", activation=9, rule="early", ntail=3, unseen=1,
                 nvt=2, send_ts=10.25, ts=10.5, envelopes=2)
    log.delivery(view=0, variant="toto", phi=0.5, sender=1, seq=8, position=None, count=1,
                 nbytes=1, service="causal", activation=None, rule="causal", ntail=None,
                 unseen=None, nvt=None, send_ts=10.3, ts=10.6, envelopes=1)
    log.metrics({"ts": 11.0, "view": 0, "variant": "toto", "messages_sent": 1, "drops": {}})
    log.close()
    recs = [json.loads(x) for x in (tmp_path / "delivery.jsonl").read_text().splitlines()]
    assert recs[0] == {"schema": 1, "type": "view", "node": 3, "ts": 10.5, "view": 0,
                       "members": [0, 1, 2, 3]}
    assert recs[1] == {
        "schema": 1, "type": "delivery", "node": 3, "view": 0, "variant": "toto", "phi": 0.5,
        "sender": 1, "seq": 7, "position": 40, "count": 3, "bytes": 300, "service": "agreed",
        "activation": 9, "rule": "early", "ntail": 3, "unseen": 1, "nvt": 2, "send_ts": 10.25,
        "ts": 10.5, "envelopes": 2,
    }
    assert recs[2]["position"] is None and recs[2]["ntail"] is None
    assert recs[2]["rule"] == "causal"
    (m,) = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert m["type"] == "metrics" and m["node"] == 3 and m["schema"] == 1
