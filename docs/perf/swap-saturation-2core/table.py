"""Print the saturation table of docs/swap.md from this folder's raw results (the
``amcast bench cluster --json`` output of each run, ``sat-MODE-nN-rROUND.json``).

Run from the repository's root: ``.venv/bin/python docs/perf/swap-saturation-2core/table.py``.
Each figure is the median over the rounds, with the smallest and largest in brackets.
``table.py with-delivery-wait`` prints the one round run before a member's next swap
stopped waiting for its previous vertex's delivery.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODES = ("toto", "arrow", "combining", "hybrid")


def figures(path: Path) -> dict[str, float]:
    run = json.loads(path.read_text())["runs"][0]
    every, one = run["throughput"]["window"], run["latency"]["window"]
    report = run["latency"]["report"]
    return {
        "all msgs/s": min(every["rates"]),
        "all CPU us/msg": 1e6 * every["cpu_per_msg_s"],
        "all swap sent/msg": every["sent_per_msg"]["swap"],
        "one msgs/s": min(one["rates"]),
        "one p50 ms": 1000 * report["latency_p50_s"],
        "one CPU us/msg": 1e6 * one["cpu_per_msg_s"],
    }


def cell(values: list[float], digits: int) -> str:
    if not values:
        return "-"
    med = statistics.median(values)
    if len(values) == 1:
        return f"{med:,.{digits}f}"
    return f"{med:,.{digits}f} ({min(values):,.{digits}f}-{max(values):,.{digits}f})"


def main(folder: Path = HERE) -> None:
    columns = ("all msgs/s", "all CPU us/msg", "all swap sent/msg", "one msgs/s",
               "one p50 ms", "one CPU us/msg")
    digits = {"all swap sent/msg": 4, "one p50 ms": 0, "all msgs/s": 0, "one msgs/s": 0}
    print("| N | ordering | runs | every member sends: msgs/s (slowest node) | CPU us/msg "
          "| swap datagrams sent/msg | one sender: msgs/s | p50 ms (queueing) | CPU us/msg |")
    print("|" + "---|" * 9)
    for n in (4, 8):
        for mode in MODES:
            runs = [figures(p) for p in sorted(folder.glob(f"sat-{mode}-n{n}-r*.json"))]
            cells = [cell([r[c] for r in runs], digits.get(c, 2)) for c in columns]
            print(f"| {n} | {mode} | {len(runs)} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
