"""A view change that only a member not heard from may have decided: the coordinating
daemon says so (docs/membership.md, *View changes*: the double failure).

Two daemons of the three listed start from state files that leave them where the
simulator's seed 35101317 left the live members: view 3 = {0, 1, 2} was being closed by
a proposal (view 5) that node 1's new life voted for, not holding the cut, and node 2,
a member of both views, promised and may have voted as its holder before it died. Paxos
keeps that proposal, and no live member holds its cut, so every round proposes it again
and decides nothing. Node 2 never starts here.

The second test starts one daemon of three alone: its health says it hears nobody, and
what to check.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest
from amcast.daemon.config import DaemonConfig
from amcast.daemon.runner import Daemon
from amcast.daemon.state import StateFile
from amcast.protocols.membership.durable import DurableState
from amcast.protocols.wire.membership import Ballot, Member, Proposal, ViewRecord

from amcast.localcluster import free_port

VIEW3 = ViewRecord(3, tuple(Member(n, 1) for n in range(3)), (0, 1, 2), 1)
VIEW5 = ViewRecord(5, (Member(0, 1), Member(1, 2), Member(2, 1)), (0, 1, 2), 3)
KEPT = Proposal(VIEW5, VIEW3, ((0, 4), (1, 3), (2, 6)))
STATES = {
    0: DurableState(0, incarnation=1, promised=Ballot(4, 0), known=VIEW3, max_view_id=5),
    1: DurableState(1, incarnation=2, promised=Ballot(4, 0), accepted=(Ballot(4, 0), KEPT),
                    accepted_held=False, known=VIEW3, max_view_id=5),
}


def config(tmp_path: Path, node: int, group: str, port: int,
           **protocol: float) -> DaemonConfig:
    state_dir = tmp_path / f"state{node}"
    state_dir.mkdir()
    StateFile(str(state_dir), node).write(STATES[node].encode())
    return DaemonConfig.model_validate({
        "node": {"id": node, "members": [0, 1, 2], "seed": node + 1,
                 "state_dir": str(state_dir)},
        "network": {"group": group, "port": port, "ttl": 0},
        "api": {"socket": str(tmp_path / f"n{node}.sock")},
        "metrics": {"port": 0},
        "logs": {"dir": str(tmp_path / f"logs{node}"), "format": "json", "level": "warning"},
        "protocol": {"insecure": True, **protocol},
        "shutdown": {"grace_s": 0.5},
    })


async def test_the_coordinator_names_the_member_a_blocked_view_change_awaits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    group = f"239.255.{random.randrange(1, 255)}.{random.randrange(1, 255)}"
    port = free_port()
    daemons = [Daemon(config(tmp_path, n, group, port), environ={}) for n in (0, 1)]
    tasks = [asyncio.create_task(d.run()) for d in daemons]
    coordinator = daemons[0]
    try:
        await asyncio.wait_for(asyncio.gather(*(d.ready.wait() for d in daemons)), 15)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30  # 4 rounds take about 1.2 s; a loaded CI machine more
        while coordinator.node.view_change_blocked is None and loop.time() < deadline:
            await asyncio.sleep(0.1)
        blocked = coordinator.node.view_change_blocked
        assert blocked is not None, "node 0 never reported the view change blocked"
        assert blocked["view"] == 5 and blocked["awaited"] == [2] and blocked["rounds"] >= 4
        problems = coordinator.health()["problems"]
        assert any(p.startswith("view change blocked for ") and "view 5 may have been "
                   "decided by node(s) [2], not heard from" in p for p in problems), problems
        peers = coordinator.membership_status()["peers"]
        assert [p["node"] for p in peers if p["awaited_s"]] == [2]
        assert not any(d.primary for d in daemons)
        assert not [p for p in problems if p.startswith("heard nothing")]  # they hear
        assert daemons[1].node.view_change_blocked is None  # the coordinator says so
    finally:
        for d in daemons:
            d.request_stop("test")
        await asyncio.wait_for(asyncio.gather(*tasks), 20)
    lines = [ln for ln in capsys.readouterr().out.splitlines() if "view change blocked" in ln]
    assert lines and "awaited" in lines[0] and "[2]" in lines[0], lines[:2]


async def test_a_daemon_that_hears_no_other_member_says_so(tmp_path: Path) -> None:
    """Started alone (or behind a firewall that drops what comes in), after twice
    ``suspect_timeout`` of hearing nobody its health says what to check."""
    group = f"239.255.{random.randrange(1, 255)}.{random.randrange(1, 255)}"
    d = Daemon(config(tmp_path, 0, group, free_port(), suspect_timeout=0.3), environ={})
    task = asyncio.create_task(d.run())
    try:
        await asyncio.wait_for(d.ready.wait(), 15)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20
        while loop.time() < deadline:
            found = [p for p in d.health()["problems"] if p.startswith("heard nothing")]
            if found:
                break
            await asyncio.sleep(0.1)
        assert found and "from any other listed member for " in found[0], d.health()
        assert "does not receive the group's traffic" in found[0]
    finally:
        d.request_stop("test")
        await asyncio.wait_for(task, 20)
