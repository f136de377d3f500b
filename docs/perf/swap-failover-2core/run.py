"""Run ``amcast bench failover`` once per ordering (toto, arrow, combining, hybrid) and
write ``failover-MODE-nN.json`` here: kill -9, restart (a join) and SIGTERM (a graceful
leave) of random daemons under load, with ``protocol.ordering`` set for every daemon
(the benchmark has no ``--ordering``: its ``LocalCluster`` is given the setting).

Run from the repository's root: ``nice .venv/bin/python docs/perf/swap-failover-2core/run.py
[--nodes 4 --kills 3 --leaves 3] [--out DIR]`` (default: this folder); ``table.py [DIR]``
prints the table of docs/swap.md.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
MODES = ("toto", "arrow", "combining", "hybrid")


def main() -> None:
    sys.path.insert(0, str(ROOT))  # the checkout's bench/
    from amcast.localcluster import LocalCluster
    from bench import failover

    p = argparse.ArgumentParser()
    failover.add_arguments(p)
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--out", type=Path, default=HERE, help="folder of the results")
    args = p.parse_args(sys.argv[1:] or ["--nodes", "4", "--kills", "3", "--leaves", "3",
                                         "--seed", "1"])
    for mode in args.modes.split(","):
        failover.LocalCluster = functools.partial(  # type: ignore[attr-defined]
            LocalCluster, protocol={"ordering": mode})
        print(f"[{mode}]", file=sys.stderr, flush=True)
        result = failover.run(args)
        result["ordering"] = mode
        (args.out / f"failover-{mode}-n{args.nodes.replace(',', '-')}.json").write_text(
            json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
