"""Synthetic log sets: what ``n`` daemons would write for a seeded workload (log schema 1).

Theory of operation: ``generate(spec)`` draws, with one seeded numpy generator, a
sequence of DAG vertices (sender, ``count`` messages, service, ``send_ts``) split evenly
into ``view_changes + 1`` views. Sequence numbers count per view and sender, and the
totally ordered vertices (``agreed``/``safe``) get consecutive positions from 0 in each
view, the ``causal`` ones null ordering fields. View ids are large and increasing (the
wall clock in ms of the view's first send, as the daemon's are above incarnations).

Every member of a view delivers its vertices in order at ``send_ts`` plus its own random
latency (kept monotonic per daemon life), with a rule, ``ntail``, ``unseen`` and ``nvt``.
Two membership events can be scripted, each at a view index ``k`` (a view must follow):

- ``crash = (node, k)``: the node delivers the first half of view ``k`` and, as a
  crashed member may, one *agreed* vertex out of order after its last safe one (its
  ``tail``: the next-but-one ordered vertex at the next position); then nothing. The
  next view goes on without it; it restarts during that view (a new incarnation, a
  ``start`` record) and rejoins in the view after, with a gap notice (``after`` null).
- ``pause = (node, k)``: the node delivers the first half of view ``k``, then loses its
  primary view (a ``view`` record with ``primary`` false, reason ``paused``); the next
  view goes on without it and it rejoins in the view after, with a gap notice after the
  last ordered message it delivered.

Every daemon life starts with a ``start`` record; the first view of a life comes with a
gap notice, except the cluster's first view (nothing was ordered before it, so the
daemon writes none). In a crash or
pause view the vertices after the half are sent by the others only. Metrics snapshots
every ``metrics_every_s`` carry each life's cumulative counters (a restart resets them)
and go on ``idle_s`` after the last delivery (a short run followed by idle time).

Faults are planted on a generated ``LogSet`` in place, each returning what it changed:
``swap`` (two adjacent ordered vertices in the wrong order at a node), ``lose`` (a node
never delivers a vertex), ``duplicate`` (a node delivers a vertex again, after its last
one in that view), ``shift_positions`` (a view's positions do not start at 0),
``safe_tail`` (the crashed node's out-of-order tail is a safe vertex: not uniform),
``deliver_after_loss`` (the paused node delivers after losing its view),
``deliver_in_view`` (a node delivers in a view it never installed), ``deliver_late`` (a
node delivers a vertex of a view after installing the next), ``wrong_members`` (a
node's view record lists other members), ``set_gap_after`` and ``drop_gap`` (a wrong
gap notice, or none).

``write`` formats the delivery records column-wise with pyarrow (no per-record Python),
in the field order of ``amcast.daemon.logs.DeliveryLog``, into ``node-<i>/delivery.jsonl``
rotated every ``rotate_records`` records (``.1`` is the newest rotated file, as
``RotatingJsonl`` does) and ``node-<i>/metrics.jsonl``. (The tests write the same
records through the daemon's own writer too, ``tests/analytics/daemon_writer.py``, and
check that both agree: this package imports nothing of ``amcast`` outside itself.)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

RULES = ("early", "gl_prefix", "default")
RULE_P = (0.55, 0.3, 0.15)
STEP = 1e-5  # seconds between a daemon's records at a view change (above float resolution)

DELIVERY_FIELDS = [
    "node", "incarnation", "view", "variant", "phi", "sender", "seq", "position", "count",
    "bytes", "service", "activation", "rule", "ntail", "unseen", "nvt", "send_ts", "ts",
    "envelopes",
]


@dataclass(frozen=True)
class Spec:
    nodes: int = 4
    vertices: int = 2000
    variant: str = "gltoto"
    phi: float = 2.0
    rate: float = 100.0  # vertices per second, whole group
    max_count: int = 4
    causal_share: float = 0.1
    safe_share: float = 0.1
    view_changes: int = 0
    crash: tuple[int, int] | None = None  # (node, view index): see the module doc
    pause: tuple[int, int] | None = None  # (node, view index): see the module doc
    metrics_every_s: float = 10.0
    idle_s: float = 0.0  # metrics snapshots go on this long after the last delivery
    start: float = 1_700_000_000.0
    seed: int = 1


@dataclass
class LogSet:
    spec: Spec
    deliveries: dict[int, pd.DataFrame]  # per node, every life (``incarnation``), by ts
    events: dict[int, list[dict]] = field(default_factory=dict)  # start/gap/view records
    metrics: dict[int, list[dict]] = field(default_factory=dict)
    view_ids: list[int] = field(default_factory=list)  # by view index
    members: list[tuple[int, ...]] = field(default_factory=list)  # by view index
    tail: dict[str, int] | None = None  # the crashed life's out-of-order delivery

    def records(self) -> int:
        return sum(len(d) for d in self.deliveries.values())


@dataclass
class _Life:
    node: int
    incarnation: int
    start: float
    views: list[int]  # view indexes, in order


def _plan(spec: Spec) -> tuple[list[tuple[int, ...]], dict[tuple[int, int], str]]:
    """Members per view index and the (node, view index) where a member stops."""
    nviews = spec.view_changes + 1
    stops: dict[tuple[int, int], str] = {}
    out: dict[int, set[int]] = {k: set() for k in range(nviews)}
    for what, event in (("crash", spec.crash), ("pause", spec.pause)):
        if event is None:
            continue
        node, k = event
        if any(n == node for n, _ in stops):
            raise ValueError("a crash and a pause need two nodes")
        if not (0 <= node < spec.nodes and 0 <= k < nviews - 1):
            raise ValueError(f"{what} {event}: needs a node and a view index followed by a view")
        stops[(node, k)] = what
        out[k + 1].add(node)
    members = [tuple(n for n in range(spec.nodes) if n not in out[k]) for k in range(nviews)]
    for k, m in enumerate(members):
        if 2 * len(m) <= spec.nodes:
            raise ValueError(f"view index {k} ({m}) would not be a majority of {spec.nodes}")
    if spec.vertices < 2 * nviews:
        raise ValueError("at least two vertices per view")
    return members, stops


def generate(spec: Spec) -> LogSet:
    rng = np.random.default_rng(spec.seed)
    members, stops = _plan(spec)
    nviews, v = len(members), spec.vertices
    view_of = (np.arange(v) * nviews) // v
    first = np.searchsorted(view_of, np.arange(nviews))
    within = np.arange(v) - first[view_of]
    sizes = np.bincount(view_of, minlength=nviews)
    cut = {k: int(sizes[k]) // 2 for _, k in stops}
    sender = np.empty(v, dtype=np.int64)
    u = rng.random(v)
    for k in range(nviews):
        late = within >= cut.get(k, v)
        for sel, eligible in (
            ((view_of == k) & ~late, members[k]),
            ((view_of == k) & late, [n for n in members[k] if (n, k) not in stops]),
        ):
            pick = np.array(eligible)
            sender[sel] = pick[(u[sel] * len(pick)).astype(np.int64)]
    count = rng.integers(1, spec.max_count + 1, v)
    w = rng.random(v)
    service = np.where(w < spec.causal_share, "causal",
                       np.where(w < spec.causal_share + spec.safe_share, "safe", "agreed"))
    ordered = service != "causal"
    send_ts = spec.start + np.cumsum(rng.exponential(1.0 / spec.rate, v))
    view_ids = (send_ts[first] * 1000).astype(np.int64) + np.arange(nviews)
    seq = pd.DataFrame({"v": view_of, "s": sender}).groupby(["v", "s"]).cumcount().to_numpy() + 1
    ocount = np.where(ordered, count, 0)
    before = np.cumsum(ocount) - ocount
    position = before - before[first][view_of]
    nth = np.cumsum(ordered) - ordered
    activation = (nth - nth[first][view_of]) // 3
    base = pd.DataFrame({
        "view": view_ids[view_of], "variant": spec.variant, "phi": spec.phi, "sender": sender,
        "seq": seq, "position": pd.array(position, dtype="Int64"), "count": count,
        "bytes": count * 100, "service": service,
        "activation": pd.array(activation, dtype="Int64"), "send_ts": send_ts,
        "envelopes": np.maximum(1, count // 2),
    })
    for col in ("position", "activation"):
        base.loc[~ordered, col] = pd.NA
    logset = LogSet(spec, {}, view_ids=[int(x) for x in view_ids], members=members)
    lives = _lives(spec, members, stops, send_ts[first])
    parts: dict[int, list[pd.DataFrame]] = {}
    for life in lives:
        d, events = _life(logset, life, base, rng, stops, cut, first, sizes, ordered,
                          send_ts[first])
        parts.setdefault(life.node, []).append(d)
        logset.events.setdefault(life.node, []).extend(events)
    logset.deliveries = {n: pd.concat(parts[n], ignore_index=True) for n in sorted(parts)}
    _add_metrics(logset, lives, rng)
    return logset


def _lives(spec: Spec, members: list[tuple[int, ...]], stops: dict[tuple[int, int], str],
           t: np.ndarray) -> list[_Life]:
    lives = []
    for node in range(spec.nodes):
        mine = [k for k, m in enumerate(members) if node in m]
        crash = next((k for (n, k), what in stops.items() if n == node and what == "crash"),
                     None)
        if crash is None:
            lives.append(_Life(node, int(spec.start * 1000), spec.start, mine))
            continue
        lives.append(_Life(node, int(spec.start * 1000), spec.start,
                           [k for k in mine if k <= crash]))
        later = [k for k in mine if k > crash]
        if later:
            restart = float(t[crash + 1] + t[later[0]]) / 2
            lives.append(_Life(node, int(restart * 1000), restart, later))
    return lives


def _life(logset: LogSet, life: _Life, base: pd.DataFrame, rng: np.random.Generator,
          stops: dict[tuple[int, int], str], cut: dict[int, int], first: np.ndarray,
          sizes: np.ndarray, ordered: np.ndarray, t: np.ndarray) -> tuple[pd.DataFrame,
                                                                            list[dict]]:
    """One daemon life: its delivery records and its start, gap and view records."""
    spec, node, ids = logset.spec, life.node, logset.view_ids

    def rec(kind: str, ts: float, **fields: Any) -> dict:  # ``DeliveryLog``'s field order
        return {"schema": 1, "type": kind, "node": node, "incarnation": life.incarnation,
                "ts": ts, **fields}

    events: list[dict] = [rec("start", life.start, members=list(range(spec.nodes)))]
    prev, last_ordered = life.start, None
    chunks = []
    for j, k in enumerate(life.views):
        continuing = j > 0 and life.views[j - 1] == k - 1 and (node, k - 1) not in stops
        if not continuing and k > 0:  # no order before the first view: nothing missed
            prev = max(float(t[k]) - 0.002, prev + STEP)
            events.append(rec("gap", prev, view=ids[k],
                              after=None if last_ordered is None else list(last_ordered)))
        prev = max(float(t[k]) - 0.001, prev + STEP)
        old = set(logset.members[k - 1]) if k else set()
        events.append(rec(
            "view", prev, view=ids[k], primary=True, members=list(logset.members[k]),
            previous=ids[k - 1] if k else None, joined=sorted(set(logset.members[k]) - old),
            left=[], excluded=sorted(old - set(logset.members[k]))))
        stop = stops.get((node, k))
        rows = np.arange(first[k], first[k] + (cut[k] if stop else sizes[k]))
        tail = None
        if stop == "crash":
            later = np.flatnonzero(ordered[first[k] + cut[k]: first[k] + sizes[k]])
            if len(later) >= 2 and base.at[first[k] + cut[k] + later[1], "service"] == "agreed":
                tail = (first[k] + cut[k] + later[1], base.at[first[k] + cut[k] + later[0],
                                                            "position"])
                rows = np.append(rows, tail[0])
        d = base.iloc[rows].copy()
        if tail is not None:
            d.iloc[-1, d.columns.get_loc("position")] = tail[1]
            logset.tail = {"node": node, "incarnation": life.incarnation, "view": ids[k],
                           "position": int(tail[1])}
        own = (d["sender"] == node).to_numpy()
        raw = d["send_ts"].to_numpy() + 0.002 + rng.exponential(0.01, len(d)) + np.where(
            own, 0.0, 0.001)
        d["ts"] = np.maximum.accumulate(np.maximum(raw, prev + STEP))
        prev = float(d["ts"].iloc[-1])
        chunks.append(d)
        o = d[d["position"].notna()]
        if len(o):
            last_ordered = (ids[k], int(o["position"].iloc[-1]) + int(o["count"].iloc[-1]) - 1)
        if stop == "pause":
            prev += 0.002
            events.append(rec("view", prev, view=ids[k], primary=False, members=[],
                              reason="paused"))
    d = pd.concat(chunks, ignore_index=True)
    n = len(d)
    ok = d["position"].notna().to_numpy()
    d.insert(0, "node", node)
    d.insert(1, "incarnation", life.incarnation)
    d["rule"] = np.where(ok, rng.choice(np.array(RULES), n, p=RULE_P), "causal")
    ntail = rng.integers(1, spec.nodes + 1, n)
    d["ntail"] = pd.array(ntail, dtype="Int64")
    d["unseen"] = pd.array(spec.nodes - ntail, dtype="Int64")
    d["nvt"] = pd.array(rng.integers(1, spec.nodes + 1, n), dtype="Int64")
    for col in ("ntail", "unseen", "nvt"):
        d.loc[~ok, col] = pd.NA
    return d[DELIVERY_FIELDS].reset_index(drop=True), events


def _add_metrics(logset: LogSet, lives: list[_Life], rng: np.random.Generator) -> None:
    """Snapshots every ``metrics_every_s`` of each life, counters from its start."""
    spec = logset.spec
    end = max(float(d["ts"].iloc[-1]) for d in logset.deliveries.values())
    grid = np.arange(spec.start + spec.metrics_every_s,
                     end + spec.idle_s + spec.metrics_every_s, spec.metrics_every_s)
    for life in lives:
        all_d = logset.deliveries[life.node]
        d = all_d[all_d["incarnation"] == life.incarnation]
        installs = [(e["ts"], e["view"]) for e in logset.events[life.node]
                    if e["incarnation"] == life.incarnation and e["type"] == "view"
                    and e["primary"]]
        crashed = spec.crash == (life.node, life.views[-1])
        stop = float(d["ts"].iloc[-1]) if crashed else end + spec.idle_s
        snaps = grid[(grid > life.start) & (grid <= stop)]
        delivered = np.cumsum(d["count"].to_numpy())
        own = (d["sender"] == life.node).to_numpy()
        sent = np.cumsum(np.where(own, d["count"].to_numpy(), 0))
        dts, sts = d["ts"].to_numpy(), d["send_ts"].to_numpy()
        retrans = np.cumsum(rng.integers(0, 20, len(snaps)))
        bad = np.cumsum(rng.integers(0, 3, len(snaps)))
        late = np.cumsum(rng.integers(0, 2, len(snaps)))
        out = logset.metrics.setdefault(life.node, [])
        for k, t in enumerate(snaps):
            i = int(np.searchsorted(dts, t, side="right"))
            j = int(np.searchsorted(sts, t, side="right"))
            msent = int(sent[j - 1]) if j else 0
            mdelivered = int(delivered[i - 1]) if i else 0
            view = max((vid for ts, vid in installs if ts <= t), default=0)
            out.append({
                "schema": 1, "type": "metrics", "node": life.node,
                "incarnation": life.incarnation, "ts": float(t), "view": view,
                "variant": spec.variant, "messages_sent": msent,
                "messages_delivered": mdelivered, "datagrams_sent": msent + int(retrans[k]),
                "datagrams_received": mdelivered, "retransmissions": int(retrans[k]),
                "nacks_sent": int(retrans[k]) // 2,
                "drops": {"bad_tag": int(bad[k]), "late": int(late[k])}, "pending": 0,
                "backpressure_events": 0, "clients": 1, "engine": {"x": 1},
            })


# ---------------------------------------------------------------- planted faults


def _ordered_rows(d: pd.DataFrame, view: int | None = None) -> np.ndarray:
    sel = d["position"].notna()
    if view is not None:
        sel &= d["view"] == view
    return np.flatnonzero(sel.to_numpy())


def _event(logset: LogSet, node: int, kind: str, view: int, **match: Any) -> dict:
    return next(e for e in logset.events[node] if e["type"] == kind and e.get("view") == view
                and all(e.get(k) == x for k, x in match.items()))


def swap(logset: LogSet, node: int, k: int, view: int | None = None) -> tuple[dict, dict]:
    """Node delivers ordered vertices k and k+1 (k-th of its ordered ones, in ``view``
    if given) swapped. Returns the two records as now written (the first one is at the
    first divergent position)."""
    d = logset.deliveries[node]
    rows = _ordered_rows(d, view)
    a, b = int(rows[k]), int(rows[k + 1])
    p = int(d.at[a, "position"])
    ra, rb = d.loc[a].copy(), d.loc[b].copy()
    rb["position"], ra["position"] = p, p + int(rb["count"])
    rb["ts"], ra["ts"] = d.at[a, "ts"], d.at[b, "ts"]
    d.loc[a], d.loc[b] = rb, ra
    return d.loc[a].to_dict(), d.loc[b].to_dict()


def lose(logset: LogSet, node: int, row: int) -> dict:
    """Node never delivers the vertex of its record ``row``; returns that record."""
    d = logset.deliveries[node]
    rec = d.loc[row].to_dict()
    logset.deliveries[node] = d.drop(index=row).reset_index(drop=True)
    return rec


def _insert(logset: LogSet, node: int, rec: pd.Series) -> None:
    d = logset.deliveries[node]
    logset.deliveries[node] = pd.concat([d, rec.to_frame().T], ignore_index=True).astype(
        d.dtypes.to_dict()).sort_values("ts", kind="stable").reset_index(drop=True)


def duplicate(logset: LogSet, node: int, row: int) -> dict:
    """Node delivers the vertex of record ``row`` again right after its last record in
    that view (an ordered one at the next position of the view); returns the repeat."""
    d = logset.deliveries[node]
    rec = d.loc[row].copy()
    same = d[(d["view"] == rec["view"]) & (d["incarnation"] == rec["incarnation"])]
    if pd.notna(rec["position"]):
        ordered = same[same["position"].notna()]
        last = ordered.iloc[-1]
        rec["position"] = int(last["position"]) + int(last["count"])
    rec["ts"] = float(same["ts"].iloc[-1])
    _insert(logset, node, rec)
    return rec.to_dict()


def shift_positions(logset: LogSet, view: int, by: int = 1) -> None:
    """Every node's positions in ``view`` start at ``by`` instead of 0."""
    for d in logset.deliveries.values():
        sel = (d["view"] == view) & d["position"].notna()
        d.loc[sel, "position"] = d.loc[sel, "position"] + by


