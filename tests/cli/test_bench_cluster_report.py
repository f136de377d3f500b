"""``amcast bench cluster``'s figures from hand-made samples (no processes), and one short
real run."""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any

import pytest

from bench.cli import build_parser
from bench.cluster import (
    DATAGRAM_COLUMNS,
    KINDS,
    LATENCY_COLUMNS,
    STAGE_COLUMNS,
    THROUGHPUT_COLUMNS,
    TRACED_COLUMNS,
    clients_cpu_window,
    cores,
    datagram_row,
    idle_share,
    kind_deltas,
    latency_row,
    percentile,
    protocol_settings,
    rcvbuf_errors,
    send_spread,
    stage_latencies,
    stage_row,
    throughput_row,
    wakeups,
    window,
)
from bench.trace_stages import STAGES
from tests.cli.helpers import amcast

SNMP = """Ip: Forwarding DefaultTTL InReceives
Ip: 1 64 1000
Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
Udp: 5000 3 12 4000 7 0 0 2 0
UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
UdpLite: 0 0 0 0 99 0 0 0 0
"""  # noqa: E501 (the kernel's lines)


def node(now: float, delivered: int, cpu: float, *, retrans: int = 0,
         sent: dict[str, int] | None = None,
         received: dict[str, int] | None = None, wakeups: int = 0) -> dict[str, Any]:
    return {"now": now, "delivered": delivered, "cpu": cpu, "wakeups": wakeups, "drops": {},
            "engine": {"retransmissions": retrans},
            "datagrams": {"sent": sent or {}, "received": received or {}}}


def two_nodes() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    first = [
        node(100.0, 1000, 5.0, retrans=1,
             sent={"data": 10, "ack_only": 5, "heartbeat": 3},
             received={"data": 20, "ack_only": 4}, wakeups=100),
        node(100.5, 900, 6.0, retrans=0,
             sent={"data": 12, "ack_only": 6},
             received={"data": 15}),
    ]
    last = [
        node(102.0, 3000, 5.5, retrans=4,
             sent={"data": 110, "ack_only": 45, "heartbeat": 3, "nack": 2},
             received={"data": 220, "ack_only": 84, "repair": 3}, wakeups=2100),
        node(102.5, 2900, 7.0, retrans=2,
             sent={"data": 112, "ack_only": 66, "repair": 5},
             received={"data": 215, "membership": 1}, wakeups=1000),
    ]
    return first, last


def test_rcvbuf_errors_reads_the_udp_line_not_udplite() -> None:
    assert rcvbuf_errors(SNMP) == 7


def test_rcvbuf_errors_without_the_udp_lines_is_an_error() -> None:
    with pytest.raises(ValueError, match="RcvbufErrors"):
        rcvbuf_errors("Ip: Forwarding\nIp: 1\n")


def test_kind_deltas_sum_over_daemons_and_fill_every_kind() -> None:
    first, last = two_nodes()
    assert kind_deltas(first, last, "sent") == {
        "data": 200, "ack_only": 100, "heartbeat": 0, "nack": 2, "repair": 5, "membership": 0,
    }
    assert kind_deltas(first, last, "received") == {
        "data": 400, "ack_only": 80, "heartbeat": 0, "nack": 0, "repair": 3, "membership": 1,
    }


def test_window_per_ordered_message_uses_the_slowest_node() -> None:
    first, last = two_nodes()
    w = window(first, last, rcvbuf=(7, 10), clients_cpu=(1.0, 1.25))
    assert w["ordered"] == 2000  # both delivered 2000: the slowest
    assert w["seconds"] == 2.0
    assert w["rates"] == [1000.0, 1000.0]
    assert w["daemon_cpu_s"] == pytest.approx(1.5)
    assert w["cpu_per_msg_s"] == pytest.approx(1.5 / 2000)
    assert w["core_shares"] == pytest.approx([0.25, 0.5])
    assert w["wakeups"] == 3000  # 2000 + 1000 event-loop wake-ups
    assert w["wakeups_per_msg"] == pytest.approx(1.5)
    assert w["cpu_per_wakeup_s"] == pytest.approx(1.5 / 3000)
    assert w["clients_cpu_s"] == pytest.approx(0.25)
    assert w["sent_per_msg"]["data"] == pytest.approx(0.1)
    assert w["sent_per_msg"]["ack_only"] == pytest.approx(0.05)
    assert w["received_per_msg"]["data"] == pytest.approx(0.2)
    assert w["retransmissions"] == 5
    assert w["retransmitted_pct"] == pytest.approx(2.5)  # 5 of 200 data datagrams
    assert w["rcvbuf_errors"] == 3


