"""The log-set generator matches the daemon's writer; the Java check; the venv's
spark-submit fix; no Spark needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from amcast.analytics import javacheck, synthetic, venvspark
from amcast.analytics.errors import AnalyticsError

from amcast.cli import main
from tests.analytics.daemon_writer import write_with_daemon_writer


def _lines(directory: Path) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for p in sorted(directory.rglob("*.jsonl*")):
        for line in p.read_text().splitlines():
            rec = json.loads(line)
            out.setdefault(f"{rec['node']}:{rec['type']}", []).append(rec)
    return out


def _order(r: dict) -> tuple:
    """Time, then the vertex (records of one daemon may share a time)."""
    return (r["ts"], r.get("view", 0), r.get("sender", 0), r.get("seq", 0))


def test_synthetic_writer_writes_what_the_daemon_writer_writes(tmp_path: Path) -> None:
    """Every record type, two lives of one node, a lost view, gap notices (none at the
    cluster's first view: nothing was ordered before it)."""
    logset = synthetic.generate(synthetic.Spec(nodes=4, vertices=300, view_changes=4,
                                               crash=(3, 0), pause=(2, 2),
                                               metrics_every_s=0.5, seed=5))
    synthetic.write(logset, tmp_path / "fast", rotate_records=100)
    write_with_daemon_writer(logset, tmp_path / "daemon")
    fast, daemon = _lines(tmp_path / "fast"), _lines(tmp_path / "daemon")
    assert fast.keys() == daemon.keys()
    assert {k.split(":")[1] for k in fast} == {"start", "gap", "view", "delivery", "metrics"}
    assert len({r["incarnation"] for r in fast["3:delivery"]}) == 2
    assert [r["after"] is not None for r in fast["2:gap"]] == [True]
    assert [r["after"] for r in fast["3:gap"]] == [None]  # its second life's
    assert [r["primary"] for r in fast["2:view"]] == [True, True, True, False, True]
    for key in fast:
        a, b = sorted(fast[key], key=_order), sorted(daemon[key], key=_order)
        assert a == b, key
        assert [list(r) for r in a] == [list(r) for r in b]  # same field order too
    assert sorted(p.name for p in (tmp_path / "fast" / "node-0").iterdir()) == [
        "delivery.jsonl", "delivery.jsonl.1", "delivery.jsonl.2", "metrics.jsonl"]


def test_generator_refuses_histories_it_cannot_write() -> None:
    with pytest.raises(ValueError, match="followed by a view"):
        synthetic.generate(synthetic.Spec(view_changes=1, crash=(0, 1)))
    with pytest.raises(ValueError, match="not be a majority"):
        synthetic.generate(synthetic.Spec(nodes=4, view_changes=2, crash=(0, 0),
                                          pause=(1, 0)))
    with pytest.raises(ValueError, match="two nodes"):
        synthetic.generate(synthetic.Spec(view_changes=3, crash=(0, 0), pause=(0, 1)))


def test_generator_is_deterministic_and_causal_records_have_null_ordering(
        tmp_path: Path) -> None:
    spec = synthetic.Spec(nodes=2, vertices=200, seed=9)
    synthetic.write(synthetic.generate(spec), tmp_path / "a")
    synthetic.write(synthetic.generate(spec), tmp_path / "b")
    a = (tmp_path / "a" / "node-1" / "delivery.jsonl").read_bytes()
    assert a == (tmp_path / "b" / "node-1" / "delivery.jsonl").read_bytes()
    recs = [json.loads(x) for x in a.decode().splitlines()]
    causal = [r for r in recs if r.get("service") == "causal"]
    assert causal and all(r["position"] is None and r["rule"] == "causal" and
                          r["ntail"] is None for r in causal)
    ordered = [r for r in recs if r.get("type") == "delivery" and r["position"] is not None]
    assert [r["position"] for r in ordered] == [
        sum(x["count"] for x in ordered[:i]) for i in range(len(ordered))]


@pytest.mark.parametrize(("text", "major"), [
    ('openjdk version "17.0.15" 2025-04-15', 17),
    ('java version "1.8.0_392"', 8),
    ('openjdk version "21" 2023-09-19', 21),
    ("no version here", None),
])
def test_java_version_parsing(text: str, major: int | None) -> None:
    assert javacheck.parse_major(text) == major


def test_missing_java_is_a_configuration_error_saying_what_to_install(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(AnalyticsError, match="openjdk-17-jre-headless"):
        javacheck.require_java()
    old = tmp_path / "java"
    old.write_text('#!/bin/sh\necho \'java version "1.8.0_392"\' >&2\n')
    old.chmod(0o755)
    with pytest.raises(AnalyticsError, match="java 8 is too old"):
        javacheck.require_java()
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "delivery.jsonl").write_text("{}\n")
    assert main(["analyze", str(tmp_path / "logs"), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "Java 17+ is needed" in err and len(err.splitlines()) == 1


def test_a_log_directory_without_logs_is_a_configuration_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(tmp_path / "nowhere"), "--out", str(tmp_path / "r")]) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["analyze", str(tmp_path / "empty"), "--out", str(tmp_path / "r")]) == 2
    assert "no *.jsonl* log files" in capsys.readouterr().err


def test_venvspark_points_find_spark_home_at_the_venvs_python(tmp_path: Path) -> None:
    script = tmp_path / "find-spark-home"
    text = ('#!/usr/bin/env bash\nif [[ -z "$PYSPARK_DRIVER_PYTHON" ]]; then\n'
            f'     {venvspark.DEFAULT}\nfi\n')
    script.write_text(text)
    assert "now uses" in venvspark.fix(tmp_path)
    fixed = script.read_text()
    python = tmp_path / "python"
    assert f'"${{PYSPARK_PYTHON:-"{python}"}}"' in fixed
    assert "already uses" in venvspark.fix(tmp_path) and script.read_text() == fixed
    script.write_text("something else\n")
    assert "left as it is" in venvspark.fix(tmp_path)
    assert script.read_text() == "something else\n"
    assert "nothing to do" in venvspark.fix(tmp_path / "nowhere")
