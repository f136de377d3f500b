"""The log-set generator matches the daemon's writer; the Java check; no Spark needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from amcast.cli import main
from analytics import javacheck, synthetic
from protocols.errors import ConfigurationError


def _lines(directory: Path) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for p in sorted(directory.rglob("*.jsonl*")):
        for line in p.read_text().splitlines():
            rec = json.loads(line)
            out.setdefault(f"{rec['node']}:{rec['type']}", []).append(rec)
    return out


def test_synthetic_writer_writes_what_the_daemon_writer_writes(tmp_path: Path) -> None:
    logset = synthetic.generate(synthetic.Spec(nodes=3, vertices=300, view_changes=2,
                                               metrics_every_s=0.5, seed=5))
    synthetic.write(logset, tmp_path / "fast", rotate_records=100)
    synthetic.write_with_daemon_writer(logset, tmp_path / "daemon")
    fast, daemon = _lines(tmp_path / "fast"), _lines(tmp_path / "daemon")
    assert fast.keys() == daemon.keys()
    for key in fast:
        a = sorted(fast[key], key=lambda r: (r["ts"], r.get("seq", 0)))
        b = sorted(daemon[key], key=lambda r: (r["ts"], r.get("seq", 0)))
        assert a == b, key
        assert [list(r) for r in a] == [list(r) for r in b]  # same field order too
    assert sorted(p.name for p in (tmp_path / "fast" / "node-0").iterdir()) == [
        "delivery.jsonl", "delivery.jsonl.1", "delivery.jsonl.2", "metrics.jsonl"]


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
    with pytest.raises(ConfigurationError, match="openjdk-17-jre-headless"):
        javacheck.require_java()
    old = tmp_path / "java"
    old.write_text('#!/bin/sh\necho \'java version "1.8.0_392"\' >&2\n')
    old.chmod(0o755)
    with pytest.raises(ConfigurationError, match="java 8 is too old"):
        javacheck.require_java()
    assert main(["analyze", str(tmp_path), "--out", str(tmp_path / "r")]) == 2
    assert "Java 17+ is needed" in capsys.readouterr().err


def test_a_log_directory_without_logs_is_a_configuration_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(tmp_path / "nowhere"), "--out", str(tmp_path / "r")]) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["analyze", str(tmp_path / "empty"), "--out", str(tmp_path / "r")]) == 2
    assert "no *.jsonl* log files" in capsys.readouterr().err
