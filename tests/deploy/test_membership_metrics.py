"""Membership metrics (issue 12): counted from the Node's events, read from snapshots,
and seen moving on the survivors of a real 3-daemon cluster when one is killed."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from amcast.daemon.metrics import AmcastCollector, Counters, Metrics, MetricsSnapshot
from amcast.protocols.events import (
    BatchDelivered,
    FlushCompleted,
    MemberSuspected,
    MessagesInDoubt,
    QuorumLost,
    ViewInstalled,
)
from amcast.protocols.node import NodeStats
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from amcast import socket_protocol as sp
from amcast.client import BlockingClient, ViewChange
from amcast.localcluster import LocalCluster

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(text: str) -> Samples:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(text) for s in fam.samples
    }


def value(got: Samples, name: str, **labels: str) -> float:
    return got[(name, tuple(sorted(labels.items())))]


def snapshot(counters: Counters, **membership: object) -> MetricsSnapshot:
    return MetricsSnapshot.build(
        taken_at=100.0, counters=counters, send_errors={}, queued=[], submit_queue_frames=0,
        submit_queue_bytes=0, view=7, members=2, healthy=True,
        transport={"datagrams_sent": 0, "datagrams_received": 0, "bytes_sent": 0,
                   "bytes_received": 0},
        engine=NodeStats(views_installed=3, flushes=2, view_id=7, primary=1),
        **membership,  # type: ignore[arg-type]
    )


def scrape(metrics: Metrics) -> Samples:
    return samples(generate_latest(metrics.registry).decode())


def envelope(client: int, *messages: bytes) -> bytes:
    return sp.encode_envelope(client, ["g"], list(messages))


def test_membership_events_are_counted_by_cause_and_the_snapshot_reads_peers() -> None:
    counters = Counters()
    holder: dict[str, MetricsSnapshot] = {}
    metrics = Metrics(lambda: holder["s"])
    for ev in (
        ViewInstalled(5, (0, 1), True, (), (), (2,), 4, 1.0),
        ViewInstalled(6, (0,), True, (), (1,), (), 5, 1.0),
        MemberSuspected(2, 4, 0.9), MemberSuspected(2, 8, 0.8), MemberSuspected(1, 8, 0.85),
        QuorumLost(6, "no_quorum", (0,)), QuorumLost(7, "paused", ()),
        FlushCompleted(4, 3, 0.04), FlushCompleted(5, 0, 1.5),
        # 3 messages in two envelopes not delivered here, 2 delivered here only
        MessagesInDoubt(6, (envelope(1, b"a", b"b"), envelope(2, b"c")),
                        (envelope(1, b"d", b"e"),)),
        # a view whose cut was never learned: 2 + 1 of unknown outcome
        MessagesInDoubt(7, (envelope(1, b"f", b"g"),), (envelope(1, b"h"),), (), False),
        BatchDelivered(0, 1, (b"x",), "agreed", 0, 0, None, 0, 0, 0, 0.0),  # not counted
    ):
        metrics.count_event(counters, ev)
    peers = {
        1: {"last_heard": 99.5, "incarnation": 3, "alive": True, "in_view": True},
        2: {"last_heard": 70.0, "incarnation": 4, "alive": False, "in_view": False,
            "awaited_s": 12.5},
        3: {"last_heard": None, "incarnation": -1, "alive": False, "in_view": False},
    }
    holder["s"] = snapshot(counters, primary=True, started=40.0, peers=peers,
                           quorum={"needed": 3, "listed": 4, "reachable": 2})
    got = scrape(metrics)
    assert value(got, "amcast_member_exclusions_total", cause="excluded") == 1
    assert value(got, "amcast_member_exclusions_total", cause="left") == 1
    assert value(got, "amcast_member_suspicions_total", peer="2") == 2
    assert value(got, "amcast_member_suspicions_total", peer="1") == 1
    assert value(got, "amcast_member_suspicions_total", peer="3") == 0  # listed: from 0
    assert value(got, "amcast_quorum_lost_total", reason="no_quorum") == 1
    assert value(got, "amcast_quorum_lost_total", reason="paused") == 1
    assert value(got, "amcast_quorum_lost_total", reason="excluded") == 0
    assert value(got, "amcast_messages_in_doubt_total", outcome="undelivered") == 3
    assert value(got, "amcast_messages_in_doubt_total", outcome="delivered_here") == 2
    assert value(got, "amcast_messages_in_doubt_total", outcome="unknown") == 3
    assert value(got, "amcast_flush_duration_seconds_count") == 2
    assert value(got, "amcast_flush_duration_seconds_bucket", le="0.05") == 1
    assert value(got, "amcast_flush_duration_seconds_bucket", le="2.5") == 2
    assert math.isclose(value(got, "amcast_flush_duration_seconds_sum"), 1.54)
    assert value(got, "amcast_views_installed_total") == 3
    assert value(got, "amcast_flushes_total") == 2
    assert value(got, "amcast_primary") == 1
    assert value(got, "amcast_view_id") == 7 and value(got, "amcast_view_members") == 2
    assert (value(got, "amcast_quorum_needed"), value(got, "amcast_listed_members"),
            value(got, "amcast_quorum_reachable")) == (3, 4, 2)
    assert value(got, "amcast_peer_last_heard_seconds", peer="1") == 0.5
    assert value(got, "amcast_peer_last_heard_seconds", peer="2") == 30.0
    assert value(got, "amcast_peer_last_heard_seconds", peer="3") == 60.0  # since start
    assert [value(got, "amcast_peer_in_view", peer=p) for p in "123"] == [1, 0, 0]
    assert [value(got, "amcast_peer_alive", peer=p) for p in "123"] == [1, 0, 0]
    assert [value(got, "amcast_peer_awaited_seconds", peer=p) for p in "123"] == [0, 12.5, 0]
    # the daemon exports view id and primary itself, not twice
    assert not [name for name, _ in got if name.startswith(("amcast_engine_view_id",
                                                            "amcast_engine_primary"))]


def test_the_snapshot_does_not_follow_the_live_counters() -> None:
    counters = Counters()
    counters.exclusions["excluded"] += 1
    snap = snapshot(counters)
    counters.exclusions["excluded"] += 5
    counters.suspicions[4] += 1
    registry = CollectorRegistry(auto_describe=False)
    registry.register(AmcastCollector(lambda: snap))
    got = samples(generate_latest(registry).decode())
    assert value(got, "amcast_member_exclusions_total", cause="excluded") == 1
    assert not [k for k in got if k[0] == "amcast_member_suspicions_total"]
    assert value(got, "amcast_primary") == 0  # defaults: not primary, no peers
    with pytest.raises(TypeError):
        snap.exclusions["left"] = 1  # type: ignore[index]


def http_scrape(port: int) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return samples(r.read().decode())


VIEW_CHANGE_S = 30.0
"""Bound for the survivors' new view after a kill -9 (0.8 s suspect_timeout, then a
view change; generous for a loaded 2-core CI machine)."""


def _wait_view(client: BlockingClient, port: int, members: list[int], deadline: float,
               what: str) -> Samples:
    """Read ``client``'s frames until a view of ``members``, after which this daemon's
    scrape shows that primary view; fail at ``deadline``."""
    while True:
        left = deadline - time.monotonic()
        assert left > 0, f"{what}: no primary view of {members} in time"
        ev = client.next_event(timeout=left)
        if isinstance(ev, ViewChange) and sorted(ev.members) == members:
            got = http_scrape(port)
            if (value(got, "amcast_primary") == 1
                    and value(got, "amcast_view_members") == len(members)):
                return got


def _restart(cluster: LocalCluster, node: int) -> None:
    """Start a killed daemon again with its config, as systemd's Restart=on-failure does."""
    n = cluster.nodes[node]
    log = open(n.config.parent / "amcastd.log", "ab")  # noqa: SIM115
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("AMCAST_") and k != "NOTIFY_SOCKET"}
    n.process = subprocess.Popen([sys.executable, "-m", "amcast.daemon", "--config",
                                  str(n.config)], env=env, stdin=subprocess.DEVNULL,
                                 stdout=log, stderr=log)
    log.close()
    n.pid = n.process.pid


