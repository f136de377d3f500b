"""A member that stays up through view change after view change keeps a bounded state.

A daemon runs for months; members crash, restart, pause, leave and are cut off around
it. Everything the engine keeps per view, per incarnation or per session must be let go
(retired views after ``RETIRE_AFTER``, the decision history after ``HISTORY`` views,
replay sessions after the window), or memory grows with every view change. The cluster
here cycles a restart, a pause, a one-member partition and a leave-and-rejoin through
four members while node 0 stays up under traffic, about three views a cycle. Node 0's
footprint (every object reachable from its Node, shared code excluded) is measured
every fourth cycle, quiescent and idle for longer than ``RETIRE_AFTER``: once the
bounded tables have filled, it may grow by no more than the bounded caches still
filling, about 200 bytes a view (a retired view's state would be kilobytes). Every
safety checker runs over the whole history.
"""

from __future__ import annotations

import gc
import random
import sys
import types

import pytest
from amcast.protocols.membership.layer import HISTORY, RETIRE_AFTER
from amcast.protocols.node_config import NodeConfig
from amcast.protocols.simulation.cluster import Cluster, Workload
from amcast.protocols.simulation.faults import Fault
from amcast.protocols.simulation.network import LinkFaults, NetworkConfig

CYCLES = 76
"""About 1.5 views installed at node 0 a cycle: the history table fills by cycle 45."""
_SHARED = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
           types.MethodType, types.CodeType, random.Random)


def footprint(root: object) -> int:
    """Bytes of every object reachable from ``root``, classes, modules, functions and
    random generators excluded (they are shared or fixed in size)."""
    seen: set[int] = set()
    stack = [root]
    total = 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, _SHARED):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        stack.extend(gc.get_referents(obj))
    return total


def cycle_faults(c: Cluster, k: int) -> None:
    victim = 1 + k % 4
    at = c.now + 0.05
    kind = ("restart", "pause", "partition", "leave")[k % 4]
    if kind == "restart":
        c.schedule(Fault(at, "restart", (victim,)))
    elif kind == "pause":
        c.schedule(Fault(at, "pause", (victim,), duration=2.0))
    elif kind == "partition":
        c.schedule(Fault(at, "partition", (), duration=2.0, groups=((victim,),)))
    else:
        c.schedule(Fault(at, "leave", (victim,), duration=2.0))
        c.schedule(Fault(at + 2.5, "start", (victim,)))


@pytest.mark.slow
def test_a_member_through_a_hundred_view_changes_keeps_a_bounded_state() -> None:
    c = Cluster(5, seed=36, node_config=NodeConfig(group_key=b"long-run-footprint-key"),
                network=NetworkConfig(default=LinkFaults(loss=0.02, duplicate=0.01,
                                                         reorder=0.05)))
    points: list[tuple[int, int]] = []  # (views installed at node 0, its footprint)
    for k in range(CYCLES):
        cycle_faults(c, k)
        c.run(Workload(messages_per_node=8, interval=0.01), max_time=c.now + 30, settle=1.0)
        if k % 4 == 3:  # quiescent, and idle until the retired views are let go
            c.advance(c.now + RETIRE_AFTER + 1.5)
            points.append((len(c.views[c.proc(0)]), footprint(c.nodes[0])))
    result = c.result()
    assert result.ok, {k: v[:3] for k, v in result.violations.items() if v}
    full = [(views, size) for views, size in points if views > HISTORY + 4]
    (first_views, first), (last_views, last) = full[0], full[-1]
    assert last_views - first_views >= 40, points  # that many views after the tables filled
    per_view = (last - first) / (last_views - first_views)
    # measured: about 200 bytes a view, bounded caches filling (a cipher per new peer
    # session, up to 1,024; sets at their peak size; larger ints). A history without
    # its bound (HISTORY patched away) reads 1,263; one retired view kept, kilobytes
    assert per_view < 500, (per_view, points)
