"""The daemons' delivery logs (docs/log-schema.md) read into the simulator's terms.

The simulator's checkers (``amcast.protocols.simulation.checkers``) judge *processes*
(``Proc``: a node's life), the views each installed and what each delivered; the logs
say the same of real daemons: a life is ``(node, incarnation)``, a ``view`` record with
``primary`` true is an installed view, a ``delivery`` record a batch of ``count``
messages at positions ``position ..``. The logs carry no payloads, so a message is
named by its log identity ``view:sender:seq:i`` (unique within a view, which is all the
order and agreement checks compare), as the Spark audit does.

Lives are numbered per node in incarnation order. A daemon that was not one of the
cluster's own (an impostor run by the nemesis with a node's id) writes its own log
directory; its lives are read as further lives of that node and named in ``sources``,
so a violation involving one says so.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from amcast.protocols.simulation.checkers import Delivery, InstalledView, Proc
from amcast.protocols.vocabulary import ServiceLevel


@dataclass
class Lives:
    """Every life found in a set of logs, in the checkers' shapes."""

    deliveries: dict[Proc, list[Delivery]] = field(default_factory=dict)
    views: dict[Proc, list[InstalledView]] = field(default_factory=dict)
    gaps: dict[Proc, list[tuple[int, tuple[int, int] | None, tuple[int, int] | None]]] = \
        field(default_factory=dict)
    """Per life: (view, the gap notice's ``after``, the last ordered message the life
    logged before it)."""
    lost_views: dict[Proc, set[int]] = field(default_factory=dict)
    """Views whose records a life may have lost (a ``lost`` record names them)."""
    sources: dict[Proc, str] = field(default_factory=dict)
    potential: tuple[int, ...] = ()
    unreadable: int = 0


def log_files(directory: Path) -> list[Path]:
    """``delivery.jsonl`` and ``view.jsonl`` with their rotations, oldest first."""
    out: list[Path] = []
    for base in ("delivery.jsonl", "view.jsonl"):
        rotated = sorted(directory.glob(base + ".*"), key=lambda p: -int(p.suffix[1:])
                         if p.suffix[1:].isdigit() else 0)
        out += rotated
        if (directory / base).exists():
            out.append(directory / base)
    return out


def read_records(directories: dict[str, Path]) -> list[tuple[str, dict[str, Any]]]:
    """(source, record) for every JSON object line of every log directory (a line cut
    short by a kill is skipped)."""
    out = []
    for source, d in directories.items():
        for path in log_files(d):
            for line in path.read_text(errors="replace").splitlines():
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if isinstance(rec, dict) and "type" in rec:
                    out.append((source, rec))
    return out


def lives(records: list[tuple[str, dict[str, Any]]]) -> Lives:
    """Group records by life, numbered per node in incarnation order (module docstring).
    Within a life the file order is the order the daemon wrote them."""
    by_life: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    source_of: dict[tuple[int, int], str] = {}
    for source, rec in records:
        if "node" not in rec:
            continue
        key = (int(rec["node"]), int(rec.get("incarnation") or 0))
        by_life[key].append(rec)
        source_of.setdefault(key, source)
    out = Lives()
    potential: set[int] = set()
    index: dict[int, int] = defaultdict(int)
    for node, inc in sorted(by_life):
        proc = Proc(node, index[node])
        index[node] += 1
        out.sources[proc] = source_of[(node, inc)]
        dels: list[Delivery] = []
        views: list[InstalledView] = []
        gaps = []
        lost: set[int] = set()
        last: tuple[int, int] | None = None
        for rec in by_life[(node, inc)]:
            kind = rec["type"]
            if kind == "start":
                potential.update(int(m) for m in rec.get("members") or ())
            elif kind == "view" and rec.get("primary", True):
                views.append(InstalledView(float(rec["ts"]), int(rec["view"]),
                                           tuple(rec["members"]), int(rec.get("previous") or 0),
                                           0))
            elif kind == "gap":
                after = rec.get("after")
                gaps.append((int(rec["view"]), None if after is None else tuple(after), last))
            elif kind == "lost":
                lost.update(int(v) for v in rec.get("views") or ())
            elif kind == "delivery":
                service = ServiceLevel(rec["service"])
                pos = rec.get("position")
                view, sender, seq = int(rec["view"]), int(rec["sender"]), int(rec["seq"])
                for i in range(int(rec["count"])):
                    dels.append(Delivery(sender, f"{view}:{sender}:{seq}:{i}".encode(),
                                         service, None if pos is None else int(pos) + i,
                                         float(rec["ts"]), view))
                if pos is not None:
                    last = (view, int(pos) + int(rec["count"]) - 1)
        out.deliveries[proc] = dels
        out.views[proc] = views
        out.gaps[proc] = gaps
        if lost:
            out.lost_views[proc] = lost
    out.potential = tuple(sorted(potential))
    n = len(out.potential)
    for proc, views in out.views.items():
        out.views[proc] = [InstalledView(v.time, v.view, v.members, v.previous, n)
                           for v in views]
    return out


def read_lives(directories: dict[str, Path]) -> Lives:
    return lives(read_records(directories))
