"""``amcast bench plot-peers``: figures of a hand-made peer-harness run directory (no
harness, no processes but the CLI), the chart and its figures file, and the one-line
errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from amcast.commands._common import CommandFailed
from bench.peers_plot import FORMAT, label, per_rep, read_run
from tests.cli.helpers import amcast

DURATION = 10.0


def record(system: str, n: int, mode: str, rates: list[float], *, cpu: float,
           server_cpu: float | None = None, lat: tuple[float, float] | None = None,
           extra: str = "", ok: bool = True, rep: int = 0) -> dict[str, Any]:
    """One repetition as ``driver.py`` writes it: every member with the same CPU; in a
    latency run the last member sends and times (the others carry no latency fields)."""
    members = []
    for i, rate in enumerate(rates):
        sender = mode == "tput" or i == len(rates) - 1
        m: dict[str, Any] = {"system": system, "mode": mode, "n": n, "member": i,
                             "sender": sender, "deliver_rate": rate,
                             "send_rate": rate / n if sender else 0.0, "cpu_window_s": cpu}
        if server_cpu is not None:
            m["server_cpu_window_s"] = server_cpu
        if lat is not None and i == len(rates) - 1:
            m.update(lat_samples=10000, lat_p50_ms=lat[0], lat_p99_ms=lat[1],
                     lat_max_ms=lat[1] * 2, lat_mean_ms=lat[0])
        members.append(m)
    return {"system": system, "extra": extra, "n": n, "mode": mode, "rep": rep, "warmup": 3,
            "duration": DURATION, "payload": 100, "rate": 1000, "ok": ok,
            "udp": {"RcvbufErrors": 0}, "members": members, "order_consistent": ok}


def write(run: Path, config: str, *recs: dict[str, Any]) -> None:
    run.mkdir(parents=True, exist_ok=True)
    (run / f"{config}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """amcast and Corosync (stock and ``norr``), N = 4 and 8, tput and lat, 2 reps each."""
    run = tmp_path / "20261124T000000Z"
    for n in (4, 8):
        write(run, f"amcast-n{n}-tput",
              record("amcast", n, "tput", [1000.0 * n] * n, cpu=1.0, server_cpu=3.0),
              record("amcast", n, "tput", [3000.0 * n] * n, cpu=2.0, server_cpu=2.0, rep=1))
        write(run, f"amcast-n{n}-lat",
              record("amcast", n, "lat", [1000.0] * n, cpu=0.1, server_cpu=0.4,
                     lat=(2.0 * n, 5.0 * n)),
              record("amcast", n, "lat", [1000.0] * n, cpu=0.1, server_cpu=0.4,
                     lat=(3.0 * n, 9.0 * n), rep=1))
        for extra, suffix in (("", ""), ("norr", "-norr")):
            slow = 2.0 if extra else 1.0
            write(run, f"corosync-cpg-n{n}-tput{suffix}",
                  record("corosync-cpg", n, "tput", [100.0, 300.0] + [200.0] * (n - 2),
                         cpu=0.5 * slow, server_cpu=0.5, extra=extra),
                  record("corosync-cpg", n, "tput", [400.0] * n, cpu=1.5, server_cpu=0.5,
                         extra=extra, rep=1))
            write(run, f"corosync-cpg-n{n}-lat{suffix}",
                  record("corosync-cpg", n, "lat", [1000.0] * n, cpu=0.01,
                         lat=(0.2 * slow, 1.0), extra=extra),
                  record("corosync-cpg", n, "lat", [1000.0] * n, cpu=0.01,
                         lat=(0.4 * slow, 3.0), extra=extra, rep=1))
    # a failed repetition is left out, as summarize.py does
    with (run / "amcast-n8-tput.jsonl").open("a") as f:
        f.write(json.dumps(record("amcast", 8, "tput", [1.0] * 8, cpu=9.0, ok=False)) + "\n")
    (run / "log.txt").write_text("not a record\n")
    return run


def points(data: dict[str, Any]) -> dict[tuple[str, str, int, str], dict[str, Any]]:
    return {(s["system"], s["variant"], p["n"], p["mode"]): p
            for s in data["series"] for p in s["points"]}


def test_per_rep_follows_the_harness() -> None:
    rec = record("corosync-cpg", 4, "lat", [900.0, 1000.0, 1100.0, 1000.0], cpu=0.25,
                 server_cpu=0.25, lat=(0.3, 1.2))
    got = per_rep(rec)
    assert got["ordered_msgs_s"] == 1000.0
    assert got["lat_p50_ms"] == 0.3 and got["lat_p99_ms"] == 1.2
    assert got["cpu_us_per_msg"] == pytest.approx(4 * 0.5 / (1000.0 * DURATION) * 1e6)
    assert per_rep(record("amcast", 4, "tput", [5.0] * 4, cpu=1.0))["lat_p50_ms"] is None


def test_grouping_into_systems_and_variants(run_dir: Path) -> None:
    data = read_run(run_dir)
    assert data["format"] == FORMAT
    assert [(s["system"], s["variant"], s["label"]) for s in data["series"]] == [
        ("amcast", "", "amcast"),
        ("corosync-cpg", "", "Corosync CPG"),
        ("corosync-cpg", "norr", "Corosync CPG (norr)"),
    ]
    for s in data["series"]:
        assert [(p["n"], p["mode"]) for p in s["points"]] == [
            (4, "lat"), (4, "tput"), (8, "lat"), (8, "tput")]
    got = points(data)
    assert got[("corosync-cpg", "norr", 4, "tput")]["configs"] == ["corosync-cpg-n4-tput-norr"]
    assert label("jgroups-seq", "nobundle") == "JGroups SEQUENCER (nobundle)"
    assert label("corosync-cpg", "crypto,norr") == "Corosync CPG (crypto, norr)"
    assert label("something-new", "") == "something-new"


def test_medians_over_repetitions(run_dir: Path) -> None:
    got = points(read_run(run_dir))
    for n in (4, 8):
        tput = got[("amcast", "", n, "tput")]
        # rep 0: 1000n msgs/s, 4 CPU-s per member -> 4n / (1000n x 10) s = 400 µs;
        # rep 1: 3000n msgs/s, 4 CPU-s per member -> 133.3 µs
        assert tput["ordered_msgs_s"] == 2000.0 * n
        assert tput["cpu_us_per_msg"] == pytest.approx((400.0 + 400.0 / 3) / 2)
        assert tput["lat_p50_ms"] is None and tput["reps"] == 2
        lat = got[("amcast", "", n, "lat")]
        assert lat["lat_p50_ms"] == pytest.approx(2.5 * n)
        assert lat["lat_p99_ms"] == pytest.approx(7.0 * n)
        assert lat["ordered_msgs_s"] == 1000.0
        assert lat["cpu_us_per_msg"] == pytest.approx(0.5 * n / (1000.0 * DURATION) * 1e6)
        stock, norr = got[("corosync-cpg", "", n, "tput")], got[("corosync-cpg", "norr", n, "tput")]
        assert stock["ordered_msgs_s"] == norr["ordered_msgs_s"] == 300.0  # (200 + 400) / 2
        # stock: 1.0 and 2.0 CPU-s per member over 2000 and 4000 messages -> 500 µs both
        assert stock["cpu_us_per_msg"] == pytest.approx(500.0 * n)
        # norr: 1.5 CPU-s per member over 2000 -> 750n, then 500n -> median 625n
        assert norr["cpu_us_per_msg"] == pytest.approx(625.0 * n)
        assert got[("corosync-cpg", "", n, "lat")]["lat_p50_ms"] == pytest.approx(0.3)
        assert got[("corosync-cpg", "norr", n, "lat")]["lat_p50_ms"] == pytest.approx(0.6)
        assert got[("corosync-cpg", "norr", n, "lat")]["lat_p99_ms"] == pytest.approx(2.0)
    assert got[("amcast", "", 8, "tput")]["failed"] == 1
    assert got[("amcast", "", 4, "tput")]["failed"] == 0


def test_systems_filter(run_dir: Path) -> None:
    data = read_run(run_dir, {"corosync-cpg"})
    assert {s["system"] for s in data["series"]} == {"corosync-cpg"}
    with pytest.raises(CommandFailed, match="no successful repetition of jgroups-seq"):
        read_run(run_dir, {"jgroups-seq"})


@pytest.mark.processes
def test_chart_figures_file_and_remake(run_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "perf" / "w1-vs-n.png"
    r = amcast("bench", "plot-peers", str(run_dir), "--out", str(png))
    assert r.code == 0, r.err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    figures = json.loads((tmp_path / "perf" / "w1-vs-n.json").read_text())
    assert figures == read_run(run_dir)
    assert "Corosync CPG (norr)" in r.out and str(png) in r.out

    again = tmp_path / "again.png"
    r = amcast("bench", "plot-peers", "--from-json", str(tmp_path / "perf" / "w1-vs-n.json"),
               "--out", str(again), "--json")
    assert r.code == 0, r.err
    printed = json.loads(r.out)
    assert printed["series"] == figures["series"] and printed["plot"] == str(again)
    assert again.stat().st_size > 10_000
    assert json.loads((tmp_path / "again.json").read_text()) == figures


@pytest.mark.processes
@pytest.mark.parametrize(("args", "code", "words"), [
    (["EMPTY"], 1, "no *.jsonl"),
    (["MISSING"], 1, "not a directory"),
    (["BROKEN"], 1, "broken.jsonl:2: not a JSON line"),
    (["--from-json", "BROKEN/broken.jsonl"], 1, "not JSON"),
    ([], 2, "RUN_DIR or --from-json"),
])
def test_one_line_errors(tmp_path: Path, args: list[str], code: int, words: str) -> None:
    (tmp_path / "EMPTY").mkdir()
    write(tmp_path / "BROKEN", "broken", record("amcast", 4, "tput", [1.0] * 4, cpu=1.0))
    with (tmp_path / "BROKEN" / "broken.jsonl").open("a") as f:
        f.write("{truncated\n")
    r = amcast("bench", "plot-peers", *[str(tmp_path / a) if a.isupper() or "/" in a else a
                                        for a in args], "--out", str(tmp_path / "x.png"))
    assert r.code == code
    assert words in r.one_error_line()
    assert r.one_error_line().startswith("amcast: error: ")
    assert not (tmp_path / "x.png").exists()
