"""Draw ``study.png`` from this folder's ``study.json`` (the rows of
``python -m amcast.protocols.simulation.swap_node_study --json``).

Run from the repository's root: ``.venv/bin/python docs/perf/swap-node-study/plot.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

from amcast.plots import pyplot

HERE = Path(__file__).resolve().parent
MODES = ("toto", "arrow", "combining", "hybrid")
MARKERS = {"toto": "s", "arrow": "o", "combining": "^", "hybrid": "D"}


def main() -> None:
    rows = json.loads((HERE / "study.json").read_text())["rows"]
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for ax, who in zip(axes[:2], ("one", "all"), strict=True):
        for mode in MODES:
            shape = "-" if mode == "toto" else "balanced"
            pts = sorted((r["n"], r["p50_ms"], r["p99_ms"]) for r in rows
                         if r["mode"] == mode and r["shape"] == shape and r["senders"] == who)
            ns = [p[0] for p in pts]
            line, = ax.plot(ns, [p[1] for p in pts], marker=MARKERS[mode],
                            label=f"{mode} p50")
            ax.plot(ns, [p[2] for p in pts], marker=MARKERS[mode], linestyle=":",
                    color=line.get_color(), label=f"{mode} p99")
        ax.set_xscale("log", base=2)
        ax.set_xticks([4, 8, 16], ["4", "8", "16"])
        ax.set_xlabel("members n (balanced tree)")
        ax.set_ylabel("latency, virtual ms")
        ax.set_title("one sender (the highest id)" if who == "one" else "every member sends")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7, ncol=2)
    ax = axes[2]
    colors = {"arrow": "C1", "combining": "C2", "hybrid": "C3"}  # as in the other panels
    styles = {4: ":", 8: "--", 16: "-"}
    for mode in MODES[1:]:
        for n, style in styles.items():
            pts = sorted((r["diameter"], r["swap_sent"]) for r in rows
                         if r["mode"] == mode and r["senders"] == "all" and r["n"] == n)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=MARKERS[mode],
                    linestyle=style, color=colors[mode],
                    label=f"{mode}" if n == 16 else None)
    for n, style in styles.items():
        ax.plot([], [], linestyle=style, color="grey", label=f"n = {n}")
    ax.set_xlabel("tree diameter (star, balanced, path)")
    ax.set_ylabel("swap datagrams sent per message")
    ax.set_title("swap cost against stretch, every member sends")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(HERE / "study.png", dpi=110)


if __name__ == "__main__":
    main()
