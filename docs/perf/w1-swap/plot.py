"""Draw ``latency.png`` from a folder of W1 latency results (the peer harness's jsonl):
ToTo, the arrow, Corosync and JGroups, p50 and p99 of the sender, one panel per N.

Run from the repository's root: ``.venv/bin/python docs/perf/w1-swap/plot.py [FOLDER]``
(this folder by default; the 16-core run is ``docs/perf/w1-16core-20261127T2049Z``). The
PNG is written into the folder.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from amcast.plots import pyplot

HERE = Path(__file__).resolve().parent
# file names of both layouts: amcast-toto-n4-lat.jsonl (here) and amcast-n4-lat.jsonl,
# amcast-n4-lat-arrow.jsonl (the device runs)
SERIES = (
    (r"amcast-(toto-)?n{n}-lat\.jsonl", "amcast, ToTo"),
    (r"amcast-(arrow-n{n}-lat|n{n}-lat-arrow)\.jsonl", "amcast, arrow"),
    (r"corosync-cpg-n{n}-lat.*\.jsonl", "Corosync CPG"),
    (r"jgroups-seq-n{n}-lat.*\.jsonl", "JGroups SEQUENCER"),
)


def _sender(path: Path) -> dict[str, float]:
    record = json.loads(path.read_text().splitlines()[0])
    sender = next(m for m in record["members"] if m.get("sender"))
    return {"p50": sender["lat_p50_ms"], "p99": sender["lat_p99_ms"]}


def _find(folder: Path, pattern: str, n: int) -> Path | None:
    rx = re.compile(pattern.format(n=n))
    return next((p for p in sorted(folder.iterdir()) if rx.fullmatch(p.name)), None)


def main(folder: Path = HERE) -> None:
    ns = [n for n in (4, 8, 16) if _find(folder, SERIES[0][0], n) is not None]
    plt = pyplot()
    fig, axes = plt.subplots(1, len(ns), figsize=(4.5 * len(ns), 3.6), sharey=True,
                             squeeze=False)
    for ax, n in zip(axes[0], ns, strict=True):
        names, p50, p99 = [], [], []
        for pattern, label in SERIES:
            path = _find(folder, pattern, n)
            if path is None:
                continue
            figures = _sender(path)
            names.append(label)
            p50.append(figures["p50"])
            p99.append(figures["p99"])
        xs = range(len(names))
        ax.bar([x - 0.2 for x in xs], p50, width=0.4, label="p50")
        ax.bar([x + 0.2 for x in xs], p99, width=0.4, label="p99")
        ax.set_xticks(list(xs), names, rotation=20, ha="right", fontsize=8)
        ax.set_yscale("log")
        ax.set_title(f"N = {n}, one sender at 1,000 msgs/s")
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("latency, ms (log scale)")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(folder / "latency.png", dpi=110)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
