"""The view history of a log set, its virtual-synchrony checks, and the timeline segments.

Theory of operation: runs on the driver, in plain Python over small inputs (pandas): the
``view``, ``gap`` and ``start`` records, and one row per (process, view) of aggregates of
the delivery records (``audit.per_process_view``: ordered messages, first and last
position, last safe position, first and last time). A *process* is one daemon life,
``(node, incarnation)``: a restarted daemon is a new member. The semantics are those of
the simulator's checkers (``protocols/simulation/checkers.py``):

- the *successor* of view v is the view whose ``previous`` is v; the *complete* members
  of v are the processes that installed v and its successor. The last view (no
  successor in the logs) is open: its complete members are the processes still in it
  when the logs end (installed it, did not lose it, no later life of the node): the logs
  cannot tell a live member from one that crashed at the very end.
- ``status``: per (process, view) installed or delivered in: installed, complete, when
  it installed the view and when its time in it ended (it lost the view, or installed
  another: ``end_reason``), and ``trusted_end``, the last position at which its order is
  compared with the others' (every position for a complete member; up to its last safe
  one for the others, which may differ in a tail of agreed messages).
- ``positions``: per (process, view) the ordered messages fill positions 0..k-1 (the
  first position is 0 and there are last + 1 messages).
- ``gaps``: a gap notice for view w says after which ``(v, p)`` the process missed the
  total order (null: it remembers nothing); ``after`` must be the last ordered message
  it delivered before w. A process that installs a view without continuing from its
  predecessor (its first view, or after losing or missing a view) and missed ordered
  messages (others delivered some after its last one, before w) must have had a notice.
  ``notices`` lists every notice with the ordered messages it covers (0: a gap of
  nothing, as older daemons wrote at the first view of a cluster).
- ``conflicts``: one view id with different members or predecessors at two processes,
  two views succeeding one, a process installing views out of order or a view it is
  not a member of, a view that is not a majority of the listed members (``start``).
- ``timeline``: per process, segments from its records: before its first view, in a
  primary view, not in a primary view (after a ``primary`` false record).
- ``losses``: the ``lost`` records, one per span of a process's records its disk refused
  (``docs/log-schema.md``). Its records in the views a span names may be missing, so for
  those (process, view) pairs (``log_lost`` in ``status``) the checks that a missing
  record would fail are not made: it is not held to deliver what the complete members
  delivered (``audited``, the complete members that are, and ``missing`` in the audit),
  its positions are not required to count from 0 without holes, its gap notices from
  that view on are not checked, and its deliveries there are not required to fall in its
  time in the view (``outside_primary``: the view record may be the one lost). The order
  of what it did log is still compared with the others'.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

import pandas as pd

BIG = 1 << 62  # "every position"

Proc = tuple[int, int]

STATUS = ["node", "incarnation", "view", "installed", "complete", "install_ts", "end_ts",
          "end_reason", "trusted_end", "log_lost"]
LOSSES = ["node", "incarnation", "since", "until", "views", "refused"]
POSITIONS = ["view", "node", "incarnation", "messages", "first_position", "last_position"]
GAPS = ["view", "node", "incarnation", "problem", "after_view", "after_position",
        "last_view", "last_position", "missed"]
NOTICES = ["view", "node", "incarnation", "after_view", "after_position", "missed"]
CONFLICTS = ["view", "problem", "nodes", "detail"]
VIEWS = ["number", "view", "previous", "members", "installed_by", "completed_by", "lost_by",
         "messages"]
TIMELINE = ["node", "incarnation", "kind", "view", "start", "end"]


@dataclass
class History:
    status: pd.DataFrame
    positions: pd.DataFrame
    gaps: pd.DataFrame
    notices: pd.DataFrame
    conflicts: pd.DataFrame
    views: pd.DataFrame
    timeline: pd.DataFrame
    complete: dict[int, list[Proc]]
    losses: pd.DataFrame
    audited: dict[int, list[Proc]]
    """The complete members of each view whose records there are all in the logs."""


def _rows(df: pd.DataFrame | None) -> list[dict[str, Any]]:
    return [] if df is None else df.to_dict("records")


def _int(x: Any) -> int | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else int(x)


def build(views: pd.DataFrame, gaps: pd.DataFrame, starts: pd.DataFrame,
          per_pv: pd.DataFrame, ends: dict[Proc, float] | None = None,
          lost_logs: pd.DataFrame | None = None) -> History:
    """The history of these records; ``ends``: the last time each process wrote;
    ``lost_logs``: the ``lost`` records (node, incarnation, ts, since, views, refused)."""
    loss_rows = sorted(_rows(lost_logs), key=lambda r: (r["node"], r["incarnation"], r["since"]))
    unlogged = {(int(r["node"]), int(r["incarnation"]), int(v))
                for r in loss_rows for v in (r["views"] if r["views"] is not None else [])}
    first_unlogged: dict[Proc, int] = {}
    for n, i, v in unlogged:
        first_unlogged[(n, i)] = min(v, first_unlogged.get((n, i), v))
    view_recs = _rows(views)
    installs = [r for r in view_recs if r["primary"]]
    losses = [r for r in view_recs if not r["primary"]]
    pv = {(int(r["node"]), int(r["incarnation"]), int(r["view"])): r for r in _rows(per_pv)}

    installed: dict[tuple[int, int, int], float] = {}
    own_rec: dict[tuple[int, int, int], dict[str, Any]] = {}
    for r in sorted(installs, key=lambda r: r["ts"]):
        key = (int(r["node"]), int(r["incarnation"]), int(r["view"]))
        installed.setdefault(key, float(r["ts"]))
        own_rec.setdefault(key, r)
    lost: dict[tuple[int, int, int], tuple[float, str]] = {}
    for r in sorted(losses, key=lambda r: r["ts"]):
        key = (int(r["node"]), int(r["incarnation"]), int(r["view"]))
        lost.setdefault(key, (float(r["ts"]), str(r["reason"] or "unknown")))

    procs: set[Proc] = {(n, i) for n, i, _ in [*installed, *lost, *pv]}
    procs |= {(int(r["node"]), int(r["incarnation"])) for r in [*_rows(gaps), *_rows(starts)]}
    later_life = {p for p in procs if any(q[0] == p[0] and q[1] > p[1] for q in procs)}
    by_proc: dict[Proc, list[tuple[int, float]]] = defaultdict(list)
    installers: dict[int, set[Proc]] = defaultdict(set)
    for (n, i, v), ts in installed.items():
        by_proc[(n, i)].append((v, ts))
        installers[v].add((n, i))
    for lst in by_proc.values():
        lst.sort()

    canon, conflicts = _views(own_rec, installers, starts)
    successors: dict[int, list[int]] = defaultdict(list)
    for v, (_, prev) in sorted(canon.items()):
        if prev is not None:
            successors[prev].append(v)
    for prev, succ in sorted(successors.items()):
        if len(succ) > 1:
            conflicts.append({
                "view": prev, "problem": "two successors",
                "nodes": sorted({p[0] for s in succ for p in installers[s]}),
                "detail": f"views {', '.join(map(str, succ))} all succeed view {prev}"})
    for p, lst in sorted(by_proc.items()):
        by_ts = sorted(lst, key=lambda x: x[1])
        for (v1, _), (v2, _) in itertools.pairwise(by_ts):
            if v2 <= v1:
                conflicts.append({
                    "view": v2, "problem": "installed out of order", "nodes": [p[0]],
                    "detail": f"node {p[0]} (incarnation {p[1]}) installed view {v2} "
                              f"after view {v1}"})

    complete: dict[int, list[Proc]] = {}
    for v in sorted(installers):
        succ = successors.get(v)
        if succ:
            complete[v] = sorted(installers[v] & installers[min(succ)])
        else:
            complete[v] = sorted(p for p in installers[v] if (*p, v) not in lost
                                 and p not in later_life and by_proc[p][-1][0] == v)

    status = []
    for key in sorted(set(installed) | set(pv)):
        n, i, v = key
        ends_at: list[tuple[float, str]] = []
        if key in lost:
            ts, reason = lost[key]
            ends_at.append((ts, f"lost the view ({reason})"))
        mine = by_proc.get((n, i), [])
        k = bisect.bisect_right(mine, (v, math.inf))
        if k < len(mine):
            ends_at.append((mine[k][1], f"installed view {mine[k][0]}"))
        end_ts, end_reason = min(ends_at) if ends_at else (math.inf, None)
        done = (n, i) in complete.get(v, [])
        safe = _int(pv.get(key, {}).get("last_safe"))
        status.append({
            "node": n, "incarnation": i, "view": v, "installed": key in installed,
            "complete": done, "install_ts": installed.get(key, math.nan), "end_ts": end_ts,
            "end_reason": end_reason, "trusted_end": BIG if done else (-1 if safe is None
                                                                        else safe),
            "log_lost": key in unlogged})

    length = {v: max((_int(pv.get((*p, v), {}).get("last_position")) or -1) + 1
                     for p in installers[v]) for v in installers}
    positions = [
        {"view": v, "node": n, "incarnation": i, "messages": int(r["messages"]),
         "first_position": int(r["first_position"]), "last_position": int(r["last_position"])}
        for (n, i, v), r in sorted(pv.items())
        if (n, i, v) not in unlogged and _int(r["messages"]) and (int(r["first_position"]) != 0
                                    or int(r["messages"]) != int(r["last_position"]) + 1)]
    gap_rows, notices = _gaps(gaps, pv, by_proc, own_rec, lost, length)
    gap_rows = [r for r in gap_rows
                if first_unlogged.get((r["node"], r["incarnation"]), BIG) > r["view"]]
    return History(
        status=pd.DataFrame(status, columns=STATUS),
        positions=pd.DataFrame(positions, columns=POSITIONS),
        gaps=pd.DataFrame(gap_rows, columns=GAPS),
        notices=pd.DataFrame(notices, columns=NOTICES),
        conflicts=pd.DataFrame(sorted(conflicts, key=lambda c: (c["view"], c["problem"])),
                               columns=CONFLICTS),
        views=pd.DataFrame([
            {"number": k + 1, "view": v, "previous": canon[v][1], "members": list(canon[v][0]),
             "installed_by": sorted(p[0] for p in installers[v]),
             "completed_by": sorted(p[0] for p in complete[v]),
             "lost_by": sorted(n for (n, _, w) in lost if w == v), "messages": length[v]}
            for k, v in enumerate(sorted(installers))], columns=VIEWS),
        timeline=_timeline(view_recs, starts, procs, pv, ends or {}),
        complete=complete,
        losses=pd.DataFrame([
            {"node": int(r["node"]), "incarnation": int(r["incarnation"]),
             "since": float(r["since"]), "until": float(r["ts"]),
             "views": sorted(int(v) for v in (r["views"] if r["views"] is not None else [])),
             "refused": _int(r.get("refused"))} for r in loss_rows], columns=LOSSES),
        audited={v: [p for p in procs_ if (*p, v) not in unlogged]
                 for v, procs_ in complete.items()},
    )


def _views(own_rec: dict[tuple[int, int, int], dict[str, Any]],
           installers: dict[int, set[Proc]], starts: pd.DataFrame,
           ) -> tuple[dict[int, tuple[tuple[int, ...], int | None]], list[dict[str, Any]]]:
    """Each view's members and predecessor (as most processes recorded them), and the
    records that disagree, install a view without being in it, or are no majority."""
    listed = {(int(r["node"]), int(r["incarnation"])): len(r["members"])
              for r in _rows(starts) if r["members"] is not None}
    conflicts: list[dict[str, Any]] = []
    canon: dict[int, tuple[tuple[int, ...], int | None]] = {}
    for v in sorted(installers):
        recs = {p: own_rec[(*p, v)] for p in sorted(installers[v])}
        for field, what in (("members", "members differ"), ("previous", "previous differs")):
            held: dict[Any, list[int]] = defaultdict(list)
            for p, r in recs.items():
                value = r[field]
                held[tuple(sorted(value)) if field == "members" else _int(value)].append(p[0])
            if len(held) > 1:
                common = Counter({k: len(x) for k, x in held.items()}).most_common(1)[0][0]
                conflicts.append({
                    "view": v, "problem": what,
                    "nodes": sorted(n for k, x in held.items() if k != common for n in x),
                    "detail": "; ".join(f"{list(k) if field == 'members' else k} at node"
                                        f"{'s' if len(x) > 1 else ''} "
                                        f"{', '.join(map(str, sorted(x)))}"
                                        for k, x in held.items())})
        members = Counter(tuple(sorted(r["members"])) for r in recs.values()).most_common(1)
        prev = Counter(_int(r["previous"]) for r in recs.values()).most_common(1)
        canon[v] = (members[0][0], prev[0][0])
        outside = sorted(p[0] for p, r in recs.items() if p[0] not in r["members"])
        if outside:
            conflicts.append({"view": v, "problem": "not a member", "nodes": outside,
                              "detail": f"installed by node(s) {outside}, not in its members"})
        potential = max((listed[p] for p in recs if p in listed), default=None)
        if potential is not None and 2 * len(canon[v][0]) <= potential:
            conflicts.append({
                "view": v, "problem": "not a majority", "nodes": sorted(p[0] for p in recs),
                "detail": f"{len(canon[v][0])} of the {potential} listed members"})
    return canon, conflicts


def _gaps(gaps: pd.DataFrame, pv: dict[tuple[int, int, int], dict[str, Any]],
          by_proc: dict[Proc, list[tuple[int, float]]],
          own_rec: dict[tuple[int, int, int], dict[str, Any]],
          lost: dict[tuple[int, int, int], tuple[float, str]],
          length: dict[int, int]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    ordered: dict[Proc, list[tuple[int, int]]] = defaultdict(list)
    for (n, i, v), r in sorted(pv.items()):
        if _int(r["messages"]):
            ordered[(n, i)].append((v, int(r["last_position"])))

    def last_before(p: Proc, w: int) -> tuple[int, int] | None:
        return next((x for x in reversed(ordered.get(p, [])) if x[0] < w), None)

    def missed(after: tuple[int, int] | None, w: int) -> int:
        if after is None:
            return sum(n for v, n in length.items() if v < w)
        v, pos = after
        return max(0, length.get(v, 0) - pos - 1) + sum(
            n for x, n in length.items() if v < x < w)

    rows: list[dict[str, Any]] = []
    notices: list[dict[str, Any]] = []
    noticed: set[tuple[int, int, int]] = set()
    for r in sorted(_rows(gaps), key=lambda r: (r["node"], r["incarnation"], r["ts"])):
        p, w = (int(r["node"]), int(r["incarnation"])), int(r["view"])
        noticed.add((*p, w))
        after = None if r["after"] is None else (int(r["after"][0]), int(r["after"][1]))
        last = last_before(p, w)
        av, ap = after if after is not None else (None, None)
        notices.append({"view": w, "node": p[0], "incarnation": p[1], "after_view": av,
                        "after_position": ap, "missed": missed(after, w)})
        if after != last:
            lv, lp = last if last is not None else (None, None)
            rows.append({"view": w, "node": p[0], "incarnation": p[1],
                         "problem": "after is not its last ordered delivery", "after_view": av,
                         "after_position": ap, "last_view": lv, "last_position": lp,
                         "missed": missed(after, w)})
    for p, lst in sorted(by_proc.items()):
        for k, (w, _) in enumerate(lst):
            if (*p, w) in noticed:
                continue
            prev = lst[k - 1][0] if k else None
            if prev is not None and prev == _int(own_rec[(*p, w)]["previous"]) and (
                    (*p, prev) not in lost):
                continue
            last = last_before(p, w)
            m = missed(last, w)
            if m:
                lv, lp = last if last is not None else (None, None)
                rows.append({"view": w, "node": p[0], "incarnation": p[1],
                             "problem": "no gap notice", "after_view": None,
                             "after_position": None, "last_view": lv, "last_position": lp,
                             "missed": m})
    rows.sort(key=lambda r: (r["view"], r["node"], r["incarnation"], r["problem"]))
    return rows, notices


def _timeline(view_recs: list[dict[str, Any]], starts: pd.DataFrame, procs: set[Proc],
              pv: dict[tuple[int, int, int], dict[str, Any]],
              ends: dict[Proc, float]) -> pd.DataFrame:
    events: dict[Proc, list[tuple[float, int, str, int | None]]] = defaultdict(list)
    for r in _rows(starts):
        events[(int(r["node"]), int(r["incarnation"]))].append((float(r["ts"]), 0, "start", None))
    for r in view_recs:
        kind = "primary" if r["primary"] else "not primary"
        events[(int(r["node"]), int(r["incarnation"]))].append(
            (float(r["ts"]), 1, kind, int(r["view"])))
    last: dict[Proc, float] = defaultdict(lambda: -math.inf)
    for (n, i, _), r in pv.items():
        last[(n, i)] = max(last[(n, i)], float(r["last_ts"]))
    rows = []
    for p in sorted(procs):
        evs = sorted(events.get(p, []))
        if not evs:
            continue
        end = max(evs[-1][0], last[p], ends.get(p, -math.inf))
        kind, view, since = "no view", None, evs[0][0]
        for ts, _, what, v in evs:
            if what == "start":
                continue
            if ts > since or kind != "no view":
                rows.append({"node": p[0], "incarnation": p[1], "kind": kind, "view": view,
                             "start": since, "end": ts})
            kind, view, since = what, v, ts
        rows.append({"node": p[0], "incarnation": p[1], "kind": kind, "view": view,
                     "start": since, "end": end})
    return pd.DataFrame(rows, columns=TIMELINE)
