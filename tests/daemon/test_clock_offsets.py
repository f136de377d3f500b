"""Daemons whose wall clocks disagree (docs/operations.md, *Sealed datagrams*; ``wire.clock``).

Three sealed daemons in one event loop, each with its own wall clock: node 1's is 5 s
ahead (within ``replay_window``, 30 s: nothing changes but the figure) and node 2's 61 s
ahead (beyond it: its datagrams are refused as ``future``, it refuses the others' as
``stale``, and it is left out). Each says what it sees: the status column, the gauges,
a log warning, and on node 2, the one outside the primary view, a health problem that
names the clocks and says its own is likely the wrong one.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from amcast.daemon.metrics import AmcastCollector
from amcast.daemon.runner import Daemon
from prometheus_client import CollectorRegistry, generate_latest

from amcast.commands.status import membership_report
from amcast.keygen import create
from tests.daemon.daemon_helpers import group_config, loopback_group, running

AHEAD = {0: 0.0, 1: 5.0, 2: 61.0}


def scrape(d: Daemon) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(AmcastCollector(d._take_metrics_snapshot))
    return generate_latest(registry).decode()


def clocks(d: Daemon) -> dict[int, tuple[float | None, bool]]:
    return {p["node"]: (p["clock_offset_s"], p["clock_refused"])
            for p in d.membership_status()["peers"]}


async def test_daemons_name_the_clock_that_is_off_and_by_how_much(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    key = tmp_path / "authkey"
    create(key)
    group = loopback_group()
    daemons = [Daemon(group_config(tmp_path, n, group, security={"key_file": str(key)}),
                      environ={}, wall_clock=lambda ahead=AHEAD[n]: time.time() + ahead)
               for n in range(3)]
    loop = asyncio.get_running_loop()

    def settled() -> bool:
        return (all(d.primary and d.members == [0, 1] for d in daemons[:2])
                and all(clocks(d)[2][1] for d in daemons[:2])
                and all(refused for _, refused in clocks(daemons[2]).values())
                and len(clocks(daemons[2])) == 2
                and not daemons[2].health()["ok"])

    async with running(daemons):
        deadline = loop.time() + 30  # a few seconds; a loaded CI machine more
        while not settled() and loop.time() < deadline:
            await asyncio.sleep(0.1)
        assert settled(), [(d.primary, d.members, clocks(d)) for d in daemons]
        zero, one, two = daemons

        seen = clocks(zero)
        assert 4.9 < seen[1][0] <= 5.0 and seen[1][1] is False  # within the window
        assert 60.9 < seen[2][0] <= 61.0 and seen[2][1] is True
        assert zero.health()["ok"] and one.health()["ok"]  # they order: ready
        offset, refused = clocks(one)[2]  # node 1, 5 s ahead, sees node 2 56 s ahead
        assert refused and offset is not None and 55.9 < offset <= 56.0

        problems = two.health()["problems"]
        clock = [p for p in problems if p.startswith("datagrams refused for their send times")]
        assert clock and problems[0] == clock[0], problems  # the cause first (--health)
        assert "node 0 -61.0 s, node 1 -56.0 s" in clock[0]
        assert "protocol.replay_window (30 s)" in clock[0]
        assert "this host's clock is likely the wrong one" in clock[0]
        assert not [p for p in problems if p.startswith("heard nothing")], problems

        text = scrape(zero)
        assert 'amcast_peer_clock_refused{peer="2"} 1.0' in text
        assert 'amcast_peer_clock_refused{peer="1"} 0.0' in text
        offset = next(float(line.split()[-1]) for line in text.splitlines()
                      if line.startswith('amcast_peer_clock_offset_seconds{peer="2"}'))
        assert 60.9 < offset <= 61.0

        _, table = membership_report(zero.status())
        column = table["columns"].index("clock (s ahead)")
        cells = {row[0]: row[column] for row in table["rows"]}
        assert cells[1].startswith("+4.9") or cells[1].startswith("+5.0"), cells
        assert cells[2].startswith("+61.0 REFUSED"), cells
    warned = [ln for ln in capsys.readouterr().out.splitlines()
              if "peer clock out of the replay window" in ln]
    assert any("node=0 " in ln and "peer=2 " in ln for ln in warned), warned
    assert any("node=2 " in ln and "peer=0 " in ln for ln in warned), warned
    assert not any("node=0 " in ln and "peer=1 " in ln for ln in warned), warned
