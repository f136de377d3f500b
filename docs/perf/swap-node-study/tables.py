"""Print the two tables of docs/swap.md ("Beside ToTo in the Node") from ``study.json``.

Run from the repository's root: ``.venv/bin/python docs/perf/swap-node-study/tables.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
LATENCY_ROWS = (("toto", "-"), ("arrow", "balanced"), ("combining", "balanced"),
                ("hybrid", "balanced"), ("arrow", "star"), ("combining", "star"),
                ("arrow", "path"), ("combining", "path"), ("hybrid", "path"))


def main() -> None:
    rows = json.loads((HERE / "study.json").read_text())["rows"]
    by = {(r["mode"], r["shape"], r["n"], r["senders"]): r for r in rows}
    print("| senders | mode (tree) | n = 4: p50 / p99 ms | n = 8 | n = 16 "
          "| swap datagrams sent/msg, n = 4 / 8 / 16 | other sent/msg, n = 16 |")
    print("|---|---|---|---|---|---|---|")
    for who in ("one", "all"):
        for mode, shape in LATENCY_ROWS:
            rs = [by[(mode, shape, n, who)] for n in (4, 8, 16)]
            tree = "" if mode == "toto" else f" ({shape})"
            lat = " | ".join(f"{r['p50_ms']:.2f} / {r['p99_ms']:.2f}" for r in rs)
            swap = " / ".join(f"{r['swap_sent']:.2f}" for r in rs)
            print(f"| {who} | {mode}{tree} | {lat} | {swap} | {rs[2]['other_sent']:.2f} |")
    print()
    print("| tree (diameter at n = 16) | arrow | combining | hybrid |")
    print("|---|---|---|---|")
    for shape in ("star", "balanced", "path"):
        cells = []
        for mode in ("arrow", "combining", "hybrid"):
            r = by[(mode, shape, 16, "all")]
            cells.append(f"{r['swap_sent']:.2f} sent, {r['swap_received']:.0f} read, "
                         f"{r['mean_hops']:.2f} hops (max {r['max_hops']})")
        diameter = by[("arrow", shape, 16, "all")]["diameter"]
        print(f"| {shape} ({diameter}) | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
