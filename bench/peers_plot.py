"""``amcast bench plot-peers``: workload W1 against N, amcast beside its peers, as a chart.

Reads a run directory of the peer harness (``../shared/peers/results/raw/<run>``): every
``*.jsonl`` there is one configuration (``corosync-cpg-n4-tput-norr.jsonl``), one JSON
line per repetition with ``system``, ``extra``, ``n``, ``mode`` (``tput`` or ``lat``),
``duration``, ``ok`` and ``members`` (each with ``deliver_rate``, ``cpu_window_s``,
``server_cpu_window_s`` where the member has a daemon of its own, ``sender`` and, in
latency runs, ``lat_p50_ms`` / ``lat_p99_ms`` at the sender). Failed repetitions
(``ok`` false) are left out, as the harness's own ``summarize.py`` does.

Per repetition, as the harness derives them: *ordered msgs/s* = mean over members of
``deliver_rate``; latency p50 / p99 = the sender's; *CPU µs per ordered message* = CPU
seconds of all members and their daemons in the window / (ordered msgs/s x window) x 1e6.
Each figure is the median over the repetitions of one (system, variant, N, mode).

A series is one system with one variant: the record's ``system`` (``amcast``,
``jgroups-seq``, ``corosync-cpg``, ...) and its ``extra`` flags (``norr``, ``nobundle``,
``crypto,norr``; none = the stock configuration), so ``corosync-cpg-n4-tput`` and
``corosync-cpg-n4-tput-norr`` are two lines, "Corosync CPG" and "Corosync CPG (norr)",
and a series holds both its throughput and its latency runs.

The chart (``bench.charts.against_n``) has three panels against N: ordered msgs/s (log
scale), sender latency p50 (marker) with p99 (top of the bar), and CPU µs per ordered
message at saturation. The derived figures are written beside it (``--out x.png`` ->
``x.json``), so ``--from-json x.json --out y.png`` remakes the chart without the raw run.

Exit statuses: 0 chart written; 1 the run directory is missing, unreadable, holds no
``*.jsonl``, a line that is not a harness record, or no successful repetition (or a
``--from-json`` file that is not this command's figures, or a file that cannot be
written); 2 usage (neither or both of RUN_DIR and ``--from-json``) or no matplotlib.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from amcast.protocols.errors import ConfigurationError

from amcast.commands._common import CommandFailed

from . import charts

NAME = "plot-peers"
HELP = "chart a peer-harness run (W1: amcast, JGroups, Corosync) against N"
DESCRIPTION = __doc__
FORMAT = "amcast-bench-plot-peers/1"
"""The ``format`` of the figures file; ``--from-json`` accepts only this one."""
DEFAULT_PNG = "w1-vs-n.png"
SYSTEMS: dict[str, str] = {
    "amcast": "amcast",
    "jgroups-seq": "JGroups SEQUENCER",
    "jgroups-fifo": "JGroups FIFO only (not total order)",
    "corosync-cpg": "Corosync CPG",
    "pysyncobj": "PySyncObj (Raft)",
    "redis": "Redis Streams",
}
"""Legend names of the harness's systems, in legend order; others keep their own name."""
FIGURES = ("ordered_msgs_s", "lat_p50_ms", "lat_p99_ms", "cpu_us_per_msg")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", nargs="?", metavar="RUN_DIR",
                        help="a peer-harness run directory (results/raw/<run>, *.jsonl)")
    parser.add_argument("--out", metavar="PNG",
                        help=f"the chart (default: RUN_DIR/{DEFAULT_PNG}, or the --from-json "
                             "file with .png); the figures go beside it as .json")
    parser.add_argument("--from-json", metavar="FILE",
                        help="remake the chart from a figures file written earlier")
    parser.add_argument("--systems", metavar="LIST",
                        help="only these systems, comma-separated (e.g. "
                             "amcast,jgroups-seq,corosync-cpg; default: every one in the run)")


def per_rep(rec: Mapping[str, Any]) -> dict[str, float | None]:
    """One repetition's figures, derived as the harness's ``summarize.py`` does."""
    members = rec["members"]
    duration = float(rec["duration"])
    ordered = statistics.mean(float(m["deliver_rate"]) for m in members)
    cpu = sum(float(m["cpu_window_s"]) + float(m.get("server_cpu_window_s") or 0)
              for m in members)
    timed = [m for m in members if "lat_p50_ms" in m]
    timed.sort(key=lambda m: not m.get("sender"))  # the sender's, where it says so
    return {
        "ordered_msgs_s": ordered,
        "lat_p50_ms": float(timed[0]["lat_p50_ms"]) if timed else None,
        "lat_p99_ms": float(timed[0]["lat_p99_ms"]) if timed else None,
        "cpu_us_per_msg": cpu / (ordered * duration) * 1e6 if ordered else None,
    }