def safe_tail(logset: LogSet) -> dict:
    """The crashed life's out-of-order delivery becomes a *safe* vertex (the first safe
    one the others deliver after its position), at the same position; returns it."""
    assert logset.tail is not None, "a crash with a tail"
    t = logset.tail
    d = logset.deliveries[t["node"]]
    sel = (d["incarnation"] == t["incarnation"]) & (d["view"] == t["view"]) & (
        d["position"] == t["position"]).fillna(False)
    row = int(np.flatnonzero(sel.to_numpy(dtype=bool))[0])
    other = next(x for n, x in logset.deliveries.items() if n != t["node"])
    cand = other[((other["view"] == t["view"]) & (other["service"] == "safe")
                  & (other["position"] > t["position"])).fillna(False)].iloc[0]
    for col in ("sender", "seq", "count", "bytes", "service", "send_ts", "envelopes"):
        d.at[row, col] = cand[col]
    return d.loc[row].to_dict()


def deliver_after_loss(logset: LogSet) -> dict:
    """The paused node delivers the next ordered vertex of its view after losing it (its
    gap notice then says so, as the daemon's log would); returns the record."""
    assert logset.spec.pause is not None
    node, k = logset.spec.pause
    vid = logset.view_ids[k]
    d = logset.deliveries[node]
    mine = d[(d["view"] == vid) & d["position"].notna()]
    nxt = int(mine["position"].iloc[-1]) + int(mine["count"].iloc[-1])
    other = next(x for n, x in logset.deliveries.items() if n != node and n in
                 logset.members[k + 1])
    rec = other[((other["view"] == vid) & (other["position"] == nxt)).fillna(False)
                ].iloc[0].copy()
    lost = _event(logset, node, "view", vid, primary=False)
    rec["node"], rec["incarnation"], rec["ts"] = node, lost["incarnation"], lost["ts"] + 0.001
    _insert(logset, node, rec)
    gap = _event(logset, node, "gap", logset.view_ids[k + 2])
    gap["after"] = [vid, nxt + int(rec["count"]) - 1]
    return rec.to_dict()


