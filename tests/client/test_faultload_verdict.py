"""``faultload.verdict`` on recorded histories built by hand: a clean history passes, and
each guarantee it judges has a planted violation that it reports (differing sequences
among the clients that completed a view, a late-connected client out of step, a message
delivered twice or in two views, a message of a connected client never delivered).
"""

from __future__ import annotations

from amcast.faultload import DELIVER, VIEW, Recorder, verdict

MEMBERS = [0, 1, 2]


def recorder(node: int, views: list[tuple[int, int | None, list[int]]],
             deliveries: dict[int, list[tuple[int, int]]], *, sent: int = 0,
             welcome: int | None = None, first: dict[int, int] | None = None) -> Recorder:
    """A client of ``node`` (tag = node) that saw ``views`` ((view, previous, members),
    each a primary view frame) and delivered ``deliveries[view]`` ((tag, number) each,
    at positions from ``first[view]``, else 0), having sent ``sent`` messages."""
    rec = Recorder(node, node)
    rec.next_number = sent
    if welcome is not None:
        rec.welcome = {"view": welcome}
    at = 0.0
    for view, previous, members in views:
        at += 1.0
        if not (welcome == view and previous is None):
            rec.timeline.append((VIEW, at, {"view": view, "previous": previous,
                                             "members": members, "primary": True}))
        base = (first or {}).get(view, 0)
        for i, (tag, number) in enumerate(deliveries.get(view, [])):
            rec.timeline.append((DELIVER, at, view, base + i, tag, number))
    return rec


ORDER = [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1)]
VIEWS = [(10, 0, MEMBERS), (11, 10, MEMBERS)]


def clean() -> list[Recorder]:
    return [recorder(n, VIEWS, {10: ORDER}, sent=2) for n in MEMBERS]


def test_a_clean_history_passes_and_every_message_is_accounted_for() -> None:
    got = verdict(clean())
    assert got.problems == []
    assert got.accounted_for and got.exactly_once == 6 == got.sent


def test_two_clients_that_completed_a_view_with_different_sequences_are_reported() -> None:
    recs = clean()
    swapped = [ORDER[1], ORDER[0], *ORDER[2:]]
    recs[2] = recorder(2, VIEWS, {10: swapped}, sent=2)
    problems = verdict(recs).problems
    assert any("completed it with different sequences (first difference at position 0"
               in p for p in problems), problems


def test_a_late_client_out_of_step_is_reported_with_its_context() -> None:
    """A client that connected after the view's first deliveries (its welcome names the
    view) is compared from its first position; its daemon completed the view."""
    recs = clean()
    late = recorder(1, [(10, None, MEMBERS), (11, 10, MEMBERS)],
                    {10: [ORDER[4], ORDER[3], ORDER[5]]}, welcome=10, first={10: 3})
    late.tag = 7
    problems = verdict([*recs, late]).problems
    (problem,) = [p for p in problems if "at position" in p]
    assert "delivered (1, 1) at position 3" in problem and "(0, 1)" in problem
    assert "joined late, complete, from position 3" in problem


def test_a_message_delivered_twice_or_in_two_views_is_reported() -> None:
    recs = [recorder(n, VIEWS, {10: ORDER, 11: [ORDER[0]]}, sent=2) for n in MEMBERS]
    problems = verdict(recs).problems
    assert any("delivered 1 messages more than once" in p for p in problems), problems
    assert any("delivered in more than one view" in p for p in problems), problems


def test_a_message_of_a_connected_client_never_delivered_is_reported() -> None:
    recs = [recorder(n, VIEWS, {10: ORDER}, sent=3 if n == 0 else 2) for n in MEMBERS]
    got = verdict(recs)
    assert got.problems == ["client 0 of node 0: 1 messages accepted, not reported back "
                            "and delivered nowhere, e.g. [2]"]
    assert not got.accounted_for
    assert got.exactly_once == 6 and got.sent == 7
