"""The view-aware checkers catch planted violations and pass a correct multi-view run.

The runs are built by hand. ``base()`` is a correct run of three nodes over four views:

- view 1 = (1, 2, 3) and view 2 = (1, 2, 3), installed by every first life;
- nodes 2 and 3 crash and restart (lives 1), node 1 is cut off: view 3 = (2, 3) is
  installed by the new lives only, so nobody *completed* view 2 (installed it and its
  successor). Node 1 delivered its own messages m3 and m4 there, alone;
- view 4 = (1, 2, 3) takes node 1 back. m3 and m4 are never sent again (a member
  excluded from a view reports such messages in doubt rather than risk delivering them
  twice): delivered by their sender only, in a view nobody completed, which is not a
  loss.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from amcast.protocols.simulation.checkers import (
    Delivery,
    InstalledView,
    Proc,
    SentMessage,
    check_all,
)
from amcast.protocols.vocabulary import ServiceLevel

A, S, C = ServiceLevel.AGREED, ServiceLevel.SAFE, ServiceLevel.CAUSAL
P1, P2, P3 = Proc(1), Proc(2), Proc(3)
Q2, Q3 = Proc(2, 1), Proc(3, 1)
POTENTIAL = (1, 2, 3)

V1 = InstalledView(0.0, 1, (1, 2, 3), 0, 3)
V2 = InstalledView(1.0, 2, (1, 2, 3), 1, 3)
V3 = InstalledView(3.0, 3, (2, 3), 2, 3)
V4 = InstalledView(5.0, 4, (1, 2, 3), 3, 3)


def bits(*indexes: int) -> int:
    return sum(1 << i for i in indexes)


SENT = [
    SentMessage(0, 2, b"m0", A, 0, P2),
    SentMessage(1, 3, b"m1", S, bits(0), P3),
    SentMessage(2, 1, b"m2", C, bits(0, 1), P1),
    SentMessage(3, 1, b"m3", A, bits(0, 1, 2), P1),
    SentMessage(4, 1, b"m4", A, bits(0, 1, 2, 3), P1),
    SentMessage(5, 2, b"m5", A, 0, Q2),
    SentMessage(6, 3, b"m6", C, bits(5), Q3),
    SentMessage(7, 2, b"m7", S, bits(5, 6), Q2),
]
MSG = {m.payload: m for m in SENT}


def d(payload: bytes, view: int, position: int | None, time: float = 0.0) -> Delivery:
    m = MSG[payload]
    return Delivery(m.sender, payload, m.service, position, time, view)


@dataclass
class Run:
    logs: dict[Proc, list[Delivery]]
    views: dict[Proc, list[InstalledView]]
    live: set[Proc]
    sent: list[SentMessage] = field(default_factory=lambda: list(SENT))
    in_doubt: dict[Proc, set[bytes]] = field(default_factory=dict)
    expected_votes: int | None = None

    def check(self) -> dict[str, list[str]]:
        return check_all(self.sent, self.logs, self.views, live=self.live,
                         in_doubt=self.in_doubt, potential=POTENTIAL,
                         expected_votes=self.expected_votes)

    def failing(self) -> dict[str, list[str]]:
        return {name: found for name, found in self.check().items() if found}


def view1() -> list[Delivery]:
    return [d(b"m0", 1, 0), d(b"m1", 1, 1), d(b"m2", 1, None)]


def after_restart() -> list[Delivery]:
    return [d(b"m5", 3, 0), d(b"m6", 3, None), d(b"m7", 4, 0)]


def base() -> Run:
    return Run(
        logs={
            P1: [*view1(), d(b"m3", 2, 0), d(b"m4", 2, 1), d(b"m7", 4, 0)],
            P2: view1(),
            P3: view1(),
            Q2: after_restart(),
            Q3: after_restart(),
        },
        views={P1: [V1, V2, V4], P2: [V1, V2], P3: [V1, V2], Q2: [V3, V4], Q3: [V3, V4]},
        live={P1, Q2, Q3},
    )


def test_the_correct_multi_view_run_passes_every_checker() -> None:
    results = base().check()
    assert set(results) == {"integrity", "views", "primary", "agreement", "total_order",
                            "safe_uniformity", "one_view", "causal_order", "liveness",
                            "validity", "in_doubt"}
    assert base().failing() == {}


def test_a_static_run_without_views_passes() -> None:
    sent = SENT[:3]
    logs = {1: view1(), 2: view1(), 3: view1()}
    logs = {k: [replace(x, view=0) for x in v] for k, v in logs.items()}
    assert {k: v for k, v in check_all(sent, logs).items() if v} == {}


# ----------------------------------------------------------------------------- views


def test_two_views_with_different_members_for_one_id() -> None:
    run = base()
    run.views[Q3] = [replace(V3, members=(1, 2, 3)), V4]
    found = run.failing()
    assert any("view 3 has members" in v for v in found["views"])


def test_views_installed_out_of_order_or_by_a_non_member() -> None:
    run = base()
    run.views[P1] = [V1, V4, V2]
    assert any("out of order" in v for v in run.failing()["views"])
    run = base()
    run.views[P1] = [V1, V2, V3, V4]  # node 1 is no member of view 3
    assert any("without being a member" in v for v in run.failing()["views"])


def test_a_fork_two_successors_of_one_view() -> None:
    run = base()
    run.views[P2] = [V1, V2, InstalledView(2.0, 5, (1, 2), 2, 3)]
    assert run.failing()["views"] == ["views 3 and 5 both succeed view 2"]


# ----------------------------------------------------------------------------- primary


def test_a_view_without_a_majority() -> None:
    run = base()
    run.expected_votes = 5  # three votes needed: view 3 (2, 3) has two
    found = run.failing()
    assert list(found) == ["primary"]
    assert found["primary"] == ["view 3 ((2, 3)) is not a majority of (1, 2, 3)"]


def test_delivering_in_a_view_never_installed() -> None:
    run = base()
    run.views[Q3] = [V4]  # Q3 delivered m5, m6 in view 3
    assert any("which it never installed" in v for v in run.failing()["primary"])


# ----------------------------------------------------------------------------- agreement


def test_complete_members_delivering_different_sets() -> None:
    run = base()
    run.logs[P2] = [x for x in run.logs[P2] if x.payload != b"m2"]  # a causal one: no order
    found = run.failing()
    assert any("view 1" in v and "different sets" in v for v in found["agreement"])
    assert "total_order" not in found


def test_complete_members_delivering_in_a_different_order() -> None:
    run = base()
    run.logs[P3] = [d(b"m1", 1, 0), d(b"m0", 1, 1), d(b"m2", 1, None)]
    found = run.failing()
    assert any("view 1" in v and "ordered it differently" in v for v in found["total_order"])
    assert "agreement" not in found


def test_positions_must_count_from_zero_without_holes() -> None:
    run = base()
    run.logs[Q2] = [d(b"m5", 3, 1), d(b"m6", 3, None), d(b"m3", 4, 0), d(b"m7", 4, 1)]
    assert any("has position 1" in v for v in run.failing()["total_order"])


# ----------------------------------------------------------------------------- safe uniformity


def excluded_run(p3_log: list[Delivery]) -> Run:
    """View 1 = (1, 2, 3), view 2 = (1, 2): node 3 is excluded (it crashed) and delivered
    ``p3_log`` in view 1; nodes 1 and 2 delivered m0, m1 (safe), m3 there."""
    complete = [d(b"m0", 1, 0), d(b"m1", 1, 1), d(b"m3", 1, 2)]
    v2 = InstalledView(1.0, 2, (1, 2), 1, 3)
    return Run(logs={P1: list(complete), P2: list(complete), P3: p3_log},
               views={P1: [V1, v2], P2: [V1, v2], P3: [V1]}, live={P1, P2},
               sent=[*SENT[:2], replace(SENT[3], past=0), SentMessage(8, 3, b"x", A, 0, P3)])


def test_a_safe_message_of_an_excluded_process_at_another_position() -> None:
    run = excluded_run([d(b"m1", 1, 0)])  # safe m1 at position 0: the others have m0 there
    found = run.failing()
    assert list(found) == ["safe_uniformity"]
    assert "node 3" in found["safe_uniformity"][0]


def test_an_excluded_process_may_differ_in_an_agreed_tail_after_its_last_safe() -> None:
    x = Delivery(3, b"x", A, 2, 0.0, 1)  # its own agreed message the others never saw
    for p3_log in ([], [d(b"m0", 1, 0)], [d(b"m0", 1, 0), d(b"m1", 1, 1)],
                   [d(b"m0", 1, 0), d(b"m1", 1, 1), x]):
        assert excluded_run(p3_log).failing() == {}, p3_log


# ----------------------------------------------------------------------------- one view


def test_one_message_delivered_in_two_views() -> None:
    run = base()
    for proc in (P1, Q2, Q3):
        run.logs[proc].append(d(b"m0", 4, 2))
    found = run.failing()
    assert set(found["one_view"]) == {"message 0 delivered in views 1 and 4"}


# ----------------------------------------------------------------------------- causal order


def test_causal_order_across_views() -> None:
    run = base()
    # m7 (view 4) follows m6 (view 3, causal); Q3 delivers m6 after m7
    run.logs[Q3] = [d(b"m5", 3, 0), d(b"m3", 4, 0), d(b"m7", 4, 1), d(b"m6", 3, None)]
    found = run.failing()
    assert found["causal_order"] == ["node 3 (life 1) delivered message 7 before its cause 6"]


def test_a_causal_message_overtaking_an_ordered_cause() -> None:
    run = base()
    run.logs[P2] = [d(b"m0", 1, 0), d(b"m2", 1, None), d(b"m1", 1, 1)]  # m2 follows m1
    assert run.failing()["causal_order"] == ["node 2 delivered message 2 before its cause 1"]


# ----------------------------------------------------------------------------- validity


def test_a_lost_message_of_a_live_sender() -> None:
    run = base()
    run.sent.append(SentMessage(8, 2, b"m8", A, 0, Q2))
    found = run.failing()
    assert found["validity"] == ["1 message(s) of live senders never delivered by a "
                                 "complete member"]


def test_a_message_of_a_view_missing_at_one_complete_member() -> None:
    run = base()
    run.logs[Q3] = [x for x in run.logs[Q3] if x.payload != b"m7"]
    found = run.failing()
    assert any("message 7 of view 4 not delivered by node 3 (life 1)" in v
               for v in found["validity"])


def test_delivered_only_by_its_sender_in_a_view_nobody_completed_is_not_lost() -> None:
    run = base()
    assert "validity" not in run.failing()  # m4: P1 alone, in view 2
    run.logs[P1] = [x for x in run.logs[P1] if x.payload != b"m4"]  # and not even there
    assert run.failing()["validity"] == ["1 message(s) of live senders never delivered by "
                                         "a complete member"]


def test_messages_of_senders_that_crashed_may_be_lost() -> None:
    run = base()
    run.sent.append(SentMessage(8, 3, b"m8", A, 0, P3))  # P3 is not live at the end
    assert run.failing() == {}


def test_in_doubt_messages_are_not_flagged() -> None:
    run = base()
    run.sent.append(SentMessage(8, 2, b"m8", A, 0, Q2))
    run.in_doubt = {Q2: {b"m8"}}
    assert run.failing() == {}
    run.in_doubt = {Q3: {b"m8"}}  # in doubt at another process: does not excuse Q2
    assert "validity" in run.failing()


def test_in_doubt_messages_delivered_by_a_complete_member_are_flagged() -> None:
    # m3 and m4: P1 delivered them alone in view 2, which nobody completed; reporting
    # them in doubt is right
    run = base()
    run.in_doubt = {P1: {b"m3", b"m4"}}
    assert run.failing() == {}
    # m2 was delivered in view 1 by the members that completed it: a member that reports
    # it in doubt tells its client the primary component did not deliver it (the client
    # would send it again: twice); so does one that names it among its own delivered
    # beyond the cut (the real daemons on a one-way cut, tests/e2e/test_lossy_links.py)
    run.in_doubt = {P1: {b"m2", b"m3"}}
    assert run.failing() == {"in_doubt": [
        "node 1 reported 1 own message(s) in doubt that members completing their view "
        "delivered (first: message 2, in view 1)"]}


# ----------------------------------------------------------------------------- liveness


def test_live_processes_ending_in_different_views() -> None:
    run = base()
    run.views[Q3] = [V3]
    run.logs[Q3] = [d(b"m5", 3, 0), d(b"m6", 3, None)]
    found = run.failing()
    assert found["liveness"] == ["live processes ended in different views: "
                                 "{'node 1': 4, 'node 2 (life 1)': 4, 'node 3 (life 1)': 3}"]


def test_two_first_views_are_two_lines_of_primary_views() -> None:
    # node 1 stays in view 1; nodes 2 and 3 restart and (as if they had lost their state)
    # form another first view 5 = (2, 3), both majorities of (1, 2, 3); node 1 then joins
    # that line in view 6. Nobody completed view 1, so nothing else notices the split.
    other = InstalledView(3.0, 5, (2, 3), 0, 3)
    v6 = InstalledView(5.0, 6, (1, 2, 3), 5, 3)
    after = [d(b"m5", 5, 0), d(b"m6", 5, None)]
    run = Run(
        logs={P1: [*view1(), d(b"m3", 1, 2)], P2: view1(), P3: view1(),
              Q2: list(after), Q3: list(after)},
        views={P1: [V1, v6], P2: [V1], P3: [V1], Q2: [other, v6], Q3: [other, v6]},
        live={P1, Q2, Q3},
        sent=[*SENT[:4], *SENT[5:7]],
    )
    assert run.failing()["views"]


def _left_gracefully(p3_log: list[Delivery], closed: dict[Proc, int] | None
                     ) -> dict[str, list[str]]:
    """Node 3 leaves view 1 = (1, 2, 3); view 2 = (1, 2) succeeds it."""
    w2 = InstalledView(1.0, 2, (1, 2), 1, 3)
    logs = {P1: view1(), P2: view1(), P3: p3_log}
    views = {P1: [V1, w2], P2: [V1, w2], P3: [V1]}
    found = check_all(SENT[:3], logs, views, live={P1, P2}, potential=POTENTIAL,
                      closed_by_leaving=closed)
    return {name: v for name, v in found.items() if v}


def test_a_graceful_leaver_that_closed_its_view_must_deliver_the_members_set() -> None:
    assert _left_gracefully(view1(), {P3: 1}) == {}
    # a leaver that did not complete the flush may stop short (it is not complete) ...
    assert _left_gracefully([d(b"m0", 1, 0)], None) == {}
    # ... one that closed the view at the cut is complete: the same set, the same order
    assert "agreement" in _left_gracefully([d(b"m0", 1, 0)], {P3: 1})
    swapped = [d(b"m1", 1, 0), d(b"m0", 1, 1), d(b"m2", 1, None)]
    assert "total_order" in _left_gracefully(swapped, {P3: 1})
