"""Checked runs of the swap simulator: one run with every checker, and sweeps of seeds.

``swap_cluster`` runs the simulated members and records a ``SwapTrace``;
``swap_checkers`` judges a trace; this module, above both, joins them (so neither of
the two imports the other back).
"""

from __future__ import annotations

from .swap_checkers import check
from .swap_cluster import SwapSimConfig, SwapTrace, run_trace


def simulate(config: SwapSimConfig, seed: int) -> SwapTrace:
    """One run with every checker: ``trace.violations`` lists what failed."""
    trace = run_trace(config, seed)
    trace.violations = check(trace)
    return trace


def sweep(config: SwapSimConfig, seeds: range) -> dict[int, list[str]]:
    """Seeds whose run broke a checker, with the violations."""
    out = {}
    for seed in seeds:
        found = simulate(config, seed).violations
        if found:
            out[seed] = found
    return out
