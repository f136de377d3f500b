"""Section 7 of the ToTo paper, reproduced on the simulator: the tables of ``amcast simulate``.

A study runs one seeded causal-broadcast trace and replays it through a list of
``(rule, phi)`` variants, so every variant orders the very same DAG. Three studies make
the section 7 preset:

- ``narrow``: n = 8 on a fast bus, phi = n/2, every processor sending (paper: average
  Ntail 5.12 on 1 Mbit Ethernet);
- ``delay sweep``: the same, as the network delay grows and the DAG widens; it shows
  the share of messages S-ToTo delivers early that ToTo does not (paper: up to 10%);
- ``wide``: two LANs joined by a slow gateway, where GL-ToTo should beat ToTo.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..ordering import OrderingRule
from ..ordering.messages import DeliveryRule
from .causal_broadcast import Topology, Workload, simulate
from .ordering_replay import ReplayResult, early_gain, replay

Variant = tuple[OrderingRule, float | None]
Progress = Callable[[str], None]

ALL_RULES: list[Variant] = [(rule, None) for rule in OrderingRule]
WIDE_VARIANTS: list[Variant] = [
    (OrderingRule.LEX, None),
    (OrderingRule.TOTO, None),
    (OrderingRule.STOTO, None),
    (OrderingRule.GTOTO, None),
    (OrderingRule.GLTOTO, None),
    (OrderingRule.GTOTO, 2),
    (OrderingRule.GLTOTO, 2),
]
RESULT_COLUMNS = [
    "rule",
    "phi",
    "deliveries",
    "avg Ntail",
    "early %",
    "GL prefix %",
    "default %",
    "p50 ms",
    "p99 ms",
    "safety",
]


@dataclass(frozen=True)
class Study:
    title: str
    workload: Workload
    topology: Topology
    variants: Sequence[Variant]


def result_row(r: ReplayResult) -> list[Any]:
    safety = "ok" if not r.violations else f"VIOLATED x{len(r.violations)}"
    if r.undelivered:
        safety += f", {r.undelivered} undelivered"
    return [
        r.rule.value,
        r.phi,
        r.deliveries,
        round(r.avg_ntail, 2),
        round(100 * r.share(DeliveryRule.EARLY), 1),
        round(100 * r.share(DeliveryRule.GL_PREFIX), 1),
        round(100 * r.share(DeliveryRule.DEFAULT), 1),
        round(1000 * r.latency_quantile(0.5), 1),
        round(1000 * r.latency_quantile(0.99), 1),
        safety,
    ]


def run_study(
    study: Study, seed: int, progress: Progress | None = None
) -> tuple[dict[str, Any], list[ReplayResult]]:
    if progress:
        progress(f"{study.title}: simulating the network")
    trace = simulate(study.workload, study.topology, seed)
    results = []
    for rule, phi in study.variants:
        if progress:
            progress(f"{study.title}: ordering with {rule.value} (phi={phi or 'n/2'})")
        results.append(replay(trace, rule, phi))
    table = {
        "title": f"{study.title} (n={study.workload.n}, {trace.data_messages} data and "
        f"{trace.ack_only_messages} ack-only messages, seed {seed})",
        "columns": RESULT_COLUMNS,
        "rows": [result_row(r) for r in results],
    }
    return table, results


def delay_sweep(
    n: int, rate: float, duration: float, seed: int, progress: Progress | None = None
) -> dict[str, Any]:
    rows = []
    for mean_delay_ms in (0.2, 0.5, 1, 2, 4, 6):
        half = mean_delay_ms / 2000
        if progress:
            progress(f"delay sweep: mean network delay {mean_delay_ms} ms")
        trace = simulate(
            Workload(n=n, rate=rate, duration=duration), Topology(base=half, jitter=half), seed
        )
        stoto = replay(trace, OrderingRule.STOTO)
        toto = replay(trace, OrderingRule.TOTO)
        gl = replay(trace, OrderingRule.GLTOTO)
        rows.append(
            [
                mean_delay_ms,
                round(stoto.avg_ntail, 2),
                round(100 * stoto.share(DeliveryRule.EARLY), 1),
                round(100 * toto.share(DeliveryRule.EARLY), 1),
                round(100 * early_gain(stoto, toto), 1),
                len(toto.violations),
                round(gl.avg_ntail, 2),
                round(1000 * stoto.latency_quantile(0.5), 1),
            ]
        )
    return {
        "title": f"delay sweep (n={n}, phi=n/2, {rate:g} msgs/s per processor, seed {seed})",
        "columns": [
            "delay ms",
            "S-ToTo Ntail",
            "S-ToTo early %",
            "ToTo early %",
            "S-ToTo-only %",
            "ToTo violations",
            "GL-ToTo Ntail",
            "S-ToTo p50 ms",
        ],
        "rows": rows,
    }


def section7(
    seed: int = 1, duration: float = 10.0, progress: Progress | None = None
) -> tuple[dict[str, Any], dict[str, list[ReplayResult]]]:
    narrow = Study(
        "narrow DAG: one fast bus (mean delay 0.5 ms)",
        Workload(n=8, rate=50, duration=duration),
        Topology(base=0.00025, jitter=0.00025),
        ALL_RULES,
    )
    wide = Study(
        "wide DAG: two LANs of 4 joined by a 20 ms gateway",
        Workload(n=8, rate=50, duration=duration),
        Topology(base=0.00025, jitter=0.00025, lans=2, gateway=0.02),
        WIDE_VARIANTS,
    )
    narrow_table, narrow_results = run_study(narrow, seed, progress)
    sweep = delay_sweep(8, 50, duration, seed, progress)
    wide_table, wide_results = run_study(wide, seed, progress)
    stoto = next(r for r in narrow_results if r.rule is OrderingRule.STOTO)
    toto_wide = next(r for r in wide_results if r.rule is OrderingRule.TOTO)
    gl_wide = wide_results[-1]
    gain_column = sweep["columns"].index("S-ToTo-only %")
    report = {
        "title": "amcast simulate: section 7 of the ToTo paper (virtual time, seeded)",
        "tables": [narrow_table, sweep, wide_table],
        "figures": {
            "narrow: S-ToTo avg Ntail at delivery (paper: 5.12)": round(stoto.avg_ntail, 2),
            "sweep: most early deliveries S-ToTo makes and ToTo misses, % (paper: up to 10)": (
                max(row[gain_column] for row in sweep["rows"])
            ),
            "wide: default-rule share, ToTo vs GL-ToTo phi=2, %": (
                f"{100 * toto_wide.share(DeliveryRule.DEFAULT):.1f} vs "
                f"{100 * gl_wide.share(DeliveryRule.DEFAULT):.1f}"
            ),
            "wide: p50 latency ms, ToTo vs GL-ToTo phi=2": (
                f"{1000 * toto_wide.latency_quantile(0.5):.1f} vs "
                f"{1000 * gl_wide.latency_quantile(0.5):.1f}"
            ),
        },
        "notes": [
            "toto is the original rule 1b; it is unsafe (see README) and runs here only "
            "to be measured: its safety column counts the divergences the checker found.",
            "latency is send-to-delivery in virtual time, over every processor; phi "
            "defaults to n/2.",
        ],
    }
    return report, {narrow.title: narrow_results, wide.title: wide_results}
