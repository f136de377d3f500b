"""``amcast bench engine``: insertions/s and deliveries/s of the total-order engine alone.

For each group size, a seeded simulation produces the causal release order one
processor sees with every processor sending (a fast bus, so the DAG is narrow). Only
the engine's ``insert`` calls are timed, best of ``--repeat`` runs on one core; the
simulation that made the input is not. The cost per insertion at n = 64 over n = 8 is
the scaling figure (target: at most 8x).

``--core`` times the Python engine (``pure``), the Rust one (``native``,
``amcast_native.TotalOrderEngine``, docs/native.md) or both on the same trace (``both``,
the default; ``pure`` alone where the extension is not built), with their ratio.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from amcast.protocols.errors import ConfigurationError
from amcast.protocols.ordering import CausalMessage, OrderingConfig, OrderingRule
from amcast.protocols.ordering.native import engine_class
from amcast.protocols.simulation.causal_broadcast import Topology, Workload, simulate

from amcast.argtypes import whole

from .options import group_sizes

NAME = "engine"
HELP = "insertions/s and deliveries/s of the total-order engine alone"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sizes", default="4,8,16,64", help="group sizes, comma-separated")
    parser.add_argument(
        "--rules", default="stoto,gltoto,lex", help="rules to measure, comma-separated"
    )
    parser.add_argument("--messages", type=whole(1), default=20000, help="data messages per trace")
    parser.add_argument("--repeat", type=whole(1), default=3, help="runs per figure; best is kept")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--core", choices=("pure", "native", "both"), default="both",
                        help="which engine to time: the Python one, the Rust one or both "
                        "(both: pure alone where amcast_native is not built)")


def _time_engine(n: int, rule: OrderingRule, messages: list[CausalMessage],
                 core: str) -> tuple[float, int]:
    engine = engine_class(core, n)(range(n), OrderingConfig(rule=rule))
    insert = engine.insert
    delivered = 0
    start = time.perf_counter()
    for m in messages:
        delivered += len(insert(m))
    return time.perf_counter() - start, delivered


def run(args: argparse.Namespace) -> dict[str, Any]:
    sizes = group_sizes(args.sizes, "--sizes", minimum=2)
    try:
        rules = [OrderingRule(r.strip()) for r in args.rules.split(",") if r.strip()]
        if not rules:
            raise ValueError(args.rules)
    except ValueError:
        raise ConfigurationError(f"--rules {args.rules!r}: want some of "
                                 f"{', '.join(r.value for r in OrderingRule)}") from None
    quiet = getattr(args, "json", False)
    core = getattr(args, "core", "both")
    notes = []
    if core == "both":
        try:
            native_built = engine_class("native").__module__ == "amcast_native"
        except ImportError:
            native_built = False
        cores = ["pure", "native"] if native_built else ["pure"]
        if not native_built:
            notes.append("amcast_native is not built (make rust): the pure engine alone")
    else:
        cores = [core]
    rows = []
    per_insert: dict[tuple[OrderingRule, int], float] = {}
    per_core: dict[tuple[str, OrderingRule, int], float] = {}
    for n in sizes:
        rate = 50.0
        duration = args.messages / (n * rate)
        if not quiet:
            print(f"... n={n}: simulating {args.messages} messages", file=sys.stderr, flush=True)
        trace = simulate(
            Workload(n=n, rate=rate, duration=duration),
            Topology(base=0.00025, jitter=0.00025),
            args.seed,
        )
        messages = [m for _, m in trace.releases[0]]
        for rule in rules:
            for which in cores:
                if not quiet:
                    print(f"... n={n}: timing {rule.value} ({which})", file=sys.stderr,
                          flush=True)
                best, delivered = min(
                    (_time_engine(n, rule, messages, which) for _ in range(args.repeat)),
                    key=lambda r: r[0],
                )
                engine = engine_class(which, n)
                ran = "native" if engine.__module__ == "amcast_native" else "pure"
                per_core[(ran, rule, n)] = best / len(messages)
                if which == cores[0]:
                    per_insert[(rule, n)] = best / len(messages)
                rows.append(
                    [
                        n,
                        rule.value,
                        ran,
                        len(messages),
                        round(len(messages) / best),
                        round(delivered / best),
                        round(1e6 * best / len(messages), 2),
                    ]
                )
    figures: dict[str, Any] = {}
    for rule in rules:
        if (rule, 8) in per_insert:
            figures[f"{rule.value}: insertions/s at n=8 (target >= 50,000)"] = round(
                1 / per_insert[(rule, 8)]
            )
        if (rule, 8) in per_insert and (rule, 64) in per_insert:
            figures[f"{rule.value}: cost per insertion n=64 / n=8 (target <= 8)"] = round(
                per_insert[(rule, 64)] / per_insert[(rule, 8)], 2
            )
        if len(cores) > 1 and ("native", rule, 8) in per_core:
            figures[f"{rule.value}: native insertions/s at n=8"] = round(
                1 / per_core[("native", rule, 8)]
            )
        for n in sizes:
            if ("pure", rule, n) in per_core and ("native", rule, n) in per_core:
                figures[f"{rule.value}: native speed-up over pure at n={n}"] = round(
                    per_core[("pure", rule, n)] / per_core[("native", rule, n)], 2
                )
    return {
        "title": "amcast bench engine: the total-order engine alone, one core",
        "tables": [
            {
                "title": f"best of {args.repeat} runs, processor 0's causal release order",
                "columns": ["n", "rule", "core", "insertions", "insertions/s", "deliveries/s",
                            "us/insert"],
                "rows": rows,
            }
        ],
        "figures": figures,
        "notes": [
            "every processor sends 50 msgs/s on a bus with 0.5 ms mean delay; insertions "
            "include ack-only messages; deliveries count data messages",
            *notes,
        ],
    }
