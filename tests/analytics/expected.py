"""The figures of a log directory computed by hand, in pure Python, from the JSON lines.

The definitions are the job's (``amcast.analytics.figures``): window ``floor(ts / W) * W``;
latency per delivered message, nearest-rank percentiles (the smallest value with at
least p of the values at or below it); Ntail averaged over ordered vertices; rule shares
over vertices; metrics deltas between consecutive snapshots of a node (first one is the
baseline; a new incarnation or a decrease of any counter is a restart and the delta is the
new value).
"""

from __future__ import annotations

import itertools
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any


def records(logdir: Path) -> list[dict[str, Any]]:
    out = []
    for path in sorted(logdir.rglob("*.jsonl*")):
        out += [json.loads(line) for line in path.read_text().splitlines() if line]
    return out


def window(ts: float, w: float) -> float:
    return float(math.floor(ts / w) * w)


def nearest_rank(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[max(1, math.ceil(p * len(s))) - 1]


def by_group(recs: list[dict[str, Any]], w: float) -> dict[tuple, list[dict[str, Any]]]:
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for r in recs:
        if r["type"] == "delivery":
            groups[(r["node"], r["variant"], window(r["ts"], w))].append(r)
    return groups


def throughput(recs: list[dict[str, Any]], w: float) -> dict[tuple, tuple[int, int, float]]:
    return {k: (len(g), sum(r["count"] for r in g), sum(r["count"] for r in g) / w)
            for k, g in by_group(recs, w).items()}


def latency(recs: list[dict[str, Any]], w: float) -> dict[tuple, tuple[float, ...]]:
    out = {}
    for k, g in by_group(recs, w).items():
        lat = [(r["ts"] - r["send_ts"]) * 1000.0 for r in g for _ in range(r["count"])]
        out[k] = (len(lat), nearest_rank(lat, 0.5), nearest_rank(lat, 0.9),
                  nearest_rank(lat, 0.99), max(lat))
    return out


def ntail(recs: list[dict[str, Any]], w: float) -> dict[tuple, float]:
    out = {}
    for k, g in by_group(recs, w).items():
        vals = [r["ntail"] for r in g if r["ntail"] is not None]
        if vals:
            out[k] = sum(vals) / len(vals)
    return out


def rules(recs: list[dict[str, Any]], w: float) -> dict[tuple, tuple[int, int, float]]:
    out = {}
    for k, g in by_group(recs, w).items():
        for rule in {r["rule"] for r in g}:
            sel = [r for r in g if r["rule"] == rule]
            out[(*k, rule)] = (len(sel), sum(r["count"] for r in sel), len(sel) / len(g))
    return out


COUNTERS = ("messages_sent", "messages_delivered", "retransmissions", "nacks_sent", "drops")


def overhead(recs: list[dict[str, Any]], w: float) -> dict[tuple, dict[str, int]]:
    per_node: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in recs:
        if r["type"] == "metrics":
            per_node[r["node"]].append({**r, "drops": sum(r["drops"].values())})
    out: dict[tuple, dict[str, int]] = {}
    for node, snaps in per_node.items():
        snaps.sort(key=lambda s: s["ts"])
        for prev, cur in itertools.pairwise(snaps):
            restart = (cur["incarnation"] != prev["incarnation"]
                       or any(cur[c] < prev[c] for c in COUNTERS))
            key = (node, cur["variant"], window(cur["ts"], w))
            acc = out.setdefault(key, dict.fromkeys((*COUNTERS, "restarts"), 0))
            acc["restarts"] += int(restart)
            for c in COUNTERS:
                acc[c] += cur[c] if restart else cur[c] - prev[c]
    return out
