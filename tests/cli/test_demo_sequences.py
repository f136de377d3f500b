"""The demo's identical-order verdict (``amcast.demo.check_sequences``) across views:
positions restart in every view, so each view's positions must run 0..k-1."""

from __future__ import annotations

from amcast.demo import check_sequences
from amcast.loadgen import LoadReport


def _report(node: int, entries: list[tuple[int | None, str]]) -> LoadReport:
    return LoadReport(node=node, sequence=[(p, i, 0, 0, b"") for p, i in entries])


TWO_VIEWS = [(0, "7:0:0:0"), (1, "7:1:0:0"), (0, "9:0:1:0"), (1, "9:1:1:0")]


def test_two_views_with_positions_restarting_are_one_identical_order() -> None:
    reports = [_report(0, TWO_VIEWS), _report(1, list(TWO_VIEWS))]
    assert check_sequences(reports, 4) == []


def test_a_hole_in_one_view_and_a_different_order_are_reported() -> None:
    holed = [(0, "7:0:0:0"), (1, "7:1:0:0"), (0, "9:0:1:0"), (2, "9:1:1:0")]
    swapped = [TWO_VIEWS[1], TWO_VIEWS[0], *TWO_VIEWS[2:]]
    problems = check_sequences([_report(0, TWO_VIEWS), _report(1, holed),
                                _report(2, swapped)], 4)
    assert "node 1: total-order positions of view 9 are not 0..1" in problems
    assert any(p.startswith("node 1: total order differs") for p in problems)
    assert "node 2: total order differs from node 0 at index 0" in problems