def test_window_slowest_node_bounds_ordered_messages() -> None:
    first = [node(0.0, 0, 0.0), node(0.0, 0, 0.0)]
    last = [node(1.0, 500, 0.1, sent={"data": 50}), node(1.0, 400, 0.1, sent={"data": 50})]
    w = window(first, last)
    assert w["ordered"] == 400
    assert w["sent_per_msg"]["data"] == pytest.approx(0.25)
    assert w["rcvbuf_errors"] is None and w["clients_cpu_s"] is None


def test_window_with_nothing_ordered_or_sent_gives_nan_not_an_error() -> None:
    first = [node(0.0, 10, 0.0)]
    last = [node(1.0, 10, 0.01)]
    w = window(first, last)
    assert w["ordered"] == 0
    assert math.isnan(w["cpu_per_msg_s"])
    assert math.isnan(w["retransmitted_pct"])
    assert all(math.isnan(v) for v in w["sent_per_msg"].values())


def test_samples_without_per_kind_counters_count_zero() -> None:
    """A daemon whose status has empty ``datagrams`` dicts (engine not started)."""
    first, last = [node(0.0, 0, 0.0)], [node(1.0, 10, 0.0)]
    assert window(first, last)["datagrams_sent"] == dict.fromkeys(KINDS, 0)


def test_idle_share_is_the_busiest_daemon() -> None:
    first = [node(10.0, 0, 1.0), node(10.0, 0, 2.0), node(10.0, 0, 3.0)]
    last = [node(12.0, 0, 1.02), node(12.0, 0, 2.1), node(12.0, 0, 3.0)]
    assert idle_share(first, last) == pytest.approx(0.05)


def test_table_rows_match_their_columns() -> None:
    first, last = two_nodes()
    w = window(first, last, rcvbuf=(0, 2), clients_cpu=(0.0, 0.5))
    row = throughput_row(4, w, drops=3, idle=0.015, sent=[100, 150, 120, 110], disconnected=1)
    assert len(row) == len(THROUGHPUT_COLUMNS)
    assert row[:3] == [4, 1000.0, 1000.0]
    assert row[3] == pytest.approx(750.0)  # CPU us/msg
    assert row[-5:] == [2, 3, pytest.approx(1.5), 1, pytest.approx(1.5)]
    assert send_spread([5, 0]) is None and send_spread([]) is None
    assert throughput_row(4, w, drops=0, idle=None)[-1] is None

    report = {"latency_samples": 99, "latency_p50_s": 0.001, "latency_p99_s": 0.004}
    lrow = latency_row(4, report, w)
    assert len(lrow) == len(LATENCY_COLUMNS)
    assert lrow[:5] == [4, 99, pytest.approx(1.0), pytest.approx(4.0), 2000]
    assert lrow[7:9] == [pytest.approx(50.0), pytest.approx(37.5)]  # core % max, mean
    assert lrow[9:11] == [pytest.approx(1.5), pytest.approx(500.0)]  # wake-ups, us each
    assert lrow[-2:] == [pytest.approx(2.5), 2]

    drow = datagram_row(4, "light", w, "sent")
    assert len(drow) == len(DATAGRAM_COLUMNS)
    assert drow[:3] == [4, "light", pytest.approx(0.1)]
    assert drow[-1] == pytest.approx(307 / 2000)


def test_latency_row_without_samples() -> None:
    first, last = two_nodes()
    row = latency_row(8, {"latency_samples": 0}, window(first, last))
    assert row[1] == 0 and math.isnan(row[2]) and math.isnan(row[3])


def test_client_cpu_counts_only_clients_sampled_twice() -> None:
    """A client that exited (and was reaped) before the second sample adds nothing, where
    it used to subtract its whole CPU time from the window (negative client CPU at N=32)."""
    assert clients_cpu_window({1: 2.0, 2: 5.0}, {1: 3.5}) == (2.0, 3.5)
    assert clients_cpu_window({}, {7: 1.0}) == (0, 0)


