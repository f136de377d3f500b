"""The federation from the command line: ``amcast cluster start --clusters``, ``amcast
send --to`` (delivered back, unknown clusters refused in one line), ``amcast status``'s
federation lines and ``amcast cluster stop`` of the whole federation."""

from __future__ import annotations

from pathlib import Path

import pytest

from amcast.commands.status import federation_tables
from tests.cli.helpers import amcast

pytestmark = pytest.mark.processes


def test_a_federation_from_start_to_stop(short_dir: Path) -> None:
    fed = str(short_dir / "fed")
    r = amcast("cluster", "start", "--clusters", "2", "--nodes", "1", "--dir", fed,
               timeout=120)
    assert r.code == 0, r.err
    assert "cluster a node 0" in r.out and "cluster b node 0" in r.out
    try:
        sock = f"{fed}/a/node0.sock"
        r = amcast("send", "-s", sock, "-g", "g", "--to", "a,b", "--wait", "hello")
        assert r.code == 0, r.err
        (line,) = r.out.splitlines()
        position, message_id, service, text = line.split("\t")
        assert position.startswith("g") and message_id.startswith("a:0:")
        assert (service, text) == ("safe", "hello")
        r = amcast("send", "-s", sock, "-g", "g", "--to", "a,x", "hello")
        assert r.code == 1 and "unknown_cluster" in r.one_error_line()
        r = amcast("status", "-s", f"{fed}/b/node0.sock", "--interval", "0")
        assert r.code == 0, r.err
        assert "federation: cluster b" in r.out and "clusters" in r.out
    finally:
        r = amcast("cluster", "stop", "--dir", fed, timeout=60)
    assert r.code == 0 and "stopped 2 daemons" in r.out, r.out + r.err


def test_status_shows_the_clusters_and_the_messages_in_flight() -> None:
    lines, tables = federation_tables({"federation": {
        "cluster": "a", "address": "127.0.0.1:4000", "in_flight": 1, "sent": 3,
        "delivered": 2, "stalled": 1, "remote_drops": {"auth_failed": 2},
        "clusters": {"a": {"members": 3, "reachable": True, "last_heard_s": None},
                     "b": {"members": 3, "reachable": False, "last_heard_s": 9.5}},
        "messages": [{"id": "a:0:7", "clusters": ["a", "b"], "age_s": 6.0,
                      "waiting_for": ["b"]}]}})
    assert "1 message(s) in flight" in lines[0] and "auth_failed 2" in lines[0]
    clusters, flights = tables
    assert clusters["rows"] == [["a", 3, "this one", "-"], ["b", 3, "NO", 9.5]]
    assert flights["rows"] == [[6.0, '["a", "b"]', "a:0:7", '["b"]']]
    assert federation_tables({"federation": None}) == ([], [])
