"""Print the table of docs/swap.md ("Joins and leaves with real daemons") from this
folder's ``failover-MODE-nN.json`` (or those of the folder given).

Run from the repository's root: ``.venv/bin/python docs/perf/swap-failover-2core/table.py
[DIR]``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODES = ("toto", "arrow", "combining", "hybrid")
MEASURES = (
    ("kill -9 to the new view (last survivor)", "kill -9: new view"),
    ("delivery gap at a survivor (worst)", "kill -9: delivery gap"),
    ("restart: READY to the view with it", "join (restart): READY to the view"),
    ("SIGTERM to the view without it", "leave (SIGTERM): new view"),
)


def main(folder: Path = HERE) -> None:
    print("| N | ordering | " + " | ".join(f"{label}, p50 / max ms" for _, label in MEASURES)
          + " |")
    print("|" + "---|" * (2 + len(MEASURES)))
    for path in sorted(folder.glob("failover-*-n*.json"),
                       key=lambda p: (p.stem.split("-n")[-1], MODES.index(p.stem.split("-")[1]))):
        result = json.loads(path.read_text())
        for table in result["tables"]:
            n = table["title"].split(":")[0].removeprefix("N = ")
            rows = {r[0]: r for r in table["rows"]}
            cells = [f"{rows[m][2]:.0f} / {rows[m][4]:.0f} ({rows[m][1]})" for m, _ in MEASURES]
            print(f"| {n} | {result['ordering']} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
