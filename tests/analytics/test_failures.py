"""Ordinary failures print one line and exit 2; an audit failure is 1, a pass 0.

Exit statuses (``amcast.analytics.errors``): 0 audit passed, 1 audit failed, 2 the logs
could not be analysed. A log set without a single delivery record is an error, not a
pass; a URI Spark cannot read, a remote ``--out`` and Spark's own errors are one line.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from amcast.analytics import errors, paths
from pyspark.errors import AnalysisException

from amcast.cli import main
from tests.analytics.conftest import analyze


def _one_error_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("amcast: error: ") and "Traceback" not in err
    return lines[0]


@pytest.mark.spark
def test_logs_without_delivery_records_are_an_error_not_a_pass(
        spark, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "amcastd.jsonl").write_text(
        '{"event": "listening", "level": "info"}\nnot json\n'
        '{"schema": 1, "type": "metrics", "node": 0, "ts": 1.0}\n')
    status, printed = analyze([str(tmp_path / "logs"), "--out", str(tmp_path / "r"), "-q"])
    assert status == errors.EXIT_NOT_ANALYSED == 2
    assert printed == ""
    line = _one_error_line(capsys.readouterr().err)
    assert "no delivery records below" in line and "2 unreadable" in line
    assert "1 metrics" in line
    assert not (tmp_path / "r" / "index.html").exists()


@pytest.mark.spark
def test_a_log_uri_spark_cannot_read_is_one_line(
        spark, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    status, printed = analyze(["hdfs://localhost:1/logs", "--out", str(tmp_path / "r"), "-q"])
    assert (status, printed) == (2, "")
    assert "localhost:1" in _one_error_line(capsys.readouterr().err)
    status, _ = analyze(["nosuchfs://x/logs", "--out", str(tmp_path / "r"), "-q"])
    assert status == 2
    assert 'No FileSystem for scheme "nosuchfs"' in _one_error_line(capsys.readouterr().err)


def test_a_remote_report_directory_is_refused_before_spark_starts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "delivery.jsonl").write_text("{}\n")
    assert main(["analyze", str(tmp_path), "--out", "hdfs://nn/reports"]) == 2
    assert "must be local" in _one_error_line(capsys.readouterr().err)
    assert main(["analyze", str(tmp_path), "--window", "0"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "amcast analyze: error: argument --window: not a positive number of seconds: '0' "
        "(see amcast analyze --help)"]


def test_plain_paths_and_file_uris_are_local_other_uris_are_not(tmp_path: Path) -> None:
    assert paths.local_path(str(tmp_path)) == tmp_path.resolve()
    assert paths.local_path(tmp_path.as_uri()) == tmp_path.resolve()
    assert paths.local_path(f"file:{tmp_path}") == tmp_path.resolve()
    assert paths.local_path("file://localhost/a%20b/c") == Path("/a b/c")
    assert paths.local_path("relative/dir") == (Path.cwd() / "relative/dir").resolve()
    assert paths.local_path("hdfs://nn:8020/logs") is None
    assert paths.logs_location("s3a://bucket/logs") == "s3a://bucket/logs"
    with pytest.raises(errors.AnalyticsError, match="not a host"):
        paths.local_path("file://otherhost/x")
    with pytest.raises(errors.AnalyticsError, match="does not exist"):
        paths.logs_location((tmp_path / "nowhere").as_uri())


def test_spark_errors_become_one_line_and_bugs_are_not_an_audit_failure(
        capsys: pytest.CaptureFixture[str]) -> None:
    exc = AnalysisException(message="[PATH_NOT_FOUND] Path does not exist: file:/x. "
                                    "SQLSTATE: 42K03\n== DataFrame ==\n\"json\" was called")
    assert errors.one_line(exc) == ("[PATH_NOT_FOUND] Path does not exist: file:/x. "
                                    "SQLSTATE: 42K03")
    assert errors._java_line("An error occurred while calling o42.json.\n: java.net."
                             "ConnectException: refused\n\tat x.y(Z.java:1)") == (
        "java.net.ConnectException: refused")

    def fail() -> int:
        raise errors.AnalyticsError("no delivery records")

    assert errors.guarded("prog", fail) == 2
    assert capsys.readouterr().err == "prog: error: no delivery records\n"

    def bug() -> int:
        return 1 // 0

    assert errors.guarded("prog", bug) == errors.EXIT_NOT_ANALYSED != errors.EXIT_AUDIT_FAILED
    err = capsys.readouterr().err
    assert "Traceback" in err  # a bug keeps its traceback, and still is not "audit failed"
    assert err.splitlines()[-1] == (
        "prog: error: internal error of the analysis job: ZeroDivisionError: "
        "integer division or modulo by zero")
