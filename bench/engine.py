"""``amcast bench engine``: insertions/s and deliveries/s of the total-order engine alone.

For each group size, a seeded simulation produces the causal release order one
processor sees with every processor sending (a fast bus, so the DAG is narrow). Only
the engine's ``insert`` calls are timed, best of ``--repeat`` runs on one core; the
simulation that made the input is not. The cost per insertion at n = 64 over n = 8 is
the scaling figure (target: at most 8x).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from amcast.protocols.errors import ConfigurationError
from amcast.protocols.ordering import CausalMessage, OrderingConfig, OrderingRule, TotalOrderEngine
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


def _time_engine(n: int, rule: OrderingRule, messages: list[CausalMessage]) -> tuple[float, int]:
    engine = TotalOrderEngine(range(n), OrderingConfig(rule=rule))
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
    rows = []
    per_insert: dict[tuple[OrderingRule, int], float] = {}
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
            if not quiet:
                print(f"... n={n}: timing {rule.value}", file=sys.stderr, flush=True)
            best, delivered = min(
                (_time_engine(n, rule, messages) for _ in range(args.repeat)), key=lambda r: r[0]
            )
            per_insert[(rule, n)] = best / len(messages)
            rows.append(
                [
                    n,
                    rule.value,
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
    return {
        "title": "amcast bench engine: the total-order engine alone, one core",
        "tables": [
            {
                "title": f"best of {args.repeat} runs, processor 0's causal release order",
                "columns": ["n", "rule", "insertions", "insertions/s", "deliveries/s", "us/insert"],
                "rows": rows,
            }
        ],
        "figures": figures,
        "notes": [
            "every processor sends 50 msgs/s on a bus with 0.5 ms mean delay; insertions "
            "include ack-only messages; deliveries count data messages"
        ],
    }