def _delivery_log(directory: Path, records: list[dict[str, Any]]) -> Path:
    directory.mkdir(parents=True)
    lines = [json.dumps({"schema": 1, "type": "delivery", **r}) for r in records]
    (directory / "delivery.jsonl").write_text("\n".join(lines) + "\n{\"cut short")
    return directory


def test_stage_latencies_split_own_and_others_and_skip_the_warm_up(tmp_path: Path) -> None:
    """Node 0 sent at t = 10, 11, 12 (warm-up 0.5 s: the first is left out); node 1's
    own messages and non-delivery records are ignored; a cut-short last line is too."""
    own = _delivery_log(tmp_path / "n0", [
        {"sender": 0, "send_ts": 10.0, "ts": 10.004},
        {"sender": 0, "send_ts": 11.0, "ts": 11.002},
        {"sender": 0, "send_ts": 12.0, "ts": 12.003},
        {"sender": 1, "send_ts": 12.0, "ts": 12.5},
    ])
    other = _delivery_log(tmp_path / "n1", [
        {"sender": 0, "send_ts": 10.0, "ts": 10.009},
        {"sender": 0, "send_ts": 11.0, "ts": 11.001},
        {"sender": 0, "send_ts": 12.0, "ts": 12.001},
        {"type": "view", "sender": 0, "send_ts": 11.0, "ts": 20.0},
    ])
    stages = stage_latencies([own, other, tmp_path / "missing"], sender=0, skip_s=0.5)
    assert sorted(round(x, 6) for x in stages["own"]) == [0.002, 0.003]
    assert [round(x, 6) for x in stages["others"]] == [0.001, 0.001]
    row = stage_row(4, {"latency_p50_s": 0.005}, stages)
    assert len(row) == len(STAGE_COLUMNS)
    assert row[1] == pytest.approx(5.0) and row[2] == pytest.approx(2.0)
    assert row[6] == pytest.approx(3.0)  # the client hops: 5 ms at the client - 2 ms
    assert math.isnan(percentile([], 0.5)) and percentile([3.0, 1.0, 2.0], 0.5) == 2.0
    assert percentile(list(range(1, 101)), 0.99) == 99


@pytest.mark.slow
@pytest.mark.processes
def test_a_short_real_run_reports_every_figure(short_dir: Path) -> None:
    """Three daemons, half-second windows (about 13 s in all), the latency run traced:
    the figures exist and the counters moved; no value is judged (the host is shared).
    The warm-ups are 2 s: they include the load generators' start-up (a Python process
    each), which took more than the window's second on a starved host."""
    r = amcast("bench", "cluster", "--json", "--nodes", "3", "--duration", "0.5",
               "--warmup", "2", "--latency-duration", "0.5", "--latency-warmup", "2",
               "--idle", "0.5", "--latency-rate", "200", "--trace",
               "--dir", str(short_dir / "b"), timeout=120)
    assert r.code == 0, r.err
    report = json.loads(r.out)
    assert [t["columns"] for t in report["tables"]] == [
        THROUGHPUT_COLUMNS, LATENCY_COLUMNS, STAGE_COLUMNS, TRACED_COLUMNS, DATAGRAM_COLUMNS,
        DATAGRAM_COLUMNS]
    traced = report["tables"][3]["rows"]
    assert [row[1] for row in traced] == [*STAGES, "total",
                                          "client hops (client p50 - total p50)"]
    assert all(row[2] > 0 for row in traced[:-1])  # samples of every stage
    assert traced[-2][4] > 0  # the total's p50
    (run,) = report["runs"]
    t, lat = run["throughput"], run["latency"]
    assert t["idle_core_share_max"] >= 0
    for w in (t["window"], lat["window"]):
        assert w["ordered"] > 0
        assert w["datagrams_sent"]["data"] > 0 and w["datagrams_received"]["data"] > 0
        assert w["rcvbuf_errors"] >= 0 and len(w["core_shares"]) == 3
    assert lat["report"]["latency_samples"] > 0
    assert lat["stages"]["own"]["samples"] > 0 and lat["stages"]["others"]["samples"] > 0
    assert 0 < lat["stages"]["own"]["p50_s"] < lat["report"]["latency_p99_s"]
    assert len(lat["receivers"]) == 2 and all(x["delivered"] > 0 and x["sent"] == 0
                                                for x in lat["receivers"])


