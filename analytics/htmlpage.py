"""``index.html``: the audit verdict in plain words, the workload, figures, charts, tables.

Theory of operation: a single static page built with ``html.escape`` and no template
engine. From the top: the verdict; "The run analysed" (one sentence per variant saying
what the run did, and what Ntail(G) is); the summary table and the run's figures; the
charts (PNGs next to the page: the timeline of views per node first), the table of
views; the first rows of every non-empty audit table; then
"This analysis", the Spark job's own run time, kept apart so that nobody reads it as a
figure of the run; and links to the Parquet table directories.
"""

from __future__ import annotations

from html import escape
from typing import Any

import pandas as pd

from .text import format_value

_STYLE = """
body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:2px 8px;
text-align:right}.pass{background:#e6f4e6;padding:1em;border-left:6px solid #2a2}
.fail{background:#fbe9e9;padding:1em;border-left:6px solid #c22}img{max-width:100%}
.job{color:#555;border-top:1px solid #ccc;margin-top:2em}
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


def _paragraphs(texts: list[str]) -> str:
    return "".join(f"<p>{escape(t)}</p>" for t in texts)


def page(
    *, title: str, verdict_ok: bool, verdict: list[str], workload: list[str], ntail: str,
    summary: dict[str, Any], figures: dict[str, Any], analysis: dict[str, Any],
    charts: dict[str, str], views: dict[str, Any], audit_tables: dict[str, pd.DataFrame],
    audit_counts: dict[str, int], tables: list[str],
) -> str:
    css = "pass" if verdict_ok else "fail"
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(title)}</title>",
        f"<style>{_STYLE}</style></head><body><h1>{escape(title)}</h1>",
        f"<div class='{css}'>{_paragraphs(verdict)}</div>",
        f"<h2>The run analysed</h2>{_paragraphs(workload)}<p>{escape(ntail)}</p>",
        "<h2>Per node and variant</h2>", table(summary["columns"], summary["rows"]),
        f"<p>{escape(summary['title'])}</p>",
        "<h2>Figures of the run</h2>",
        table(["figure", "value"], [[k, v] for k, v in figures.items()]),
    ]
    for caption, src in charts.items():
        parts.append(f"<h2>{escape(caption)}</h2><img src='{escape(src)}' alt='{escape(caption)}'>")
    parts += ["<h2>Views</h2>", table(views["columns"], views["rows"]),
              f"<p>{escape(views['title'])}</p>"]
    for name, df in audit_tables.items():
        if len(df):
            parts.append(f"<h2>{escape(name)} ({audit_counts[name]:,}; first {len(df)} shown)"
                         f"</h2>{frame(df)}")
    parts += [
        "<div class='job'><h2>This analysis</h2>",
        "<p>The Spark job's own run time and speed: figures of the analysis, not of the "
        "run analysed.</p>",
        table(["analysis job", "value"], [[k, v] for k, v in analysis.items()]), "</div>",
        "<h2>Tables (Parquet)</h2><ul>",
    ]
    parts += [f"<li><a href='{escape(t)}/'>{escape(t)}/</a></li>" for t in tables]
    parts.append("</ul></body></html>\n")
    return "\n".join(parts)
