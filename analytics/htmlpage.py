"""``index.html``: the audit verdict in plain words, the summary table, charts, tables.

Theory of operation: a single static page built with ``html.escape`` and no template
engine; it links the PNG charts and the Parquet table directories next to it and shows
the first rows of every non-empty audit table.
"""

from __future__ import annotations

from html import escape
from typing import Any

import pandas as pd

from amcast.report import format_value

_STYLE = """
body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:2px 8px;
text-align:right}.pass{background:#e6f4e6;padding:1em;border-left:6px solid #2a2}
.fail{background:#fbe9e9;padding:1em;border-left:6px solid #c22}img{max-width:100%}
"""


def table(columns: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{escape(format_value(v))}</td>" for v in row) + "</tr>"
        for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def frame(df: pd.DataFrame) -> str:
    return table([str(c) for c in df.columns], df.astype(object).values.tolist())


def page(
    *, title: str, verdict_ok: bool, verdict: list[str], summary: dict[str, Any],
    figures: dict[str, Any], charts: dict[str, str], audit_tables: dict[str, pd.DataFrame],
    audit_counts: dict[str, int], tables: list[str],
) -> str:
    css = "pass" if verdict_ok else "fail"
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(title)}</title>",
        f"<style>{_STYLE}</style></head><body><h1>{escape(title)}</h1>",
        f"<div class='{css}'>" + "".join(f"<p>{escape(v)}</p>" for v in verdict) + "</div>",
        "<h2>Per node and variant</h2>", table(summary["columns"], summary["rows"]),
        "<h2>Figures</h2>", table(["figure", "value"], [[k, v] for k, v in figures.items()]),
    ]
    for caption, src in charts.items():
        parts.append(f"<h2>{escape(caption)}</h2><img src='{escape(src)}' alt='{escape(caption)}'>")
    for name, df in audit_tables.items():
        if len(df):
            parts.append(f"<h2>{escape(name)} ({audit_counts[name]:,}; first {len(df)} shown)"
                         f"</h2>{frame(df)}")
    parts.append("<h2>Tables (Parquet)</h2><ul>")
    parts += [f"<li><a href='{escape(t)}/'>{escape(t)}/</a></li>" for t in tables]
    parts.append("</ul></body></html>\n")
    return "\n".join(parts)
