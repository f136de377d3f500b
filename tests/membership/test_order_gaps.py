"""Order gaps (``OrderGap``) on full Nodes in the simulator (virtual time, seeded).

A gap notice tells an application that this member did not deliver part of the total
order, after ``after``, so it rebuilds its state from another member's. Two things make
it usable: ``after`` is the very last ordered message the member delivered (a replica
restored from another member's state at ``after``, plus its own later deliveries, is
identical to the others'), and there is no notice where nothing can have been missed
(a member that joins the group's first view, or a view whose predecessor was the first
and closed empty), while a member that may have missed messages always gets one.
"""

from __future__ import annotations

import pytest
from amcast.protocols.events import OrderGap, ViewInstalled
from amcast.protocols.simulation.checkers import Delivery, Proc
from amcast.protocols.simulation.cluster import Cluster, Workload
from amcast.protocols.simulation.faults import Fault

from tests.membership.test_scenarios import CFG, SUSPECT, cluster, events, ok

Entry = tuple[int, int, bytes]
"""(view, position, payload) of one ordered delivery."""


def ordered(log: list[Delivery]) -> list[Entry]:
    """A member's ordered deliveries, in its delivery order (the total order)."""
    return [(d.view, d.position, d.payload) for d in log if d.position is not None]


def state_at(log: list[Entry], after: tuple[int, int] | None) -> list[bytes]:
    """The replica state of a member with ordered deliveries ``log`` right after the
    message at ``after`` (None: the initial state). The replica is the list of the
    messages applied, in order: two replicas are equal only if they applied the same
    messages in the same order."""
    return [payload for _, _, payload in log[: index_after(log, after)]]


def index_after(log: list[Entry], after: tuple[int, int] | None) -> int:
    """Index in ``log`` of the first delivery after the one at ``after``."""
    if after is None:
        return 0
    return next(i for i, (v, p, _) in enumerate(log) if (v, p) == after) + 1


def restored_replica_matches(c: Cluster, node: int, donor: int) -> OrderGap:
    """``node`` (one life) got a gap. Its replica before the gap is ``donor``'s state at
    the gap's ``after``, exactly; restored from there (what ``donor`` delivered after
    ``after``, before the gap's view: the state transfer) and then fed ``node``'s own
    deliveries from the gap's view on, it ends equal to ``donor``'s."""
    gap = events(c, node, OrderGap)[-1]
    mine = ordered(c.proc_logs[Proc(node)])
    theirs = ordered(c.proc_logs[Proc(donor)])
    before = [p for v, _, p in mine if v < gap.view]
    later = [p for v, _, p in mine if v >= gap.view]
    assert before and later, "a gap between deliveries"
    assert before == state_at(theirs, gap.after)
    assert [x[:2] for x in mine if x[0] < gap.view][-1] == gap.after  # its very last one
    transfer = [p for v, _, p in theirs[index_after(theirs, gap.after):] if v < gap.view]
    assert transfer  # it did miss messages
    assert before + transfer + later == [p for _, _, p in theirs]
    return gap


LOAD = Workload(messages_per_node=80, interval=0.04)


@pytest.mark.parametrize("seed", [11, 12])
def test_a_replica_restored_at_after_of_a_paused_member_matches_the_others(seed: int) -> None:
    c = cluster(4, seed=seed)
    c.schedule(Fault(1.0, "pause", (3,), 3 * SUSPECT))
    ok(c.run(LOAD, max_time=40))
    gap = restored_replica_matches(c, 3, donor=0)
    assert gap.after is not None
    for other in (1, 2):
        assert ordered(c.proc_logs[Proc(other)]) == ordered(c.proc_logs[Proc(0)])


@pytest.mark.parametrize("seed", [21, 22])
def test_a_replica_restored_at_after_of_a_partitioned_member_matches_the_others(
    seed: int,
) -> None:
    c = cluster(4, seed=seed)
    c.schedule(Fault(1.0, "partition", (), 2.5, groups=((0, 1, 2), (3,))))
    ok(c.run(LOAD, max_time=40))
    gap = restored_replica_matches(c, 3, donor=1)
    assert gap.after is not None


def first_views(c: Cluster, node: int) -> list[ViewInstalled]:
    return events(c, node, ViewInstalled)


def test_a_new_cluster_has_no_gap() -> None:
    """Every node starts with nothing and the first view is the group's: no order came
    before it, so no notice (each daemon of a new cluster used to report one)."""
    c = cluster(4, seed=31)
    ok(c.run(Workload(messages_per_node=10), max_time=10))
    for i in range(4):
        assert first_views(c, i)[0].previous == 0
        assert events(c, i, OrderGap) == []


def test_joining_the_second_view_before_anything_was_ordered_is_no_gap() -> None:
    c = cluster(4, seed=32, start=(0, 1, 2))
    c.advance(1.0)  # the first view forms without node 3, and stays empty
    (first,) = first_views(c, 0)
    assert first.previous == 0 and first.members == (0, 1, 2)
    c.apply(Fault(c.now, "start", (3,)))
    c.advance(c.now + 1.0)
    joined = first_views(c, 3)[0]
    assert joined.previous == first.view and 3 in joined.joined
    assert events(c, 3, OrderGap) == []
    ok(c.run(Workload(messages_per_node=10), max_time=c.now + 10))
    assert events(c, 3, OrderGap) == []
    assert ordered(c.proc_logs[Proc(3)]) == ordered(c.proc_logs[Proc(0)])


def test_joining_a_group_that_ordered_messages_is_a_gap_after_nothing() -> None:
    c = cluster(4, seed=33, start=(0, 1, 2))
    c.schedule(Fault(1.5, "start", (3,)))
    ok(c.run(Workload(messages_per_node=40, senders=3, interval=0.02), max_time=20))
    (gap,) = events(c, 3, OrderGap)
    assert gap.after is None
    joined = next(v for v in first_views(c, 3))
    assert gap.view == joined.view
    missed = [x for x in ordered(c.proc_logs[Proc(0)]) if x[0] < gap.view]
    assert missed  # it missed these: a replica starts from another member's state
    later = [p for v, _, p in ordered(c.proc_logs[Proc(3)]) if v >= gap.view]
    assert [p for _, _, p in missed] + later == [p for _, _, p in ordered(c.proc_logs[Proc(0)])]


def test_a_whole_cluster_restarted_in_its_first_view_is_told_of_a_gap() -> None:
    """The first view closed with ordered messages, and every member restarted: the
    next view's cut is empty only because nobody could report it, and no member of both
    views vouches for it. The new lives remember nothing: each gets a gap (after
    nothing)."""
    c = cluster(3, seed=34, node_config=CFG)
    c.run(Workload(messages_per_node=10, interval=0.01), max_time=1.0)
    first = first_views(c, 0)
    assert len(first) == 1 and first[0].previous == 0 and ordered(c.proc_logs[Proc(0)])
    for i in range(3):
        c.apply(Fault(c.now, "restart", (i,)))
    c.advance(c.now + 2.0)
    for i in range(3):
        assert [v.previous for v in c.views[Proc(i, 1)]][:1] == [first[0].view]
        gaps = events(c, i, OrderGap)
        assert gaps and gaps[-1].after is None
