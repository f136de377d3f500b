"""``amcast bench floor``, shortened: the bare processes run a lone message's pattern
(every message comes back to the sender with its votes, through the clients or
embedded), and the report sets amcast beside the floor (the figures are for the
README)."""

from __future__ import annotations

import argparse
import json
from typing import Any

import pytest

from amcast.benchmarks import floor

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
        assert got["node wake-ups/msg"] > 1  # the sender's node and the acker, at least
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
