"""Draw ``latency.png`` from this folder's W1 latency results (the peer harness's jsonl).

Run from the repository's root: ``.venv/bin/python docs/perf/w1-swap/plot.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

from amcast.plots import pyplot

HERE = Path(__file__).resolve().parent
SERIES = (
    ("amcast-toto", "amcast, ToTo"),
    ("amcast-arrow", "amcast, arrow"),
    ("corosync-cpg", "Corosync CPG"),
    ("jgroups-seq", "JGroups SEQUENCER"),
)


def _sender(path: Path) -> dict[str, float]:
    record = json.loads(path.read_text().splitlines()[0])
    sender = next(m for m in record["members"] if m.get("sender"))
    return {"p50": sender["lat_p50_ms"], "p99": sender["lat_p99_ms"]}


def main() -> None:
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6), sharey=True)
    for ax, n in zip(axes, (4, 8), strict=True):
        names, p50, p99 = [], [], []
        for prefix, label in SERIES:
            path = next(HERE.glob(f"{prefix}-n{n}-lat*.jsonl"))
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
    axes[0].set_ylabel("latency, ms (log scale)")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(HERE / "latency.png", dpi=110)


if __name__ == "__main__":
    main()
