"""The section 7 study in the Node (``simulation.swap_node_study``) and the join and
leave study (``simulation.swap_churn_study``), tiny versions: properties that fail when
a mode costs what it should not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from amcast.protocols.simulation import swap_churn_study as churn
from amcast.protocols.simulation import swap_node_study as s
from amcast.protocols.swap.engine import build_tree


@pytest.fixture(scope="module")
def rows() -> dict[tuple[str, str, str], s.Row]:
    found = s.study(s.cases((4,), messages=16), seeds=(1,))
    return {(r.mode, r.shape, r.senders): r for r in found}


def test_every_mode_and_shape_passes_every_checker(rows: dict) -> None:
    assert len(rows) == 2 * (1 + 3 * 3)
    assert all(r.violations == 0 for r in rows.values()), [
        r for r in rows.values() if r.violations]
    assert all(r.messages == 16 and r.p50_ms > 0 for r in rows.values())


def test_toto_sends_no_swap_datagram_and_the_swap_modes_do(rows: dict) -> None:
    assert all(r.swap_sent == r.swap_received == r.swaps == 0
               for (mode, _, _), r in rows.items() if mode == "toto")
    assert all(r.swap_sent > 0 for (mode, _, who), r in rows.items()
               if mode != "toto" and who == "all")


@pytest.mark.parametrize("shape", s.SHAPES)
def test_a_lone_arrow_sender_pays_only_its_first_swap(rows: dict, shape: str) -> None:
    # the sender is node 3, the sink node 0: the first request crosses their distance,
    # one reply comes back; every later swap is local (the sink moved to the sender)
    r = rows[("arrow", shape, "one")]
    distance = build_tree((0, 1, 2, 3), shape, 2).distance(3, 0)
    assert r.swaps == 16 and r.local_swaps == 15
    assert r.max_hops == distance
    # requests and the reply, and one acknowledgement each
    assert r.swap_sent * r.messages <= 2 * (distance + 1)


@pytest.mark.parametrize("shape", s.SHAPES)
def test_a_lone_combining_sender_climbs_to_the_root_every_time(rows: dict,
                                                             shape: str) -> None:
    r = rows[("combining", shape, "one")]
    depth = build_tree((0, 1, 2, 3), shape, 2).distance(3, 0)
    assert r.local_swaps == 0 and r.mean_hops == depth and r.max_hops == depth


def test_swap_hops_stay_within_the_diameter(rows: dict) -> None:
    for (mode, shape, _), r in rows.items():
        if mode != "toto":
            assert r.max_hops <= r.diameter, (mode, shape, r)
    assert all(r.max_hops <= 2 for (m, shape, _), r in rows.items() if shape == "star")
    assert rows[("arrow", "path", "one")].diameter == 3


def test_a_violation_is_counted_and_fails_the_command(tmp_path: Path,
                                                      rows: dict) -> None:
    case = s.Case("arrow", "star", 4, "one", messages=4)
    run = s.run_case(case, 1)
    assert not run.violations
    run.violations.append("total_order: planted")
    assert s.row(case, [run]).violations == 1
    out = tmp_path / "rows.json"
    assert s.main(["--sizes", "4", "--seeds", "1", "--messages", "8",
                   "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert len(data["rows"]) == 20 and data["meta"]["seeds"] == 1


def test_the_study_is_deterministic() -> None:
    case = s.Case("hybrid", "balanced", 4, "all", messages=16)
    a, b = s.run_case(case, 2), s.run_case(case, 2)
    assert a.latencies == b.latencies and a.sent == b.sent and a.hops == b.hops


@pytest.mark.parametrize("event", churn.EVENTS)
def test_joins_and_leaves_cost_one_view_change_in_every_mode(event: str) -> None:
    found = churn.study(sizes=(4,), seeds=(1,), rate=20.0, events=(event,))
    assert [r.mode for r in found] == list(s.MODES)
    for r in found:
        assert r.violations == 0, r
        assert 0 < r.view_ms <= r.resume_ms < 1000, r  # the new view, then deliveries
        assert r.extra_membership > 0, r  # the view change itself
        if r.mode == "toto":
            assert r.extra_swap == 0


@pytest.mark.parametrize("mode", s.MODES)
def test_the_saturation_bound_is_measured_and_checked(mode: str) -> None:
    rate, bad = s.saturation(mode, n=4, seeds=(1,), messages=30)
    assert bad == 0 and rate > 1000  # messages per virtual second
    again, _ = s.saturation(mode, n=4, seeds=(1,), messages=30)
    assert again == rate  # deterministic
