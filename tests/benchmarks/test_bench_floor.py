"""``amcast bench floor``, shortened: the bare processes run a lone message's pattern
(every message comes back to the sender with its votes, through the clients or
embedded), and the report sets amcast beside the floor (the figures are for
docs/performance.md)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from bench import floor
from tests.cli.test_bench_plot_peers import record, write

pytestmark = pytest.mark.processes


def args(**kw: Any) -> argparse.Namespace:
    base = {"nodes": "3", "rate": 400.0, "duration": 1.0, "warmup": 0.3, "size": 100,
            "amcast": False}
    return argparse.Namespace(**{**base, **kw})


def test_the_floor_delivers_every_message_with_its_votes_and_measures_it() -> None:
    report = json.loads(json.dumps(floor.run(args()), default=str))  # what --json prints
    daemons, embedded = (dict(zip(floor.COLUMNS, row, strict=True))
                         for row in report["tables"][0]["rows"])
    assert (daemons["N"], daemons["run"]) == (3, "floor")
    assert (embedded["N"], embedded["run"]) == (3, "floor, embedded")
    for got in (daemons, embedded):
        # every message sent after the warm-up came back to the sender (400 msgs/s for
        # 1 s, give or take the pacing's first and last)
        assert 390 <= got["samples"] <= 410, got
        assert 0 < got["p50 ms"] <= got["p99 ms"]
        assert got["nodes / daemons CPU s"] > 0
        # wake-ups were counted; how many per message depends on the machine's load (a node
        # that finds several datagrams queued at one wake-up handles them all), so no
        # lower bound above zero holds on a busy CI runner
        assert got["node wake-ups/msg"] > 0
    assert daemons["clients CPU s"] > 0 and embedded["clients CPU s"] == 0  # no clients
    assert report["figures"]["N=3 floor p50 ms"] == daemons["p50 ms"]
    assert report["figures"]["N=3 embedded floor p50 ms"] == embedded["p50 ms"]


def test_amcast_is_set_beside_the_floor_with_their_ratios(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def measured(p50: float, cpu: float) -> Any:
        return lambda n, a, base, **kw: {"n": n, "p50_s": p50, "p99_s": 2 * p50,
                                         "samples": 1000, "node_cpu_s": cpu,
                                         "client_cpu_s": cpu / 4, "wakeups": 4000,
                                         "ordered": 1000}

    monkeypatch.setattr(floor, "floor_run", measured(0.0002, 0.4))
    monkeypatch.setattr(floor, "amcast_run", measured(0.0008, 2.0))
    rows = floor.run(args(nodes="4,8", amcast=True))["tables"][0]["rows"]
    assert [(r[0], r[1]) for r in rows] == [
        (4, "floor"), (4, "floor, embedded"), (4, "amcast"), (4, "amcast / floor"),
        (8, "floor"), (8, "floor, embedded"), (8, "amcast"), (8, "amcast / floor")]
    ratio = dict(zip(floor.COLUMNS, rows[3], strict=True))
    assert ratio["p50 ms"] == pytest.approx(4.0) and ratio["p99 ms"] == pytest.approx(4.0)
    assert ratio["CPU s, all processes"] == pytest.approx(5.0)
    assert ratio["CPU us/msg"] == pytest.approx(5.0)
    assert ratio["node wake-ups/msg"] == pytest.approx(1.0)


def test_the_peers_latency_runs_join_the_table_and_the_chart(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    def measured(n: int, a: Any, base: Any, **kw: Any) -> dict[str, Any]:
        return {"n": n, "p50_s": 0.0003, "p99_s": 0.0009, "samples": 1000,
                "node_cpu_s": 0.3, "client_cpu_s": 0.1, "wakeups": 4000, "ordered": 1000}

    monkeypatch.setattr(floor, "floor_run", measured)
    run = tmp_path / "run"
    for n in (4, 8):
        write(run, f"jgroups-seq-n{n}-lat-nobundle",
              record("jgroups-seq", n, "lat", [1000.0] * n, cpu=0.5, lat=(0.2, 3.0),
                     extra="nobundle"))
        write(run, f"corosync-cpg-n{n}-tput-norr",  # throughput runs stay out
              record("corosync-cpg", n, "tput", [5000.0] * n, cpu=1.0, server_cpu=1.0,
                     extra="norr"))
    png = tmp_path / "floor.png"
    report = floor.run(args(nodes="4,8", peers=run, plot=png))
    peers = [r for r in report["tables"][0]["rows"] if r[1].startswith("JGroups")]
    assert [(r[0], r[1], r[3], r[4]) for r in peers] == [
        (4, "JGroups SEQUENCER (nobundle)", 0.2, 3.0),
        (8, "JGroups SEQUENCER (nobundle)", 0.2, 3.0)]
    # 0.5 CPU-s per member in the 10 s window at 1,000 msgs/s: 500 us per message at N=4
    assert peers[0][8] == pytest.approx(4 * 0.5 / 10_000 * 1e6)
    assert not [r for r in report["tables"][0]["rows"] if r[1].startswith("Corosync")]
    assert png.stat().st_size > 10_000
    labels = [s["label"] for s in floor.chart_series(report["tables"][0]["rows"])]
    assert labels == ["floor: bare Python, daemon + client hops",
                      "floor: bare Python, embedded (no client hops)",
                      "JGroups SEQUENCER (nobundle)"]
