"""Shared fixtures of the analytics tests: one local Spark session, three analysed log sets.

Every Spark test is marked ``spark`` and shares the one session-scoped SparkSession; each
log set is generated and analysed once per test session, and the tests read its report
(Parquet tables, ``index.html``, the printed summary):

- ``clean``: a fault-free multi-view log set (five views; a node crashes with an agreed
  tail that differs, as a crashed member's may, restarts and rejoins with a gap notice;
  another is paused, loses its view and rejoins with a gap notice) written through the
  daemon's own writer (``daemon_writer``, rotated files), analysed with
  ``amcast.analytics.job.run``.
- ``faulty``: the same kind of log set written by ``amcast.analytics.synthetic.write``
  with one planted violation of every kind the audit reports (``plant_faults``) and
  lines the job must skip and count (``junk_lines``; node 1's records carry fields the
  schema does not know), analysed through the real command line
  (``amcast analyze ... --json``).
- ``idle``: a short run (3 nodes, 3 messages, then metrics snapshots through 7 s of
  idle time), analysed through the command line into a ``file:`` URI, as text.
- ``disk_full``: the clean log set written through the daemon's writer while node 1's disk
  refuses the records of a span across a view change (its view record among them) and
  node 0's a span inside a view it completes, analysed; and the same files without the
  ``lost`` records, analysed again.

``spark_submit_run`` (autouse, session) starts the one spark-submit run of
``test_spark_submit`` in the background as soon as the analytics tests start, when that
test was collected: its JVM then works beside the shared session instead of after it.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from amcast.analytics import synthetic

from tests.analytics.daemon_writer import write_with_daemon_writer

CLEAN_SPEC = synthetic.Spec(nodes=4, vertices=1200, rate=200.0, view_changes=4,
                            crash=(3, 1), pause=(2, 2), metrics_every_s=1.0, seed=3)
CLEAN_WINDOW = 2.0
FAULTY_SPEC = synthetic.Spec(nodes=4, vertices=1000, rate=200.0, view_changes=4,
                             crash=(3, 0), pause=(2, 2), seed=7)
IDLE_SPEC = synthetic.Spec(nodes=3, vertices=3, max_count=1, causal_share=0.0,
                           metrics_every_s=1.0, idle_s=7.0, seed=5)
SPARK_ARGS = ["--master", "local[2]", "--shuffle-partitions", "2"]
ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
SUBMIT_TEST = "test_spark_submit.py::test_spark_submit_without_the_venv_on_path"
SUBMIT_TIMEOUT_S = 300
# The test JVMs live a minute or two: the client JIT compiler alone (no C2) and the serial
# collector halve the CPU they spend, on a 2-core machine. No result depends on them.
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


@dataclass
class Analysed:
    logdir: Path
    out: Path
    logset: synthetic.LogSet
    report: dict[str, Any]
    planted: dict[str, Any]
    status: int = 0
    printed: str = ""

    def table(self, name: str) -> pd.DataFrame:
        return pd.read_parquet(self.out / name)


@pytest.fixture(scope="session")
def spark():  # type: ignore[no-untyped-def]
    from amcast.analytics.javacheck import require_java
    from amcast.analytics.session import get_session

    require_java()
    session = get_session("local[2]", shuffle_partitions=2, driver_memory="1g",
                          app_name="amcast-tests",
                          conf={"spark.driver.extraJavaOptions": TEST_JVM_OPTIONS})
    # Adaptive execution runs every shuffle stage as a Spark job of its own: on these tiny
    # log sets that doubles the jobs and costs time, and no result depends on it. (The
    # spark-submit run keeps Spark's default.)
    session.conf.set("spark.sql.adaptive.enabled", "false")
    yield session
    session.stop()


def analyze(argv: list[str]) -> tuple[int, str]:
    """``amcast analyze ARGV`` in this process (the shared session): status and stdout."""
    from amcast.cli import main

    buf = io.StringIO()
    with redirect_stdout(buf):
        status = main(["analyze", *argv, *SPARK_ARGS])
    return status, buf.getvalue()


@pytest.fixture(scope="session")
def clean(spark, tmp_path_factory: pytest.TempPathFactory) -> Analysed:  # type: ignore[no-untyped-def]
    from amcast.analytics.job import run

    base = tmp_path_factory.mktemp("clean")
    logset = synthetic.generate(CLEAN_SPEC)
    write_with_daemon_writer(logset, base / "logs")
    report = run(spark, str(base / "logs"), base / "report", window_s=CLEAN_WINDOW)
    return Analysed(base / "logs", base / "report", logset, report, {})


def _rows(d: pd.DataFrame, view: int, *, ordered: bool = True) -> list[int]:
    sel = (d["view"] == view) & (d["position"].notna() if ordered else d["position"].isna())
    return [int(x) for x in d.index[sel]]


def plant_faults(logset: synthetic.LogSet) -> dict[str, Any]:
    """One violation of every kind (views by index: k0 {0,1,2,3} where node 3 crashes,
    k1 {0,1,2}, k2 {0,1,2,3'} where node 2 is paused, k3 {0,1,3'}, k4 {0,1,2,3'})."""
    ids, d = logset.view_ids, logset.deliveries
    planted: dict[str, Any] = {}
    planted["swap"] = (1, *synthetic.swap(logset, 1, 5, view=ids[4]))
    planted["safe_tail"] = synthetic.safe_tail(logset)
    planted["lost_ordered"] = (0, synthetic.lose(logset, 0, _rows(d[0], ids[1])[30]))
    planted["lost_causal"] = (1, synthetic.lose(logset, 1, _rows(d[1], ids[3], ordered=False)[2]))
    first = d[0].loc[_rows(d[0], ids[2])[10]].to_dict()
    planted["dup_ordered"] = (0, first, synthetic.duplicate(logset, 0, _rows(d[0], ids[2])[10]))
    planted["dup_causal"] = (3, synthetic.duplicate(
        logset, 3, _rows(d[3], ids[4], ordered=False)[4]))
    synthetic.shift_positions(logset, ids[3], 1)
    planted["after_loss"] = synthetic.deliver_after_loss(logset)
    stray = ids[1] + 1
    assert stray not in ids and stray < ids[2]
    planted["stray"] = synthetic.deliver_in_view(logset, 0, _rows(d[0], ids[1])[0], stray)
    planted["late"] = synthetic.deliver_late(logset, 1, 0)
    planted["members"] = synthetic.wrong_members(logset, 1, ids[3], [0, 1, 2])
    gap = next(e for e in logset.events[2] if e["type"] == "gap" and e["view"] == ids[4])
    planted["gap_after"] = (list(gap["after"]), synthetic.set_gap_after(
        logset, 2, ids[4], [gap["after"][0], gap["after"][1] - 1]))
    planted["no_gap"] = synthetic.drop_gap(logset, 3, ids[2])
    return planted


# Lines a log directory may hold that are not records the job reads, by what it calls them.
JUNK_LINES = {
    "unreadable": ['this is not json', '{"event": "started", "level": "info"}'],
    "other type": ['{"schema": 1, "type": "membership", "node": 0, "ts": 1.0, "joined": [4]}'],
    "other schema": ['{"schema": 2, "type": "delivery", "node": 0, "view": 1, "sender": 0, '
                     '"seq": 999, "position": 0, "count": 1}'],
    "incomplete": ['{"schema": 1, "type": "delivery", "view": 1, "sender": 0, "seq": 998, '
                   '"count": 1, "service": "agreed"}',
                   '{"schema": 1, "type": "view", "node": 0, "view": "two", "ts": 1.0, '
                   '"members": [0]}',
                   '{"schema": 1, "type": "gap", "node": 0, "view": 9, "ts": 1.0, '
                   '"after": [5]}'],
}


def add_junk_and_unknown_fields(logdir: Path) -> None:
    """Junk lines into node 0's newest file; unknown fields into every line of node 1."""
    with open(logdir / "node-0" / "delivery.jsonl", "a", encoding="utf-8") as fh:
        fh.writelines(line + "\n" for lines in JUNK_LINES.values() for line in lines)
    for path in (logdir / "node-1").glob("*.jsonl*"):
        lines = path.read_text(encoding="utf-8").splitlines()
        path.write_text("".join(
            ln[:-1] + ', "view_id": [3, 1], "origin": {"host": "a", "pid": 7}}\n'
            for ln in lines), encoding="utf-8")


@pytest.fixture(scope="session")
def faulty(spark, tmp_path_factory: pytest.TempPathFactory) -> Analysed:  # type: ignore[no-untyped-def]
    base = tmp_path_factory.mktemp("faulty")
    logset = synthetic.generate(FAULTY_SPEC)
    planted = plant_faults(logset)
    synthetic.write(logset, base / "logs", rotate_records=250)
    add_junk_and_unknown_fields(base / "logs")
    status, printed = analyze([str(base / "logs"), "--out", str(base / "report"), "--json"])
    report = json.loads(printed)
    return Analysed(base / "logs", base / "report", logset, report, planted, status, printed)


@pytest.fixture(scope="session")
def idle(spark, tmp_path_factory: pytest.TempPathFactory) -> Analysed:  # type: ignore[no-untyped-def]
    base = tmp_path_factory.mktemp("idle")
    logset = synthetic.generate(IDLE_SPEC)
    synthetic.write(logset, base / "logs")
    (base / "cwd").mkdir()
    cwd = os.getcwd()
    os.chdir(base / "cwd")  # where a "file:" folder would appear if the URI were a path
    try:
        status, printed = analyze([str(base / "logs"), "--out", (base / "report").as_uri(),
                                   "--window", "1"])
    finally:
        os.chdir(cwd)
    return Analysed(base / "logs", base / "report", logset, {}, {}, status, printed)


@dataclass
class DiskFull:
    analysed: Analysed
    control: Analysed  # the same files without the ``lost`` records
    spans: tuple[tuple[int, float, float], ...]  # (node, from ts, to ts)


@pytest.fixture(scope="session")
def disk_full(spark, tmp_path_factory: pytest.TempPathFactory) -> DiskFull:  # type: ignore[no-untyped-def]
    from amcast.analytics.job import run

    base = tmp_path_factory.mktemp("disk_full")
    logset = synthetic.generate(CLEAN_SPEC)
    ids = logset.view_ids

    def times(node: int, k: int) -> pd.Series:
        d = logset.deliveries[node]
        return d[d["view"] == ids[k]].sort_values("ts")["ts"]

    spans = ((1, float(times(1, 1).iloc[-30]), float(times(1, 2).iloc[10])),  # view change
             (0, float(times(0, 3).iloc[20]), float(times(0, 3).iloc[60])))  # inside a view
    write_with_daemon_writer(logset, base / "logs", refuse=spans)
    report = run(spark, str(base / "logs"), base / "report", window_s=CLEAN_WINDOW)
    shutil.copytree(base / "logs", base / "control")
    for path in (base / "control").glob("node-*/*.jsonl*"):
        text = path.read_text(encoding="utf-8").splitlines(keepends=True)
        path.write_text("".join(ln for ln in text if '"type": "lost"' not in ln),
                        encoding="utf-8")
    control = run(spark, str(base / "control"), base / "control-report", window_s=CLEAN_WINDOW)
    return DiskFull(Analysed(base / "logs", base / "report", logset, report, {}),
                    Analysed(base / "control", base / "control-report", logset, control, {}),
                    spans)


@dataclass
class SubmitRun:
    """The background ``spark-submit analytics/job.py`` run of ``test_spark_submit``."""

    cwd: Path
    out: Path
    lost: dict[str, Any]
    env: dict[str, str]
    proc: subprocess.Popen[str] | None = None
    result: tuple[int, str, str] | None = field(default=None)

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [str(VENV_BIN / "spark-submit"), "--master", "local[1]",
             "--driver-java-options", TEST_JVM_OPTIONS,
             "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=1",
             str(ROOT / "analytics" / "job.py"), str(self.cwd / "logs"),
             "--out", self.out.as_uri(), "--json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=self.cwd,
            env=self.env, start_new_session=True,
        )

    def wait(self) -> tuple[int, str, str]:
        if self.result is None:
            assert self.proc is not None
            out, err = self.proc.communicate(timeout=SUBMIT_TIMEOUT_S)
            self.result = (self.proc.returncode, out, err)
        return self.result

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)  # spark-submit's JVM and its driver
            self.proc.communicate()


def _env_without_venv() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYSPARK_", "SPARK_", "VIRTUAL_ENV", "PYTHON"))}
    keep = [p for p in env.get("PATH", "").split(os.pathsep)
            if p and Path(p).resolve() != VENV_BIN.resolve()]
    env["PATH"] = os.pathsep.join(keep or ["/usr/bin", "/bin"])
    return env


@pytest.fixture(scope="session", autouse=True)
def spark_submit_run(request: pytest.FixtureRequest,
                     tmp_path_factory: pytest.TempPathFactory) -> Iterator[SubmitRun | None]:
    if not any(item.nodeid.endswith(SUBMIT_TEST) for item in request.session.items):
        yield None
        return
    cwd = tmp_path_factory.mktemp("submit")
    logset = synthetic.generate(synthetic.Spec(nodes=3, vertices=40, seed=11))
    lost = synthetic.lose(logset, 2, 7)
    synthetic.write(logset, cwd / "logs")
    run = SubmitRun(cwd, cwd / "report", lost, _env_without_venv())
    run.start()
    yield run
    run.stop()
