"""A short run (3 messages, then 7 s idle) is analysed, into a ``file:`` URI, as text.

It used to stop with Spark's DIVIDE_BY_ZERO (retransmissions per delivered message over
metrics snapshots that saw no delivery) and exit 1, the "audit failed" status; and an
``--out file:...`` wrote the Parquet tables there but the charts and index.html into a
local folder named ``file:``.
"""

from __future__ import annotations

import re

import pytest

from tests.analytics.conftest import IDLE_SPEC, Analysed

pytestmark = pytest.mark.spark


def test_short_idle_run_passes_with_undefined_rates_as_n_a(idle: Analysed) -> None:
    assert idle.status == 0, idle.printed
    assert re.search(r"order audit +PASS", idle.printed)
    assert re.search(r"delivery records +9\b", idle.printed)
    summary = idle.table("summary")
    assert summary.retrans_per_msg.isna().all()  # no delivery between snapshots: 0/0
    rows = [ln.split() for ln in idle.printed.splitlines() if ln.split()[:2] in (
        ["0", "gltoto"], ["1", "gltoto"], ["2", "gltoto"])]
    assert len(rows) == 3 and all(r[-3:-1] == ["n/a", "n/a"] for r in rows)


def test_file_uri_report_directory_gets_the_whole_report(idle: Analysed) -> None:
    for name in ("index.html", "throughput.png", "latency.png", "ntail.png"):
        assert (idle.out / name).is_file(), name
    assert any((idle.out / "summary").glob("*.parquet"))
    assert list((idle.logdir.parent / "cwd").iterdir()) == []  # no folder named "file:"


def _section(html: str, heading: str) -> str:
    start = html.index(f"<h2>{heading}</h2>")
    end = html.find("<h2>", start + 1)
    return html[start:end if end > 0 else None]


def test_html_describes_the_workload_and_keeps_the_jobs_time_apart(idle: Analysed) -> None:
    html = (idle.out / "index.html").read_text()
    run = _section(html, "The run analysed")
    assert (f"Workload: 3 nodes (0, 1, 2) ran {IDLE_SPEC.variant} with phi = "
            f"{IDLE_SPEC.phi:g}") in run
    assert "sent 3 vertices carrying 3 messages" in run
    assert "Ntail(G) is the number of the n group members" in run
    figures = _section(html, "Figures of the run")
    assert "delivery records" in figures
    assert "seconds" not in figures and "records/s" not in figures
    job = _section(html, "This analysis")
    assert "not of the run analysed" in job
    assert "seconds" in job and "records/s" in job
    assert html.index("<h2>This analysis</h2>") > html.index("<h2>Figures of the run</h2>")
    text = idle.printed.split("this analysis (the Spark job's own run, not the run analysed):")
    assert len(text) == 2 and "seconds" in text[1] and "seconds" not in text[0]
