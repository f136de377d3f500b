"""The job runs unchanged through ``spark-submit analytics/job.py LOGDIR --out DIR``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from analytics import synthetic

ROOT = Path(__file__).resolve().parents[2]


def test_spark_submit_runs_the_job_file(tmp_path: Path) -> None:
    logset = synthetic.generate(synthetic.Spec(nodes=3, vertices=120, seed=11))
    lost = synthetic.lose(logset, 2, 7)
    synthetic.write(logset, tmp_path / "logs")
    submit = Path(sys.executable).parent / "spark-submit"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable,
           "PYSPARK_DRIVER_PYTHON": sys.executable}
    env.pop("PYTHONPATH", None)  # the job file makes its package importable itself
    proc = subprocess.run(
        [str(submit), "--master", "local[1]", "--conf", "spark.ui.enabled=false",
         "--conf", "spark.sql.shuffle.partitions=2", str(ROOT / "analytics" / "job.py"),
         str(tmp_path / "logs"), "--out", str(tmp_path / "report"), "--json"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env,
    )
    assert proc.returncode == 1, proc.stderr[-3000:]  # the lost vertex fails the audit
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["figures"]["order audit"] == "FAIL"
    assert report["audit"]["missing"]["count"] == int(lost["count"])
    assert report["audit"]["violations"]["count"] == 0
    assert (tmp_path / "report" / "index.html").exists()
