"""``amcast bench flood``: its pure figures, and a small real flood against real daemons.

The real-process test starts two daemons on loopback multicast, sends one message (so
that the insider has sequence numbers to ask for), floods them with forged nacks (wrong
key) and with nacks sealed with the real key (an insider), then waits for a marker
message sent after the flood: datagrams on one loopback socket are read in the
order they were queued, so once every daemon delivered the marker it has handled every
attack datagram. No daemon may have sent more bytes than it received, and the refusals
must be in its Prometheus metrics by reason.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from pathlib import Path

from amcast.protocols.reliable.ratelimit import RepairLimits
from prometheus_client.parser import text_string_to_metric_families

from amcast.client import BlockingClient
from amcast.client.records import DeliveredBatch
from amcast.localcluster import LocalCluster
from bench import flood
from tests.steady import STEADY


def _sample(now: float, delivered: int, sent: int, **kw: object) -> dict[str, object]:
    return {
        "now": now,
        "delivered": delivered,
        "bytes_sent": sent,
        "bytes_received": 0,
        "repairs_sent": 0,
        "repair_bytes": 0,
        "nacks_sent": 0,
        "cpu": 0.0,
        "drops": kw.get("drops", {}),
        "rss": kw.get("rss", 0),
        "window_bytes": kw.get("window_bytes", 0),
        "window_losses": kw.get("window_losses", 0),
    }


def test_window_totals_and_attack_figures() -> None:
    base = flood.window_totals(
        [_sample(0, 0, 0), _sample(0, 0, 0)],
        [_sample(10, 1000, 50_000), _sample(10, 900, 50_000, rss=7)],
    )
    assert (base["ordered"], base["msgs_per_s"], base["bytes_sent"]) == (900, 90.0, 100_000)
    assert base["rss_after"] == 7
    w = flood.window_totals(
        [_sample(0, 0, 0, drops={"auth_failed": 3}), _sample(0, 0, 0)],
        [_sample(5, 450, 40_000, drops={"auth_failed": 10}), _sample(5, 450, 30_000)],
    )
    assert w["drops"] == {"auth_failed": 7}
    halved = flood.window_totals(
        [_sample(0, 0, 0, window_losses=2), _sample(0, 0, 0)],
        [_sample(5, 1, 0, window_losses=5, window_bytes=9000),
         _sample(5, 1, 0, window_losses=1, window_bytes=4000)],
    )
    assert (halved["window_losses"], halved["window_bytes_min"]) == (4, 4000)
    f = flood.attack_figures(base, w, {"bytes": 100_000})
    # baseline: 111.1 bytes/msg and 10,000 bytes/s; window: 450 msgs, 5 s, 70,000 bytes
    assert round(f["excess_bytes_by_msg"]) == 20_000
    assert f["excess_bytes_by_time"] == 20_000
    assert round(f["amplification"], 3) == 0.2
    assert f["throughput_pct"] == 100.0
    quiet = flood.attack_figures(base, {**w, "bytes_sent": 1_000}, {"bytes": 100_000})
    assert quiet["amplification"] == 0.0  # sending less than the baseline: no excess


def test_repair_bound_counts_every_other_member_of_every_daemon() -> None:
    lim = RepairLimits(1, 1, repair_rate_bytes=1_000, repair_burst_bytes=5_000)
    assert flood.repair_bound(lim, daemons=3, seconds=2.0) == 3 * 2 * 7_000


def _scrape(port: int) -> dict[tuple[str, str], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, s.labels.get("reason", ""))] = s.value
    return out


def _attack(cluster: LocalCluster, kind: str, key_file: Path, view: int) -> dict[str, int]:
    done = subprocess.run(
        flood.attacker_command(kind, cluster, key_file, view, 1500, "--rate", "20000"),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return dict(json.loads(done.stdout))


def test_forged_and_insider_nack_floods_make_no_daemon_send_more_than_it_received(
    short_dir: Path,
) -> None:
    # a nack budget that 1,500 nacks exceed however slowly a loaded host sends them
    limits = {"nack_burst": 16, "nack_rate": 10}
    cluster = LocalCluster(2, short_dir / "c", protocol={**STEADY, **limits})
    cluster.start()
    key_file = cluster.key_file
    assert key_file is not None
    deadline = time.monotonic() + 60
    try:
        with BlockingClient(cluster.sockets[0]) as a, BlockingClient(cluster.sockets[1]) as b:
            a.join("g")
            b.join("g")
            for payload in (b"warm-up", None, b"marker"):
                if payload is None:  # the flood, between two honest messages
                    before = flood.sample(cluster)
                    view = flood._view_id(before[0]["view"])
                    forged = _attack(cluster, "forged", key_file, view)
                    insider = _attack(cluster, "insider-member", key_file, view)
                    continue
                a.send(payload, "g")
                for client in (a, b):
                    ev = client.next_event(timeout=max(0.1, deadline - time.monotonic()))
                    assert isinstance(ev, DeliveredBatch)
                    assert [d.payload for d in ev] == [payload]
        after = flood.sample(cluster)
        scrapes = [_scrape(n.metrics_port) for n in cluster.nodes]
    finally:
        cluster.stop()
    assert forged["datagrams"] == insider["datagrams"] == 1500
    for first, last, got in zip(before, after, scrapes, strict=True):
        sent = last["bytes_sent"] - first["bytes_sent"]
        received = last["bytes_received"] - first["bytes_received"]
        assert received >= forged["bytes"] + insider["bytes"]  # loopback: nothing lost
        assert sent <= received, (sent, received)
        # the refusals reach Prometheus by reason
        assert got[("amcast_drops_total", "auth_failed")] >= 1500
        assert ("amcast_engine_repair_bytes_sent_total", "") in got
    # the insider's nacks claim one member's id: the other member answers them, within
    # its per-member repair limits (a session claiming several ids is refused whole)
    assert sum(got.get(("amcast_drops_total", "nack_rate_limited"), 0) for got in scrapes) >= 1


def test_the_bench_resolves_the_limits_the_daemons_use(tmp_path: Path) -> None:
    from amcast.daemon.config import load_config

    cluster = LocalCluster(3, tmp_path / "c", protocol={"nack_burst": 9, "window_bytes": 70_000})
    cluster.write_configs()
    daemon = load_config(cluster.nodes[0].config).node_config().repair_limits(3)
    assert flood._limits(cluster) == daemon
    assert daemon.nack_burst == 9 and daemon.repair_burst_bytes == 2 * 70_000
