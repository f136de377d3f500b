"""The view history's rules on small hand-written histories (no Spark): complete members,
the open last view, the order a non-complete member is held to, gap notices, and every
kind of view record conflict."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
from amcast.analytics import history

V = ["node", "incarnation", "view", "ts", "members", "primary", "previous", "reason"]
PV = ["node", "incarnation", "view", "records", "messages", "first_position", "last_position",
      "last_safe", "first_ts", "last_ts"]


def view(node: int, v: int, ts: float, members: list[int], previous: int | None = None,
         inc: int = 1) -> dict[str, Any]:
    return dict(node=node, incarnation=inc, view=v, ts=ts, members=members, primary=True,
                previous=previous, reason=None)


def lost(node: int, v: int, ts: float, reason: str = "excluded", inc: int = 1) -> dict[str, Any]:
    return dict(node=node, incarnation=inc, view=v, ts=ts, members=[], primary=False,
                previous=None, reason=reason)


def pv(node: int, v: int, messages: int, last_safe: int | None = None, inc: int = 1,
       ts: float = 0.0) -> dict[str, Any]:
    return dict(node=node, incarnation=inc, view=v, records=messages, messages=messages,
                first_position=0 if messages else None,
                last_position=messages - 1 if messages else None,
                last_safe=math.nan if last_safe is None else last_safe, first_ts=ts,
                last_ts=ts)


def build(views: list[dict], per_pv: list[dict], gaps: list[dict] | None = None,
          starts: list[dict] | None = None) -> history.History:
    return history.build(
        pd.DataFrame(views, columns=V),
        pd.DataFrame(gaps or [], columns=["node", "incarnation", "view", "ts", "after"]),
        pd.DataFrame(starts or [], columns=["node", "incarnation", "ts", "members"]),
        pd.DataFrame(per_pv, columns=PV))


def test_complete_members_and_the_order_a_member_that_did_not_complete_is_held_to() -> None:
    h = build(
        [view(0, 10, 1.0, [0, 1, 2]), view(1, 10, 1.0, [0, 1, 2]), view(2, 10, 1.0, [0, 1, 2]),
         view(0, 20, 2.0, [0, 1], 10), view(1, 20, 2.0, [0, 1], 10), lost(1, 20, 3.0)],
        [pv(0, 10, 9), pv(1, 10, 9), pv(2, 10, 7, last_safe=4), pv(0, 20, 5), pv(1, 20, 2)])
    assert h.complete == {10: [(0, 1), (1, 1)], 20: [(0, 1)]}  # 20 is open: node 1 lost it
    s = h.status.set_index(["node", "view"])
    assert s.loc[(2, 10), "trusted_end"] == 4  # up to its last safe message
    assert s.loc[(1, 20), "trusted_end"] == -1  # no safe message: a tail of agreed ones
    assert s.loc[(0, 10), "trusted_end"] == s.loc[(0, 20), "trusted_end"] == history.BIG
    assert s.loc[(0, 10), "end_reason"] == "installed view 20"
    assert (s.loc[(1, 20), "end_ts"], s.loc[(1, 20), "end_reason"]) == (
        3.0, "lost the view (excluded)")
    assert s.loc[(0, 20), "end_ts"] == math.inf
    assert h.positions.empty and h.gaps.empty and h.conflicts.empty
    assert list(h.views.messages) == [9, 5]


def test_gap_notices_and_missed_messages_without_one() -> None:
    views = [view(n, 10, 1.0, [0, 1, 2]) for n in (0, 1, 2)]
    views += [view(n, 20, 2.0, [0, 1], 10) for n in (0, 1)] + [lost(2, 10, 1.5)]
    views += [view(n, 30, 3.0, [0, 1, 2], 20) for n in (0, 1, 2)]
    views += [view(3, 30, 3.0, [0, 1, 2, 3], 20, inc=7)]
    per_pv = [pv(0, 10, 9), pv(1, 10, 9), pv(2, 10, 5), pv(0, 20, 4), pv(1, 20, 4)]
    gaps = [dict(node=n, incarnation=1, view=10, ts=0.5, after=None) for n in (0, 1, 2)]
    gaps.append(dict(node=2, incarnation=1, view=30, ts=2.9, after=[10, 4]))
    h = build(views, per_pv, gaps)
    # node 3 (incarnation 7) missed everything without a notice; node 2's notice is right
    assert h.gaps.to_dict("records") == [dict(
        view=30, node=3, incarnation=7, problem="no gap notice", after_view=None,
        after_position=None, last_view=None, last_position=None, missed=13)]
    assert sorted(h.notices.missed) == [0, 0, 0, 4 + 4]
    gaps[-1]["after"] = None  # node 2 says it remembers nothing, but it delivered 0..4
    h = build(views, per_pv, gaps)
    (row,) = [r for r in h.gaps.to_dict("records") if r["node"] == 2]
    assert (row["node"], row["problem"], row["last_view"], row["last_position"]) == (
        2, "after is not its last ordered delivery", 10, 4)
    assert {r["node"] for r in build(views, per_pv, gaps[:3]).gaps.to_dict("records")} == {2, 3}


def test_positions_must_count_from_0_without_holes() -> None:
    rows = [pv(0, 10, 9), {**pv(1, 10, 9), "first_position": 1, "last_position": 9},
            {**pv(2, 10, 8), "last_position": 8}]
    h = build([view(n, 10, 1.0, [0, 1, 2]) for n in range(3)], rows)
    assert [tuple(r[1:]) for r in h.positions.itertuples()] == [
        (10, 1, 1, 9, 1, 9), (10, 2, 1, 8, 0, 8)]


def test_every_kind_of_view_record_conflict() -> None:
    starts = [dict(node=n, incarnation=1, ts=0.0, members=[0, 1, 2, 3, 4]) for n in range(5)]
    views = [view(n, 10, 1.0, [0, 1, 2]) for n in (0, 1, 2)]
    views += [view(0, 20, 2.0, [0, 1, 2], 10), view(1, 20, 2.0, [0, 1, 2], 10),
              view(2, 20, 2.0, [0, 1, 2], 5)]  # node 2 says another predecessor
    views += [view(3, 21, 2.5, [3, 4, 2], 10), view(4, 21, 2.5, [2, 3, 4], 10)]  # a fork
    views += [view(0, 40, 4.0, [0, 1, 2], 20), view(0, 30, 5.0, [0, 1, 2], 21)]  # 40 then 30
    views += [view(1, 50, 6.0, [0, 2, 3], 40), view(0, 60, 7.0, [0, 1], 50)]
    h = build(views, [], starts=starts)
    got = [(r.view, r.problem, list(r.nodes)) for r in h.conflicts.itertuples()]
    assert got == [
        (10, "two successors", [0, 1, 2, 3, 4]),
        (20, "previous differs", [2]),
        (30, "installed out of order", [0]),
        (50, "not a member", [1]),
        (60, "not a majority", [0]),
    ]
    detail = h.conflicts.set_index("problem").detail
    assert detail["previous differs"] == "10 at nodes 0, 1; 5 at node 2"
    assert detail["two successors"] == "views 20, 21 all succeed view 10"
    assert detail["not a majority"] == "2 of the 5 listed members"
