"""A daemon restarted with a shorter member list than its last view counted: the next
view needs a majority of the old list too (its acceptors), so it forms none, and the
daemon says why: ``status`` ``quorum.last_view``, a health problem, the quorum line of
``amcast status``, and ``amcast state`` on its state file (docs/membership.md,
*Shrinking the member list*)."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

from amcast.daemon.config import DaemonConfig
from amcast.daemon.runner import Daemon
from amcast.daemon.state import StateFile
from amcast.protocols.membership.durable import DurableState
from amcast.protocols.node import Node
from amcast.protocols.node_config import NodeConfig
from amcast.protocols.wire.membership import Member, ViewRecord

from amcast.commands.status import membership_report
from amcast.localcluster import free_port
from tests.cli.helpers import amcast
from tests.steady import STEADY

OLD = ViewRecord(5, tuple(Member(n, 1) for n in range(3)), (0, 1, 2), 4)


def test_quorum_names_the_last_views_list_only_when_it_differs() -> None:
    def quorum(members: list[int]) -> dict[str, object]:
        return Node(NodeConfig(group_key=b"k" * 16), node_id=0, members=members,
                    rng=random.Random(1), now=0.0,
                    durable=DurableState(0, incarnation=1, known=OLD, max_view_id=5)).quorum

    assert quorum([0]) == {"needed": 1, "listed": 1, "reachable": 1, "last_view": {
        "id": 5, "nodes": [0, 1, 2], "listed": 3, "needed": 2, "reachable": 1}}
    assert "last_view" not in quorum([0, 1, 2])


async def test_a_daemon_whose_last_view_listed_more_nodes_says_what_it_lacks(
    tmp_path: Path,
) -> None:
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    StateFile(str(state_dir), 0).write(
        DurableState(0, incarnation=1, known=OLD, max_view_id=5).encode())
    config = DaemonConfig.model_validate({
        "node": {"id": 0, "members": [0], "seed": 1, "state_dir": str(state_dir)},
        "network": {"group": f"239.255.{random.randrange(1, 255)}.{random.randrange(1, 255)}",
                    "port": free_port(), "ttl": 0},
        "api": {"socket": str(tmp_path / "n0.sock")},
        "metrics": {"port": 0},
        "logs": {"dir": str(tmp_path / "logs"), "format": "json", "level": "warning"},
        "protocol": {"insecure": True, **STEADY},
        "shutdown": {"grace_s": 0.5},
    })
    d = Daemon(config, environ={})
    task = asyncio.create_task(d.run())
    try:
        await asyncio.wait_for(d.ready.wait(), 15)
        # alone it is 1 of its 1 listed nodes, but 1 of the old 3, where 2 must agree
        st = d.status()
        assert st["quorum"]["last_view"] == {"id": 5, "nodes": [0, 1, 2], "listed": 3,
                                             "needed": 2, "reachable": 1}
        assert not st["view"]["primary"] and not d.in_primary_view.is_set()
        assert any(p.startswith("the last view (id 5) listed 3 nodes [0, 1, 2]: 2 of them "
                                "must agree on the next view, and only 1 can be reached")
                   for p in st["health"]["problems"])
        lines, _ = membership_report(st)
        (quorum,) = [ln for ln in lines if ln.startswith("quorum:")]
        assert quorum.endswith("the last view (id 5) listed [0, 1, 2]: 1 of them reachable, 2 "
                               "needed to agree on the next view (SHORT)")
    finally:
        d.request_stop("test")
        await asyncio.wait_for(task, 20)
    # what the operator reads from the files alone, the daemon stopped
    r = amcast("state", str(state_dir))
    assert r.code == 0, r.err
    assert "  last view: 5 after view 4; members 0 (incarnation 1), 1 (incarnation 1), " \
        "2 (incarnation 1)" in r.out
    assert "  its list: [0, 1, 2]: 2 of them must agree on the next view" in r.out
