"""Numbers and reports as text, for ``index.html`` and the job's own ``main``.

Theory of operation: the job's report is a plain dict (``title``, ``tables`` of
``{"title", "columns", "rows"}``, ``figures``, ``notes``, ``audit``); ``json_line``
writes it as one JSON line (for ``--json``), ``render`` as a few aligned tables for a
terminal, with the job's own run time (``analysis``) apart from the run's figures.
``format_value`` writes a number with a precision that suits its magnitude and ``n/a``
for a figure that is undefined (None, NaN: a rate over no messages). The analytics
package keeps these few lines of its own so that it depends on nothing of
``amcast`` outside ``amcast.analytics``.
"""

from __future__ import annotations

import json
import math
from typing import Any


def format_value(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if isinstance(value, float):
        magnitude = abs(value)
        if magnitude == 0:
            return "0"
        if magnitude >= 1000:
            return f"{value:,.0f}"
        if magnitude >= 10:
            return f"{value:.1f}"
        return f"{value:.3g}" if magnitude < 0.01 else f"{value:.2f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def json_line(report: dict[str, Any]) -> str:
    return json.dumps(report, default=str) + "\n"


def _table(columns: list[str], rows: list[list[Any]]) -> list[str]:
    cells = [[format_value(v) for v in row] for row in rows]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.rjust(w) for c, w in zip(columns, widths, strict=True)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    return lines


def render(report: dict[str, Any]) -> str:
    lines = [str(report.get("title", ""))]
    for t in report.get("tables", []):
        lines += ["", t["title"], *_table(t["columns"], t["rows"])]
    figures = report.get("figures") or {}
    if figures:
        width = max(len(k) for k in figures)
        lines += [""] + [f"{k.ljust(width)}  {format_value(v)}" for k, v in figures.items()]
    lines += [f"\nnote: {n}" for n in report.get("notes", [])]
    analysis = report.get("analysis") or {}
    if analysis:
        lines += ["", "this analysis (the Spark job's own run, not the run analysed):"]
        lines += [f"  {k}: {format_value(v)}" for k, v in analysis.items()]
    return "\n".join(lines) + "\n"
