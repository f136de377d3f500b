"""Synthetic log sets: what ``n`` daemons would write for a seeded workload (log schema 1).

Theory of operation: ``generate(spec)`` draws, with one seeded numpy generator, a
sequence of DAG vertices (sender, per-sender ``seq``, ``count`` messages, service,
``send_ts``); the totally ordered ones (``agreed``/``safe``) get consecutive positions
in send order, the ``causal`` ones null ordering fields. Every node delivers every
vertex in that order at ``send_ts`` plus its own random latency (kept monotonic per
node), with a rule (``early``/``gl_prefix``/``default``), ``ntail``, ``unseen`` and
``nvt``. Views (all nodes as members) start at ``view_changes + 1`` evenly spaced
vertices; metrics snapshots every ``metrics_every_s`` carry cumulative counters
(``restart`` resets one node's counters mid-run, as a daemon restart does).

Faults are planted on a generated ``LogSet`` with ``swap`` (a node delivers two adjacent
ordered vertices in the wrong order), ``lose`` (a node never delivers a vertex) and
``duplicate`` (a node delivers a vertex a second time, at the end of its sequence).

``write`` formats the delivery records column-wise with pyarrow (no per-record Python),
in the field order of ``daemon.logs.DeliveryLog``, into ``node-<i>/delivery.jsonl``
rotated every ``rotate_records`` records (``.1`` is the newest rotated file, as
``RotatingJsonl`` does) and ``node-<i>/metrics.jsonl``. ``write_with_daemon_writer``
writes the same records through the daemon's own ``DeliveryLog``, so a test can check
the job against the real writer.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

RULES = ("early", "gl_prefix", "default")
RULE_P = (0.55, 0.3, 0.15)

DELIVERY_FIELDS = [
    "node", "view", "variant", "phi", "sender", "seq", "position", "count", "bytes",
    "service", "activation", "rule", "ntail", "unseen", "nvt", "send_ts", "ts", "envelopes",
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
    metrics_every_s: float = 10.0
    restart: tuple[int, int] | None = None  # (node, snapshot index) where counters reset
    start: float = 1_700_000_000.0
    seed: int = 1


@dataclass
class LogSet:
    spec: Spec
    deliveries: dict[int, pd.DataFrame]
    views: dict[int, list[dict]] = field(default_factory=dict)
    metrics: dict[int, list[dict]] = field(default_factory=dict)

    def records(self) -> int:
        return sum(len(d) for d in self.deliveries.values())


def generate(spec: Spec) -> LogSet:
    rng = np.random.default_rng(spec.seed)
    n, v = spec.nodes, spec.vertices
    sender = rng.integers(0, n, v)
    seq = pd.Series(sender).groupby(sender).cumcount().to_numpy() + 1
    count = rng.integers(1, spec.max_count + 1, v)
    u = rng.random(v)
    service = np.where(u < spec.causal_share, "causal",
                       np.where(u < spec.causal_share + spec.safe_share, "safe", "agreed"))
    ordered = service != "causal"
    send_ts = spec.start + np.cumsum(rng.exponential(1.0 / spec.rate, v))
    ocount = np.where(ordered, count, 0)
    position = np.cumsum(ocount) - ocount
    activation = np.cumsum(ordered) // 3
    view_of = 1 + (np.arange(v) * (spec.view_changes + 1)) // v
    base = pd.DataFrame({
        "view": view_of, "variant": spec.variant, "phi": spec.phi, "sender": sender,
        "seq": seq, "position": pd.array(np.where(ordered, position, 0), dtype="Int64"),
        "count": count, "bytes": count * 100, "service": service,
        "activation": pd.array(activation, dtype="Int64"), "send_ts": send_ts,
        "envelopes": np.maximum(1, count // 2),
    })
    for col in ("position", "activation"):
        base.loc[~ordered, col] = pd.NA
    deliveries: dict[int, pd.DataFrame] = {}
    for node in range(n):
        latency = 0.002 + rng.exponential(0.01, v) + np.where(sender == node, 0.0, 0.001)
        ts = np.maximum.accumulate(send_ts + latency)
        rule = rng.choice(np.array(RULES), v, p=RULE_P)
        ntail = rng.integers(1, n + 1, v)
        nvt = rng.integers(1, n + 1, v)
        d = base.copy()
        d.insert(0, "node", node)
        d["rule"] = np.where(ordered, rule, "causal")
        d["ntail"] = pd.array(ntail, dtype="Int64")
        d["unseen"] = pd.array(n - ntail, dtype="Int64")
        d["nvt"] = pd.array(nvt, dtype="Int64")
        for col in ("ntail", "unseen", "nvt"):
            d.loc[~ordered, col] = pd.NA
        d["ts"] = ts
        deliveries[node] = d[DELIVERY_FIELDS].reset_index(drop=True)
    logset = LogSet(spec, deliveries)
    _add_views(logset, view_of, send_ts)
    _add_metrics(logset, rng)
    return logset


def _add_views(logset: LogSet, view_of: np.ndarray, send_ts: np.ndarray) -> None:
    members = list(range(logset.spec.nodes))
    firsts = np.flatnonzero(np.r_[True, view_of[1:] != view_of[:-1]])
    for node in members:
        logset.views[node] = [
            {"schema": 1, "type": "view", "node": node, "ts": float(send_ts[i]) - 0.001,
             "view": int(view_of[i]), "members": members}
            for i in firsts
        ]


def _add_metrics(logset: LogSet, rng: np.random.Generator) -> None:
    spec = logset.spec
    end = max(float(d["ts"].iloc[-1]) for d in logset.deliveries.values())
    snaps = np.arange(spec.start + spec.metrics_every_s, end + spec.metrics_every_s,
                      spec.metrics_every_s)
    for node, d in logset.deliveries.items():
        delivered = np.cumsum(d["count"].to_numpy())
        own = (d["sender"] == node).to_numpy()
        sent = np.cumsum(np.where(own, d["count"].to_numpy(), 0))
        dts, sts = d["ts"].to_numpy(), d["send_ts"].to_numpy()
        retrans = np.cumsum(rng.integers(0, 20, len(snaps)))
        bad = np.cumsum(rng.integers(0, 3, len(snaps)))
        late = np.cumsum(rng.integers(0, 2, len(snaps)))
        raw = []
        for k, t in enumerate(snaps):
            i = int(np.searchsorted(dts, t, side="right"))
            j = int(np.searchsorted(sts, t, side="right"))
            raw.append({
                "messages_sent": int(sent[j - 1]) if j else 0,
                "messages_delivered": int(delivered[i - 1]) if i else 0,
                "retransmissions": int(retrans[k]), "bad_tag": int(bad[k]), "late": int(late[k]),
            })
        out = raw
        if spec.restart is not None and spec.restart[0] == node:
            k0 = spec.restart[1]  # the daemon restarted just after snapshot k0 - 1
            out = raw[:k0] + [{key: r[key] - raw[k0 - 1][key] for key in r} for r in raw[k0:]]
        logset.metrics[node] = [
            {"schema": 1, "type": "metrics", "node": node, "ts": float(t), "view": 1,
             "variant": spec.variant, "messages_sent": o["messages_sent"],
             "messages_delivered": o["messages_delivered"],
             "datagrams_sent": o["messages_sent"] + o["retransmissions"],
             "datagrams_received": o["messages_delivered"],
             "retransmissions": o["retransmissions"], "nacks_sent": o["retransmissions"] // 2,
             "drops": {"bad_tag": o["bad_tag"], "late": o["late"]}, "pending": 0,
             "backpressure_events": 0, "clients": 1, "engine": {"x": 1}}
            for t, o in zip(snaps, out, strict=True)
        ]


# ---------------------------------------------------------------- planted faults


def _ordered_rows(d: pd.DataFrame) -> np.ndarray:
    return np.flatnonzero(d["position"].notna().to_numpy())


def swap(logset: LogSet, node: int, k: int) -> tuple[dict, dict]:
    """Node delivers ordered vertices k and k+1 (k-th of its ordered ones) swapped.

    Returns the two records as now written (the first one is at the first divergent
    position)."""
    d = logset.deliveries[node]
    rows = _ordered_rows(d)
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


def duplicate(logset: LogSet, node: int, row: int) -> dict:
    """Node delivers the vertex of record ``row`` again after its last record."""
    d = logset.deliveries[node]
    rec = d.loc[row].copy()
    if pd.notna(rec["position"]):
        ordered = d[d["position"].notna()]
        last = ordered.iloc[-1]
        rec["position"] = int(last["position"]) + int(last["count"])
    rec["ts"] = float(d["ts"].iloc[-1]) + 0.001
    logset.deliveries[node] = pd.concat([d, rec.to_frame().T], ignore_index=True).astype(
        d.dtypes.to_dict())
    return rec.to_dict()


# ---------------------------------------------------------------- writing


def format_deliveries(d: pd.DataFrame) -> memoryview:
    """The JSON lines of these delivery records (``DeliveryLog`` field order), as bytes."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = pa.Table.from_pandas(d[DELIVERY_FIELDS], preserve_index=False)

    def s(name: str) -> pa.ChunkedArray:
        return pc.cast(t[name], pa.string())

    parts: list = [
        '{"schema":1,"type":"delivery","node":', s("node"), ',"view":', s("view"),
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
                    fh.write("".join(json.dumps(r) + "\n" for r in logset.views[node]).encode())
                fh.write(format_deliveries(chunk))
            if progress:
                progress(f"node {node}: wrote {name} ({len(chunk):,} records)")
        with open(ndir / "metrics.jsonl", "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in logset.metrics.get(node, []))
    return directory


def write_with_daemon_writer(logset: LogSet, directory: Path) -> Path:
    """Write the same records through ``daemon.logs.DeliveryLog`` (the real writer)."""
    from daemon.logs import DeliveryLog

    directory = Path(directory)
    for node, d in logset.deliveries.items():
        log = DeliveryLog(directory / f"node-{node}", node, rotate_bytes=1 << 16, keep=1000)
        for v in logset.views[node]:
            log.view(view=v["view"], members=v["members"], ts=v["ts"])
        for r in d.to_dict("records"):
            def opt(x: object) -> int | None:
                return None if pd.isna(x) else int(x)  # type: ignore[arg-type]
            log.delivery(
                view=int(r["view"]), variant=r["variant"], phi=float(r["phi"]),
                sender=int(r["sender"]), seq=int(r["seq"]), position=opt(r["position"]),
                count=int(r["count"]), nbytes=int(r["bytes"]), service=r["service"],
                activation=opt(r["activation"]), rule=r["rule"], ntail=opt(r["ntail"]),
                unseen=opt(r["unseen"]), nvt=opt(r["nvt"]), send_ts=float(r["send_ts"]),
                ts=float(r["ts"]), envelopes=int(r["envelopes"]),
            )
        for m in logset.metrics.get(node, []):
            log.metrics({k: v for k, v in m.items() if k not in ("schema", "type", "node")})
        log.close()
    return directory
