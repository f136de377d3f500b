"""``.venv/bin/spark-submit analytics/job.py`` works from a shell without the venv on PATH.

One spark-submit run, its own JVM: PATH lacks the venv, and there are no SPARK_HOME or
PYSPARK_* variables, so spark-submit must find its Spark by itself and the driver starts
as ``python3`` from PATH, which cannot import the job and re-executes it with the venv's
Python. ``--json`` prints the JSON object alone on stdout (progress on stderr); ``--out``
is a ``file:`` URI and gets the whole report; the lost vertex fails the audit: exit
status 1. The run is cheap (a tiny log set, one core) and starts in the background when
the analytics tests start (``conftest.spark_submit_run``), beside the in-process Spark
tests; this test waits for it.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from amcast.analytics import job

from tests.analytics.conftest import VENV_BIN, SubmitRun

pytestmark = pytest.mark.spark


def test_spark_submit_without_the_venv_on_path(spark_submit_run: SubmitRun) -> None:
    run = spark_submit_run
    status, stdout, stderr = run.wait()
    assert status == 1, stderr[-3000:]  # the lost vertex fails the audit
    report = json.loads(stdout)  # the JSON object and nothing else
    assert stdout.count("\n") == 1
    assert report["figures"]["order audit"] == "FAIL"
    assert report["audit"]["missing"]["count"] == int(run.lost["count"])
    assert report["audit"]["violations"]["count"] == 0
    assert "[analyze" in stderr and "done:" in stderr
    python3 = shutil.which("python3", path=run.env["PATH"])
    if python3 is not None and Path(python3).resolve() != Path(sys.executable).resolve():
        assert "cannot import" in stderr  # the driver re-executed itself
    assert (run.out / "index.html").is_file() and any((run.out / "missing").glob("*.parquet"))
    assert sorted(p.name for p in run.cwd.iterdir()) == ["logs", "report"]


def test_the_drivers_python_is_found_from_spark_home(tmp_path: Path) -> None:
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    (site / "pyspark").mkdir(parents=True)
    (tmp_path / "venv" / "bin").mkdir()
    python = tmp_path / "venv" / "bin" / "python3.11"
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    assert job.interpreter_for(site / "pyspark") == python
    assert job.interpreter_for(tmp_path) is None
    spark_home = Path(sys.modules["pyspark"].__file__).parent  # this venv's pyspark
    found = job.interpreter_for(spark_home)
    assert found is not None and found.parent.resolve() == VENV_BIN.resolve()