@pytest.mark.slow
@pytest.mark.processes
def test_a_short_embedded_run_samples_the_members_and_starts_no_daemon(short_dir: Path
                                                                       ) -> None:
    """``--mode embedded``: three application processes embedding their members, the same
    windows: the members' API sockets answered the samples (the counters moved), their
    processes are the ones measured, no client CPU and no idle run. Each process's stdout
    is its JSON report alone: the member logs to stderr (structlog unconfigured there)."""
    r = amcast("bench", "cluster", "--json", "--mode", "embedded", "--nodes", "3",
               "--duration", "0.5", "--warmup", "1", "--latency-duration", "0.5",
               "--latency-warmup", "1", "--latency-rate", "200",
               "--dir", str(short_dir / "e"), timeout=180)
    assert r.code == 0, r.err
    report = json.loads(r.out)
    assert "embedded members" in report["title"]
    assert [t["columns"] for t in report["tables"]] == [
        THROUGHPUT_COLUMNS, LATENCY_COLUMNS, STAGE_COLUMNS, DATAGRAM_COLUMNS, DATAGRAM_COLUMNS]
    (run,) = report["runs"]
    t, lat = run["throughput"], run["latency"]
    assert t["idle_core_share_max"] is None and not t["failures"]
    assert len(t["sent_per_member"]) == 3 and all(x > 0 for x in t["sent_per_member"])
    for w in (t["window"], lat["window"]):
        assert w["ordered"] > 0 and w["clients_cpu_s"] is None
        assert w["datagrams_sent"]["data"] > 0 and len(w["core_shares"]) == 3
        assert w["daemon_cpu_s"] > 0
    assert lat["report"]["latency_samples"] > 0
    assert len(lat["receivers"]) == 2 and all(x["delivered"] > 0 and x["sent"] == 0
                                                for x in lat["receivers"])
    assert len(t["window"]["cores"]) == 1  # one build, one environment: one core
    assert any(note.startswith("N=3: core: decode ") for note in report["notes"])
    # the members' own logs: no amcastd wrote them, the embedded member did
    assert not list((short_dir / "e" / "latency-n3").glob("node*/amcastd.log"))
    assert (short_dir / "e" / "latency-n3" / "node0" / "logs" / "delivery.jsonl").exists()


def test_the_cores_the_nodes_ran_are_reported_once_each() -> None:
    native = {"decode": "native", "seal": "pure", "order": "native", "reliable": "native"}
    pure = dict.fromkeys(native, "pure")
    assert cores([{"core": native}, {"core": pure}, {"core": dict(native)}, {}]) == [
        "decode native, seal pure, order native, reliable native",
        "decode pure, seal pure, order pure, reliable pure"]
    assert cores([{"core": None}]) == []


def test_the_load_generators_need_their_way_to_the_group() -> None:
    """The socket one a daemon's socket, the embedded one a configuration, never both."""
    from amcast.loadgen import main as loadgen_main
    from bench.embedded_load import main as embedded_main

    for main, argv in ((loadgen_main, []), (loadgen_main, ["--config", "c"]),
                       (embedded_main, []), (embedded_main, ["--socket", "s"])):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2


def test_wakeups_reads_this_process_voluntary_context_switches() -> None:
    before = wakeups(os.getpid())
    time.sleep(0.01)  # blocks once: one more voluntary switch at least
    assert wakeups(os.getpid()) > before >= 0


def test_the_ordering_option_reaches_every_daemons_protocol_settings() -> None:
    """``--ordering arrow`` is ``--protocol ordering=arrow``; an explicit ``--protocol``
    setting wins; without either the daemons keep their default (toto)."""
    assert protocol_settings([], None) == {"datagram_budget": 65000}
    assert protocol_settings([], "arrow")["ordering"] == "arrow"
    assert protocol_settings(["ordering=hybrid"], "arrow")["ordering"] == "hybrid"
    args = build_parser().parse_args(["cluster", "--ordering", "combining"])
    assert args.ordering == "combining"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["cluster", "--ordering", "sequencer"])
