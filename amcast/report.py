"""Printing figures: a readable table for people, one JSON object for machines.

A report is a dict: ``title`` (str), optional ``tables`` (list of
``{"title", "columns", "rows"}``), optional ``figures`` (flat dict of name -> value) and
optional ``notes`` (list of str). ``--json`` prints the dict as it is.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from .analytics.text import format_value  # the one number format (no Spark import)


def render_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[format_value(v) for v in row] for row in rows]
    widths = [len(c) for c in columns]
    for row in cells:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    lines = ["  ".join(c.rjust(w) for c, w in zip(columns, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    for row in cells:
        lines.append("  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)))
    return "\n".join(lines)


def print_report(
    report: dict[str, Any], *, as_json: bool = False, out: TextIO | None = None
) -> None:
    out = out or sys.stdout
    if as_json:
        json.dump(report, out, indent=None, sort_keys=False, default=str)
        out.write("\n")
        return
    out.write(f"{report.get('title', '')}\n")
    for table in report.get("tables", []):
        out.write(f"\n{table['title']}\n")
        out.write(render_table(table["columns"], table["rows"]) + "\n")
    figures = report.get("figures") or {}
    if figures:
        out.write("\n")
        width = max(len(k) for k in figures)
        for key, value in figures.items():
            out.write(f"{key.ljust(width)}  {format_value(value)}\n")
    for note in report.get("notes", []):
        out.write(f"\nnote: {note}\n")
