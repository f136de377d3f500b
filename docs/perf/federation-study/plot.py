"""Draw ``federation-study.png`` from ``results.json`` (written by
``python -m amcast.protocols.federation.study --json``): the federation against
broadcast-and-filter, in the simulator over real Nodes. Three panels: latency against the
number of clusters at one share of global messages, capacity against the number of
clusters, and local-message latency against the share of global messages (the convoy).

Run from the repository's root: ``.venv/bin/python docs/perf/federation-study/plot.py
[FOLDER]`` (this folder by default). The PNG is written into the folder.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from amcast.plots import pyplot

HERE = Path(__file__).resolve().parent
FED, BF = "federation", "broadcast-and-filter"
STYLE = {FED: "-", BF: "--"}
COLOUR = {(FED, "local"): "C0", (FED, "global"): "C1", (BF, "local"): "C2",
          (BF, "global"): "C3"}
LATENCY_SHARE = 25


def _rows(folder: Path) -> list[dict]:  # type: ignore[type-arg]
    return json.loads((folder / "results.json").read_text())["rows"]


def _pick(rows: list[dict], system: str, share: int) -> list[dict]:  # type: ignore[type-arg]
    """One row per k: the share asked for, or g = 0 where k = 1 has no other."""
    out = {}
    for r in rows:
        wanted = r["system"] == system and r["global_pct"] in (share, 0)
        if wanted and (r["clusters"] not in out or r["global_pct"] == share):
            out[r["clusters"]] = r
    return [out[k] for k in sorted(out)]


def main(folder: Path = HERE) -> None:
    rows = _rows(folder)
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))

    ax = axes[0]
    for system in (FED, BF):
        picked = _pick(rows, system, LATENCY_SHARE)
        for kind, marker in (("local", "o"), ("global", "s")):
            pts = [(r["clusters"], r[kind]) for r in picked if r[kind]["count"]]
            ks = [k for k, _ in pts]
            colour = COLOUR[(system, kind)]
            ax.plot(ks, [lat["p50_ms"] for _, lat in pts], STYLE[system], marker=marker,
                    color=colour, label=f"{system}, {kind} p50")
            ax.plot(ks, [lat["p99_ms"] for _, lat in pts], ":", marker=marker,
                    color=colour, alpha=0.5, label=f"{system}, {kind} p99")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("clusters of 3 nodes (k)")
    ax.set_ylabel("latency to the last addressee, virtual ms")
    ax.set_title(f"latency, {LATENCY_SHARE}% global (1 ms links)")
    ax.legend(fontsize=7)

    ax = axes[1]
    for system in (FED, BF):
        # broadcast-and-filter's work does not depend on the share: one line
        for share, alpha in ((0, 1.0), (25, 0.7), (100, 0.4)) if system == FED else ((0, 1.0),):
            picked = _pick(rows, system, share)
            label = f"{system}, {share}% global" if system == FED else f"{system}, any share"
            ax.plot([r["clusters"] for r in picked],
                    [r["work"]["capacity_msgs_s"] for r in picked], STYLE[system],
                    marker="o", alpha=alpha, color="C0" if system == FED else "C2",
                    label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("clusters of 3 nodes (k)")
    ax.set_ylabel("messages/s at 10,000 datagrams/s per node")
    ax.set_title("capacity (per-node datagram budget)")
    ax.legend(fontsize=7)

    ax = axes[2]
    ks = sorted({r["clusters"] for r in rows if r["clusters"] > 1})
    for system in (FED, BF):
        for k in ks:
            pts = sorted((r["global_pct"], r["local"]) for r in rows
                         if r["system"] == system and r["clusters"] == k
                         and r["local"]["count"])
            ax.plot([g for g, _ in pts], [lat["p99_ms"] for _, lat in pts], STYLE[system],
                    marker="o", label=f"{system}, k = {k}")
    ax.set_xlabel("global messages, %")
    ax.set_ylabel("local messages' p99 latency, virtual ms")
    ax.set_title("local messages beside global ones")
    ax.legend(fontsize=7)

    for ax in axes:
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(folder / "federation-study.png", dpi=110)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