def deliver_in_view(logset: LogSet, node: int, row: int, view: int) -> dict:
    """Node delivers a copy of its record ``row`` in ``view`` (a view it never installed)
    at position 0, at the same time; returns the copy."""
    rec = logset.deliveries[node].loc[row].copy()
    rec["view"], rec["position"] = view, 0
    _insert(logset, node, rec)
    return rec.to_dict()


def deliver_late(logset: LogSet, node: int, k: int) -> dict:
    """Node delivers its last ordered vertex of view index ``k`` after installing the
    next view (before its first delivery there); returns the record as now written."""
    d = logset.deliveries[node]
    vid, nxt = logset.view_ids[k], logset.view_ids[k + 1]
    row = int(_ordered_rows(d, vid)[-1])
    install = _event(logset, node, "view", nxt, primary=True)
    after = d[d["view"] == nxt]["ts"].iloc[0]
    d.at[row, "ts"] = (install["ts"] + after) / 2
    logset.deliveries[node] = d.sort_values("ts", kind="stable").reset_index(drop=True)
    return d.loc[row].to_dict()


def wrong_members(logset: LogSet, node: int, view: int, members: list[int]) -> dict:
    """Node's record of installing ``view`` lists ``members``; returns it."""
    rec = _event(logset, node, "view", view, primary=True)
    rec["members"] = members
    return rec


