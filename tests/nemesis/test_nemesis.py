"""The nemesis (``nemesis/``): its checkers catch what they are for, and a short run
against real daemons passes.

The checkers are fed hand-made facts with one planted violation each (a duplicate, a
reorder, a lost accepted message, a lying health sample, ...) and must report it, under
the property it violates; the same facts without the plant must pass, so a checker that
reports everything is caught too. The schedule is a pure function of its seed.

``test_short_run`` is the process test: 3 daemons over unicast (the relay makes the
partitions), a fixed seed whose schedule has every fault kind, 40 s of faults, then
convergence and every check, none of them waived.
Where libfaketime is missing the clock steps drop out of the kinds, and the schedule
is the one of the kinds that are left.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from amcast.protocols.simulation.checkers import Proc

from amcast.faultload import DELIVER, GAP, VIEW, Notice, Recorder
from nemesis import checks
from nemesis import schedule as S
from nemesis.faults import Outage
from nemesis.load import HealthSample
from nemesis.logs import lives
from nemesis.run import Options, nemesis

MEMBERS = [0, 1, 2]
V1, V2 = 1_000, 1_001  # a first view and its successor


def start(node: int) -> dict[str, Any]:
    return {"schema": 1, "type": "start", "node": node, "incarnation": 7, "ts": 0.0,
            "members": MEMBERS}


def view(node: int, vid: int, previous: int | None, members: list[int] = MEMBERS
         ) -> dict[str, Any]:
    return {"schema": 1, "type": "view", "node": node, "incarnation": 7, "ts": 1.0,
            "view": vid, "primary": True, "members": members, "previous": previous}


def deliver(node: int, vid: int, sender: int, seq: int, position: int, count: int = 1,
            service: str = "agreed") -> dict[str, Any]:
    return {"schema": 1, "type": "delivery", "node": node, "incarnation": 7, "ts": 2.0,
            "view": vid, "sender": sender, "seq": seq, "position": position,
            "count": count, "service": service}


def clean_log(node: int) -> list[dict[str, Any]]:
    """What every node of a healthy 3-node cluster logs: two views, the same order."""
    return [start(node), {"schema": 1, "type": "gap", "node": node, "incarnation": 7,
                          "ts": 0.5, "view": V1, "after": None},
            view(node, V1, None), deliver(node, V1, 0, 1, 0, 2), deliver(node, V1, 1, 1, 2),
            deliver(node, V1, 2, 1, 3, service="safe"), view(node, V2, V1),
            deliver(node, V2, 2, 1, 0), deliver(node, V2, 0, 1, 1, 3)]


def judge(logs: dict[int, list[dict[str, Any]]]) -> set[str]:
    lv = lives([(f"node {n}", r) for n, recs in logs.items() for r in recs])
    found = checks.check_logs(lv, live={Proc(n, 0) for n in logs})
    return {v.prop for v in found}


def test_clean_logs_pass() -> None:
    assert judge({n: clean_log(n) for n in MEMBERS}) == set()


def test_a_duplicate_is_reported() -> None:
    logs = {n: clean_log(n) for n in MEMBERS}
    logs[1].insert(4, deliver(1, V1, 0, 1, 2, 2))  # the first batch again
    assert "no_duplicates" in judge(logs)


def test_a_reorder_is_reported() -> None:
    logs = {n: clean_log(n) for n in MEMBERS}
    # node 2 orders the last two messages of view 1 the other way round
    logs[2][4:6] = [deliver(2, V1, 2, 1, 2, service="safe"), deliver(2, V1, 1, 1, 3)]
    assert "total_order" in judge(logs)


def test_a_missing_message_at_a_complete_member_is_reported() -> None:
    logs = {n: clean_log(n) for n in MEMBERS}
    del logs[0][4]  # node 0 completed view 1 without one message the others delivered
    assert {"agreement", "total_order"} <= judge(logs)


def test_an_agreed_tail_of_a_member_that_did_not_complete_the_view_is_allowed() -> None:
    logs = {n: clean_log(n) for n in MEMBERS}
    # node 2 was cut off in view 1 and delivered another agreed message at the end
    logs[2] = [*logs[2][:5], deliver(2, V1, 2, 9, 3)]
    assert judge(logs) == set()


def test_two_first_views_for_one_start_are_reported() -> None:
    logs = {n: clean_log(n) for n in MEMBERS}
    logs[2] = [start(2), view(2, 999, None, [2])]
    assert "views" in judge(logs) or "primary" in judge(logs)


def test_a_wrong_gap_notice_is_reported() -> None:
    logs = {n: clean_log(n) for n in MEMBERS}
    logs[0].append({"schema": 1, "type": "gap", "node": 0, "incarnation": 7, "ts": 3.0,
                    "view": V2 + 1, "after": [V2, 9]})  # it delivered up to [V2, 3]
    assert "gap_notice" in judge(logs)


def recorder(sent: int, delivered: list[int], reported: set[int] = frozenset()) -> Recorder:
    """A client that sent ``sent`` messages in one frame and saw ``delivered`` of them
    delivered in one primary view (without a connection: the verdict reads records)."""
    rec = Recorder(0, 0)
    rec.welcome = {"view": V1, "primary": True, "members": MEMBERS}
    rec.timeline = [(DELIVER, 1.0, V1, i, 0, n) for i, n in enumerate(delivered)]
    rec.next_number = sent
    rec.frames = {0: sent}
    rec.reported = set(reported)
    return rec


def test_a_lost_accepted_message_is_reported() -> None:
    assert checks.check_clients([recorder(3, [0, 1], {2})]) == []
    found = checks.check_clients([recorder(3, [0, 1])])
    assert {v.prop for v in found} == {"delivered_or_reported", "sender_outcome"}
    assert all("e.g. [2]" in v.detail for v in found)


def test_a_message_only_a_crashed_daemon_delivered_is_still_owed_to_its_sender() -> None:
    sender = recorder(3, [0, 1])
    crashed = Recorder(1, 1)  # a client of a daemon killed in the view: its tail had 2
    crashed.welcome = {"view": V1, "primary": True, "members": MEMBERS}
    crashed.timeline = [(DELIVER, 1.0, V1, i, 0, n) for i, n in enumerate([0, 1, 2])]
    crashed.closed_at = 2.0
    found = checks.check_clients([sender, crashed])
    assert [v.prop for v in found] == ["sender_outcome"]
    assert "neither delivered to it nor reported back, e.g. [2]" in found[0].detail


def test_a_client_side_duplicate_is_reported() -> None:
    found = checks.check_clients([recorder(2, [0, 1, 1])])
    assert "client_views" in {v.prop for v in found}


def late_joiner(skipped: bool) -> Recorder:
    """A client that saw view 2's frame, then its deliveries from position 5 (or, with
    ``skipped``, 5, 6 and 8)."""
    frame = {"t": "view", "view": V2, "members": MEMBERS, "primary": True, "previous": V1}
    rec = Recorder(0, 0)
    rec.welcome = {"view": V1, "primary": False, "members": MEMBERS}
    rec.timeline = [(VIEW, 1.0, frame)] + [
        (DELIVER, 3.0, V2, p, 1, p) for p in ([5, 6, 8] if skipped else [5, 6, 7])]
    rec.notices = [Notice(1.0, VIEW, frame)]
    return rec


def test_a_client_whose_join_was_answered_mid_view_is_not_owed_its_start() -> None:
    assert checks.check_clients([late_joiner(False)], {0: 2.0}) == []
    found = checks.check_clients([late_joiner(False)], {0: 0.5})  # joined before the view
    assert [v.prop for v in found] == ["client_views"]
    found = checks.check_clients([late_joiner(True)], {0: 2.0})  # a hole after the join
    assert [v.prop for v in found] == ["client_views"]


def test_a_gap_frame_past_the_clients_last_delivery_is_reported() -> None:
    def client(after: int) -> Recorder:
        rec = recorder(3, [0, 1, 2])
        rec.timeline.append((GAP, 4.0, {"t": "gap", "view": V2, "after": [V1, after]}))
        return rec

    assert checks.check_clients([client(2)]) == []
    found = checks.check_clients([client(5)])  # in other units, or past a message
    assert [v.prop for v in found] == ["gap_notice"]


def sample(at: float, node: int, ok: bool, primary: bool, members: tuple[int, ...]
           ) -> HealthSample:
    return HealthSample(at, node, f"node {node}", ok, primary, V1, members)


def test_health_ok_outside_a_primary_view_is_a_lie() -> None:
    assert checks.check_health([sample(1.0, 0, False, False, (0,))], [], 5.0) == []
    found = checks.check_health([sample(1.0, 0, True, False, (0,))], [], 5.0)
    assert [v.prop for v in found] == ["health"]


def test_a_primary_view_holding_a_killed_node_too_long_is_reported() -> None:
    killed = [Outage(2, since=10.0, until=30.0, by=None, why="killed")]
    early = sample(13.0, 0, True, True, (0, 1, 2))  # within the bound: a view change due
    late = sample(20.0, 0, True, True, (0, 1, 2))
    after = sample(31.0, 0, True, True, (0, 1, 2))  # restarted and back in
    assert checks.check_health([early, after], killed, 5.0) == []
    found = checks.check_health([early, late, after], killed, 5.0)
    assert [v.prop for v in found] == ["health"] and "node 2, killed" in found[0].detail


def test_a_partition_is_judged_from_each_side() -> None:
    cut = [Outage(2, 10.0, 30.0, frozenset({0, 1}), "partitioned"),
           Outage(0, 10.0, 30.0, frozenset({2}), "partitioned"),
           Outage(1, 10.0, 30.0, frozenset({2}), "partitioned")]
    minority = sample(20.0, 2, True, True, (0, 1, 2))  # node 2 still claims the old view
    majority = sample(20.0, 0, True, True, (0, 1))
    assert checks.check_health([majority], cut, 5.0) == []
    assert [v.prop for v in checks.check_health([minority], cut, 5.0)] == ["health"] * 2


def test_convergence_needs_every_node_in_one_primary_view() -> None:
    one = [HealthSample(1.0, n, f"node {n}", True, True, V2, (0, 1, 2)) for n in MEMBERS]
    assert checks.check_converged(one, MEMBERS) == []
    split = [*one[:2], HealthSample(1.0, 2, "node 2", False, False, V1, (2,))]
    assert [v.prop for v in checks.check_converged(split, MEMBERS)] == ["converged"]
    assert [v.prop for v in checks.check_converged(one[:2], MEMBERS)] == ["converged"]


def test_a_seed_replays_its_schedule() -> None:
    a = S.generate(42, 5, 120, "unicast", S.ALL_KINDS)
    assert a.dumps() == S.generate(42, 5, 120, "unicast", S.ALL_KINDS).dumps()
    assert a.dumps() != S.generate(43, 5, 120, "unicast", S.ALL_KINDS).dumps()
    assert a.steps and all(s.end <= a.duration for s in a.steps)


@pytest.mark.parametrize("nodes", [3, 4, 5, 7])
def test_the_schedule_keeps_a_majority_and_one_fault_per_node(nodes: int) -> None:
    for seed in range(40):
        sched = S.generate(seed, nodes, 90, "unicast", S.ALL_KINDS)
        for s in sched.steps:
            live = [o for o in sched.steps if o.at <= s.at < o.end and o.nodes]
            if s.kind == S.RESTART_ALL:
                assert live == [s]
                continue
            hit = [n for o in live for n in o.nodes]
            assert len(hit) == len(set(hit)), (seed, s)
            assert len(hit) <= (nodes - 1) // 2, (seed, s)


def test_relay_faults_only_over_unicast() -> None:
    assert S.PARTITION not in S.usable_kinds(S.ALL_KINDS, "multicast", True)
    assert S.CLOCK not in S.usable_kinds(S.ALL_KINDS, "unicast", False)
    with pytest.raises(ValueError, match="unknown fault kind"):
        S.usable_kinds(("meteor",), "unicast", True)


CI_KINDS = S.ALL_KINDS
CI_SEED = 908
"""Its 40 s schedule (3 nodes, unicast, every kind) has a duplicate-id daemon, a
terminate, a kill, lossy links, partitions, pauses, a clock step and a restart of the
whole cluster."""


@pytest.mark.processes
async def test_short_run() -> None:
    began = time.monotonic()
    report = await nemesis(Options(nodes=3, seed=CI_SEED, duration=40.0,
                                   transport="unicast", kinds=CI_KINDS, rate=40.0))
    print(report.describe())  # the tolerated violations too (pytest -rP shows them)
    assert not report.violations, report.describe()
    assert report.stats["sent"] > 0 and report.stats["health_samples"] > 0
    assert report.stats["clients_judged"] == 3  # one connected client per daemon
    assert time.monotonic() - began < 120
