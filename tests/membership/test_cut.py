"""The flush's cut: the union of released prefixes, extended by held vertices whose whole
causal past is inside (``compute_cut``)."""

from __future__ import annotations

import random

from amcast.protocols.membership.cut import compute_cut
from amcast.protocols.wire.membership import Availability, HeldVertex
from hypothesis import given, settings
from hypothesis import strategies as st


def report(released: dict[int, int], *held: tuple[int, int, tuple[tuple[int, int], ...]],
           view_id: int = 7) -> Availability:
    return Availability(view_id, tuple(sorted(released.items())),
                        tuple(HeldVertex(o, s, a) for o, s, a in held))


def test_no_reports_give_an_empty_cut() -> None:
    assert compute_cut([1, 2, 3], []) == {1: 0, 2: 0, 3: 0}


def test_the_cut_is_the_union_of_released_prefixes() -> None:
    reports = [report({1: 3, 2: 1, 3: 0}), report({1: 2, 2: 4, 3: 0}), report({1: 0, 2: 0})]
    assert compute_cut([1, 2, 3], reports) == {1: 3, 2: 4, 3: 0}


def test_a_held_vertex_extends_the_cut_when_its_acks_and_predecessor_are_inside() -> None:
    reports = [report({1: 3, 2: 1, 3: 0}, (3, 1, ((1, 3),)), (2, 2, ((1, 2), (3, 1))))]
    assert compute_cut([1, 2, 3], reports) == {1: 3, 2: 2, 3: 1}


def test_held_vertices_extend_the_cut_in_chains_whatever_their_order() -> None:
    # (1, 4) needs (3, 2), which needs (2, 5) and (3, 1): several passes, from several reports
    chain = [(1, 4, ((3, 2),)), (3, 2, ((2, 5),)), (2, 5, ()), (3, 1, ((1, 3),))]
    for seed in range(10):
        rng = random.Random(seed)
        rng.shuffle(chain)
        reports = [report({1: 3, 2: 4}, *chain[:2]), report({1: 1, 2: 4, 3: 0}, *chain[2:])]
        assert compute_cut([1, 2, 3], reports) == {1: 4, 2: 5, 3: 2}


def test_a_held_vertex_whose_predecessor_is_missing_stays_out() -> None:
    reports = [report({1: 3, 2: 1, 3: 0}, (3, 2, ()), (2, 3, ((1, 1),)))]
    assert compute_cut([1, 2, 3], reports) == {1: 3, 2: 1, 3: 0}


def test_a_held_vertex_depending_on_something_outside_stays_out() -> None:
    reports = [
        report({1: 3, 2: 1, 3: 0}, (3, 1, ((1, 4),))),  # acks (1, 4): outside the cut
        report({1: 2, 2: 1, 3: 0}, (2, 2, ((3, 1),)), (2, 3, ())),  # follows (3, 1): out too
        report({1: 3}, (3, 1, ((9, 1),))),  # acks a non-member: never inside
    ]
    assert compute_cut([1, 2, 3], reports) == {1: 3, 2: 1, 3: 0}


def test_reports_about_nodes_outside_the_view_are_ignored() -> None:
    reports = [report({1: 2, 2: 1, 9: 50}, (9, 51, ()), (8, 1, ())), report({4: 3, 1: 1})]
    assert compute_cut([1, 2], reports) == {1: 2, 2: 1}


# ----------------------------------------------------------------------------- property


def history(rng: random.Random, n: int, length: int) -> list[tuple[int, int, tuple]]:
    """A causal history of ``(origin, seq, delta acks)`` in causal order."""
    seen = [[0] * n for _ in range(n)]
    latest = [0] * n
    acked = [[0] * n for _ in range(n)]
    out = []
    for _ in range(length):
        p = rng.randrange(n)
        for q in range(n):
            if q != p and latest[q] > seen[p][q]:
                seen[p][q] = rng.randint(seen[p][q], latest[q])
        latest[p] += 1
        seen[p][p] = latest[p]
        delta = tuple((q, seen[p][q]) for q in range(n) if q != p and seen[p][q] > acked[p][q])
        for q, s in delta:
            acked[p][q] = s
        out.append((p, latest[p], delta))
    return out


def closure(vertices: list[tuple[int, int, tuple]], n: int) -> dict[int, int]:
    """The largest causally closed prefix per sender of a set of vertices (fixpoint)."""
    cut = dict.fromkeys(range(n), 0)
    by_id = {(o, s): a for o, s, a in vertices}
    changed = True
    while changed:
        changed = False
        for p in range(n):
            acks = by_id.get((p, cut[p] + 1))
            if acks is not None and all(cut[q] >= s for q, s in acks):
                cut[p] += 1
                changed = True
    return cut


@settings(max_examples=200, derandomize=True, database=None, deadline=None)
@given(st.integers(0, 2**32), st.integers(2, 6), st.integers(0, 50), st.integers(1, 4))
def test_cut_is_the_causal_closure_of_everything_reported(
    seed: int, n: int, length: int, reporters: int
) -> None:
    rng = random.Random(seed)
    hist = history(rng, n, length)
    reports = []
    reported: list[tuple[int, int, tuple]] = []
    for _ in range(reporters):
        prefix = hist[: rng.randint(0, len(hist))]  # a prefix of a causal order is closed
        released = dict.fromkeys(range(n), 0)
        for o, s, _ in prefix:
            released[o] = max(released[o], s)
        held = [v for v in hist[len(prefix):] if rng.random() < 0.4]
        reports.append(report(released, *held))
        reported += prefix + held
    cut = compute_cut(list(range(n)), reports)
    # the cut is exactly the largest causally closed set within what the reports cover
    assert cut == closure(reported, n)
    for r in reports:
        for node, seq in r.released:
            assert cut[node] >= seq
    for o, s, acks in hist:
        if s <= cut[o]:
            assert all(cut[q] >= a for q, a in acks), "cut not causally closed"