def set_gap_after(logset: LogSet, node: int, view: int, after: list[int] | None) -> dict:
    rec = _event(logset, node, "gap", view)
    rec["after"] = after
    return rec


def drop_gap(logset: LogSet, node: int, view: int) -> dict:
    """Node's gap notice before ``view`` is not written; returns it."""
    rec = _event(logset, node, "gap", view)
    logset.events[node].remove(rec)
    return rec


# ---------------------------------------------------------------- writing


def format_deliveries(d: pd.DataFrame) -> memoryview:
    """The JSON lines of these delivery records (``DeliveryLog`` field order), as bytes."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = pa.Table.from_pandas(d[DELIVERY_FIELDS], preserve_index=False)

    def s(name: str) -> pa.ChunkedArray:
        return pc.cast(t[name], pa.string())

    parts: list = [
        '{"schema":1,"type":"delivery","node":', s("node"), ',"incarnation":',
        s("incarnation"), ',"view":', s("view"),
        ',"variant":"', s("variant"), '","phi":', s("phi"), ',"sender":', s("sender"),
        ',"seq":', s("seq"), ',"position":', s("position"), ',"count":', s("count"),
        ',"bytes":', s("bytes"), ',"service":"', s("service"), '","activation":',
        s("activation"), ',"rule":"', s("rule"), '","ntail":', s("ntail"), ',"unseen":',
        s("unseen"), ',"nvt":', s("nvt"), ',"send_ts":', s("send_ts"), ',"ts":', s("ts"),
        ',"envelopes":', s("envelopes"), "}\n",
    ]
    lines = pc.binary_join_element_wise(
        *parts, "", null_handling="replace", null_replacement="null"
    ).combine_chunks()
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int32)
    data = lines.buffers()[2]
    return memoryview(data)[offsets[lines.offset]: offsets[lines.offset + len(lines)]]


def write(logset: LogSet, directory: Path, *, rotate_records: int | None = None,
          progress: Callable[[str], None] | None = None) -> Path:
    """Write the log set below ``directory`` (one ``node-<i>`` directory per node)."""
    directory = Path(directory)
    for node, d in logset.deliveries.items():
        ndir = directory / f"node-{node}"
        ndir.mkdir(parents=True, exist_ok=True)
        step = rotate_records or max(1, len(d))
        chunks = [d.iloc[i:i + step] for i in range(0, len(d), step)] or [d]
        for k, chunk in enumerate(chunks):
            back = len(chunks) - 1 - k  # the newest chunk is delivery.jsonl
            name = "delivery.jsonl" + (f".{back}" if back else "")
            with open(ndir / name, "wb") as fh:
                if k == 0:
                    fh.write("".join(json.dumps(r) + "\n"
                                     for r in logset.events.get(node, [])).encode())
                fh.write(format_deliveries(chunk))
            if progress:
                progress(f"node {node}: wrote {name} ({len(chunk):,} records)")
        with open(ndir / "metrics.jsonl", "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in logset.metrics.get(node, []))
    return directory