def test_survivors_export_the_view_without_a_killed_daemon_and_with_it_restarted(
    tmp_path: Path,
) -> None:
    """kill -9 one daemon of three (default suspect_timeout): each survivor's scrape
    shows the new view of two, with the exclusion counted, within a bounded time; the
    daemon started again (what Restart=on-failure does) rejoins, from its state file, and
    the scrapes show the view of three. Every wait is on the survivors' `view` frames
    (one scrape after each), bounded by VIEW_CHANGE_S, never a sleep."""
    # each scrape renders (no render cache): one scrape right after each view frame must
    # show that view, even when the view change came within render_interval_s of the last
    cluster = LocalCluster(3, tmp_path, protocol={"insecure": True},
                           extra={"metrics": {"render_interval_s": 0}})
    cluster.start()
    try:
        ports = [cluster.nodes[i].metrics_port for i in (0, 1)]
        before = [http_scrape(p) for p in ports]
        for got in before:
            assert value(got, "amcast_peer_in_view", peer="2") == 1
        state_file = Path(tmp_path / "node2" / "state" / "node-2.state")
        assert state_file.exists()
        clients = [BlockingClient(cluster.sockets[i]) for i in (0, 1)]
        victim = cluster.nodes[2].pid
        assert victim is not None
        os.kill(victim, signal.SIGKILL)
        killed_at = time.monotonic()
        after = [_wait_view(c, p, [0, 1], killed_at + VIEW_CHANGE_S, f"node {i}")
                 for i, (c, p) in enumerate(zip(clients, ports, strict=True))]
        excluded_in = time.monotonic() - killed_at
        cluster.wait_node(2, 10)
        _restart(cluster, 2)
        restarted_at = time.monotonic()
        again = [_wait_view(c, p, [0, 1, 2], restarted_at + VIEW_CHANGE_S, f"node {i}")
                 for i, (c, p) in enumerate(zip(clients, ports, strict=True))]
        rejoined_in = time.monotonic() - restarted_at
        with BlockingClient(cluster.sockets[2]) as c2:  # connected before the scrape:
            port2 = cluster.nodes[2].metrics_port        # no view frame can be missed
            back = http_scrape(port2)
            if value(back, "amcast_primary") != 1 or value(back, "amcast_view_members") != 3:
                back = _wait_view(c2, port2, [0, 1, 2], restarted_at + VIEW_CHANGE_S, "node 2")
        for c in clients:
            c.close()
    finally:
        cluster.stop()
    for i, (old, new, last) in enumerate(zip(before, after, again, strict=True)):
        other = str(1 - i)
        assert value(old, "amcast_view_members") == 3
        assert value(new, "amcast_view_members") == 2
        assert value(new, "amcast_view_id") != value(old, "amcast_view_id")
        assert value(new, "amcast_views_installed_total") > value(
            old, "amcast_views_installed_total")
        assert value(new, "amcast_member_exclusions_total", cause="excluded") > value(
            old, "amcast_member_exclusions_total", cause="excluded")
        assert value(new, "amcast_peer_in_view", peer="2") == 0
        assert value(new, "amcast_peer_in_view", peer=other) == 1
        assert value(new, "amcast_quorum_reachable") == 2
        assert value(new, "amcast_flush_duration_seconds_count") > value(
            old, "amcast_flush_duration_seconds_count")
        assert value(new, "amcast_peer_last_heard_seconds", peer="2") >= 0.5
        # restarted: in the view again, heard again, one more view installed
        assert value(last, "amcast_view_members") == 3
        assert value(last, "amcast_peer_in_view", peer="2") == 1
        assert value(last, "amcast_peer_last_heard_seconds", peer="2") < 5
        assert value(last, "amcast_views_installed_total") > value(
            new, "amcast_views_installed_total")
        assert value(last, "amcast_view_id") > value(new, "amcast_view_id")
    suspected = sum(value(new, "amcast_member_suspicions_total", peer="2") for new in after)
    assert suspected >= 1
    assert value(back, "amcast_primary") == 1 and value(back, "amcast_view_members") == 3
    print(f"survivors exported the view of two {excluded_in:.2f} s after kill -9, "
          f"the view of three {rejoined_in:.2f} s after the restart")