def _median(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def label(system: str, variant: str) -> str:
    name = SYSTEMS.get(system, system)
    return f"{name} ({variant.replace(',', ', ')})" if variant else name


def _records(path: Path) -> list[tuple[int, dict[str, Any]]]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = getattr(exc, "strerror", None) or exc
        raise CommandFailed(f"cannot read {path}: {why}") from None
    out = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CommandFailed(f"{path}:{lineno}: not a JSON line ({exc.msg})") from None
        if not isinstance(rec, dict):
            raise CommandFailed(f"{path}:{lineno}: not a peer-harness record (not an object)")
        out.append((lineno, rec))
    return out


def read_run(run_dir: Path, systems: set[str] | None = None) -> dict[str, Any]:
    """The derived figures of a harness run directory (the figures file's content)."""
    if not run_dir.is_dir():
        raise CommandFailed(f"{run_dir}: not a directory (want a peer-harness run, "
                            "results/raw/<run>)")
    try:
        paths = sorted(run_dir.glob("*.jsonl"))
    except OSError as exc:
        raise CommandFailed(f"cannot list {run_dir}: {exc.strerror or exc}") from None
    if not paths:
        raise CommandFailed(f"{run_dir}: no *.jsonl (not a peer-harness run directory, "
                            "results/raw/<run>)")
    # (system, variant) -> (n, mode) -> {"configs", "reps", "failed"}
    groups: dict[tuple[str, str], dict[tuple[int, str], dict[str, Any]]] = {}
    for path in paths:
        for lineno, rec in _records(path):
            try:
                system, variant = str(rec["system"]), str(rec.get("extra") or "")
                n, mode = int(rec["n"]), str(rec["mode"])
                if systems is not None and system not in systems:
                    continue
                cell = groups.setdefault((system, variant), {}).setdefault(
                    (n, mode), {"configs": [], "reps": [], "failed": 0})
                if path.stem not in cell["configs"]:
                    cell["configs"].append(path.stem)
                if rec.get("ok"):
                    cell["reps"].append(per_rep(rec))
                else:
                    cell["failed"] += 1
            except KeyError as exc:
                raise CommandFailed(f"{path}:{lineno}: not a peer-harness record "
                                    f"(no {exc.args[0]!r})") from None
            except (TypeError, ValueError, ZeroDivisionError, statistics.StatisticsError):
                raise CommandFailed(f"{path}:{lineno}: not a peer-harness record "
                                    "(a field of the wrong kind)") from None
    if not any(cell["reps"] for cells in groups.values() for cell in cells.values()):
        which = f" of {', '.join(sorted(systems))}" if systems is not None else ""
        raise CommandFailed(f"{run_dir}: no successful repetition{which} in "
                            f"{len(paths)} *.jsonl file(s); nothing to plot")
    order = list(SYSTEMS)
    series = []
    for (system, variant), cells in sorted(
        groups.items(),
        key=lambda kv: (order.index(kv[0][0]) if kv[0][0] in order else len(order), kv[0]),
    ):
        points = []
        for (n, mode), cell in sorted(cells.items()):
            point: dict[str, Any] = {"n": n, "mode": mode, "configs": cell["configs"],
                                     "reps": len(cell["reps"]), "failed": cell["failed"]}
            for key in FIGURES:
                point[key] = _median(rep[key] for rep in cell["reps"])
            points.append(point)
        series.append({"system": system, "variant": variant,
                       "label": label(system, variant), "points": points})
    return {"format": FORMAT, "source": str(run_dir), "series": series}


def read_figures(path: Path) -> dict[str, Any]:
    """A figures file written by this command (``--from-json``)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CommandFailed(f"cannot read {path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise CommandFailed(f"{path}: not JSON (want a figures file of "
                            "amcast bench plot-peers)") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise CommandFailed(f"{path}: not a figures file of amcast bench plot-peers "
                            f"(format {FORMAT!r})")
    return data


def _tables(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    tput, lat = [], []
    for s in data["series"]:
        for p in s["points"]:
            reps = f"{p['reps']}" + (f" (+{p['failed']} failed)" if p["failed"] else "")
            if p["mode"] == "tput":
                tput.append([s["label"], p["n"], p["ordered_msgs_s"], p["cpu_us_per_msg"], reps])
            else:
                lat.append([s["label"], p["n"], p["lat_p50_ms"], p["lat_p99_ms"],
                            p["ordered_msgs_s"], reps])
    return [
        {"title": "throughput (closed loop, every member sending; median over reps)",
         "columns": ["series", "N", "ordered msgs/s", "CPU us/msg", "reps"], "rows": tput},
        {"title": "latency (one sender at a fixed rate; median over reps)",
         "columns": ["series", "N", "p50 ms", "p99 ms", "ordered msgs/s", "reps"], "rows": lat},
    ]


def run(args: argparse.Namespace) -> dict[str, Any]:
    if (args.run_dir is None) == (args.from_json is None):
        raise ConfigurationError("plot-peers wants a RUN_DIR or --from-json FILE (one of them)")
    systems = {s.strip() for s in args.systems.split(",") if s.strip()} if args.systems else None
    if args.from_json is not None:
        source = Path(args.from_json)
        data = read_figures(source)
        if systems is not None:
            data = {**data, "series": [s for s in data["series"] if s["system"] in systems]}
            if not data["series"]:
                raise CommandFailed(f"{source}: no series of {', '.join(sorted(systems))}")
        png = Path(args.out) if args.out else source.with_suffix(".png")
    else:
        source = Path(args.run_dir)
        data = read_run(source, systems)
        png = Path(args.out) if args.out else source / DEFAULT_PNG
    figures = png.with_suffix(".json")
    charts.against_n(data["series"], png,
                    title=f"W1 against N ({Path(str(data.get('source', source))).name})")
    if args.from_json is None or figures.resolve() != source.resolve():
        figures.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    if args.json:
        return {**data, "plot": str(png), "figures_file": str(figures)}
    return {"title": f"W1 against N, from {source}", "tables": _tables(data),
            "figures": {"plot": str(png), "figures file": str(figures)}}
