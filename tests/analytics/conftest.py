"""Shared fixtures of the analytics tests: one local Spark session, two analysed log sets.

- ``clean``: a fault-free log set written through the daemon's own writer
  (``daemon.logs.DeliveryLog``, rotated files), analysed with ``analytics.job.run``.
- ``faulty``: a log set written by ``analytics.synthetic.write`` with planted faults (an
  order swap, lost ordered and causal vertices, duplicated ordered and causal vertices),
  analysed through the real command line (``amcast analyze ... --json``).

Each job runs once per test session; the tests read its Parquet tables.
"""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from analytics import synthetic

CLEAN_SPEC = synthetic.Spec(nodes=4, vertices=1200, rate=200.0, view_changes=1,
                            metrics_every_s=1.0, restart=(2, 3), seed=3)
CLEAN_WINDOW = 2.0
FAULTY_SPEC = synthetic.Spec(nodes=4, vertices=600, rate=200.0, seed=7)


@dataclass
class Analysed:
    logdir: Path
    out: Path
    logset: synthetic.LogSet
    report: dict[str, Any]
    planted: dict[str, Any]

    def table(self, name: str) -> pd.DataFrame:
        return pd.read_parquet(self.out / name)


@pytest.fixture(scope="session")
def spark():  # type: ignore[no-untyped-def]
    from analytics.javacheck import require_java
    from analytics.session import get_session

    require_java()
    session = get_session("local[2]", shuffle_partitions=2, driver_memory="1g",
                          app_name="amcast-tests")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def clean(spark, tmp_path_factory: pytest.TempPathFactory) -> Analysed:  # type: ignore[no-untyped-def]
    from analytics.job import run

    base = tmp_path_factory.mktemp("clean")
    logset = synthetic.generate(CLEAN_SPEC)
    synthetic.write_with_daemon_writer(logset, base / "logs")
    report = run(spark, str(base / "logs"), base / "report", window_s=CLEAN_WINDOW)
    return Analysed(base / "logs", base / "report", logset, report, {})


def plant_faults(logset: synthetic.LogSet) -> dict[str, Any]:
    d = logset.deliveries
    planted: dict[str, Any] = {}
    planted["swap"] = (3, *synthetic.swap(logset, 3, 40))
    ordered = d[1].index[d[1]["position"].notna()]
    planted["lost_ordered"] = (1, synthetic.lose(logset, 1, int(ordered[100])))
    causal = d[2].index[d[2]["position"].isna()]
    planted["lost_causal"] = (2, synthetic.lose(logset, 2, int(causal[3])))
    ordered0 = d[0].index[d[0]["position"].notna()]
    planted["dup_ordered"] = (0, d[0].loc[int(ordered0[200])].to_dict(),
                              synthetic.duplicate(logset, 0, int(ordered0[200])))
    causal2 = logset.deliveries[2].index[logset.deliveries[2]["position"].isna()]
    planted["dup_causal"] = (2, synthetic.duplicate(logset, 2, int(causal2[10])))
    return planted


@pytest.fixture(scope="session")
def faulty(spark, tmp_path_factory: pytest.TempPathFactory) -> Analysed:  # type: ignore[no-untyped-def]
    from amcast.cli import main

    base = tmp_path_factory.mktemp("faulty")
    logset = synthetic.generate(FAULTY_SPEC)
    planted = plant_faults(logset)
    synthetic.write(logset, base / "logs", rotate_records=250)
    buf = io.StringIO()
    with redirect_stdout(buf):
        status = main(["analyze", str(base / "logs"), "--out", str(base / "report"),
                       "--json", "--master", "local[2]", "--shuffle-partitions", "2"])
    report = json.loads(buf.getvalue())
    report["status"] = status
    return Analysed(base / "logs", base / "report", logset, report, planted)
