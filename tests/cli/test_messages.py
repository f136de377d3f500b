"""What the command lines say when something is wrong or needs explaining, checked
in-process: the key at fault named by its environment variable, a file given for a log
directory, an unknown option before a missing command, the help without docstring
markup, the listen columns explained, ids printed as plain digits, the socket mode as
written in the config, ``cluster start`` refusing before it announces anything, and the
demo's figures saying what they measure."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import structlog
from amcast.daemon import main as daemon_main
from amcast.daemon.config import load_config
from amcast.protocols.errors import ConfigurationError

from amcast import localcluster
from amcast.cli import main
from amcast.commands.status import identifier, is_identifier
from amcast.demo import WorkloadResult, report
from amcast.loadgen import LoadReport
from amcast.report import print_report

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _structlog_as_it_was() -> Any:
    """``amcastd --check`` run in-process configures structlog for the whole process
    (JSON on stderr): later tests in this worker read log lines from stdout, as
    structlog's defaults write them."""
    yield
    structlog.reset_defaults()


def test_a_bad_environment_override_is_blamed_on_its_variable(tmp_path: Path) -> None:
    config = tmp_path / "amcastd.toml"
    config.write_text("[node]\nid = 1\nmembers = [1]\n")
    with pytest.raises(ConfigurationError) as caught:
        load_config(config, {"AMCAST_NODE__ID": "abc"})
    assert "environment variable AMCAST_NODE__ID" in str(caught.value)
    assert str(config) not in str(caught.value)
    config.write_text("[node]\nid = 'x'\nmembers = [1]\n")
    with pytest.raises(ConfigurationError, match=f"in {config}: node.id"):
        load_config(config, {})


def test_analyze_says_a_file_is_not_a_log_directory(capsys: pytest.CaptureFixture[str],
                                                    tmp_path: Path) -> None:
    afile = tmp_path / "passwd"
    afile.write_text("root:x:0:0\n")
    assert main(["analyze", str(afile), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "is a file, not a log directory" in err and "does not exist" not in err


def test_an_unknown_option_is_reported_before_a_missing_command(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--bogus"]) == 2
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err
    assert main([]) == 2
    assert "required: COMMAND" in capsys.readouterr().err


def test_help_is_plain_text_and_listen_explains_its_columns(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    top = capsys.readouterr().out
    assert "``" not in top and "per module" not in top
    assert main(["listen", "--help"]) == 0
    text = capsys.readouterr().out
    assert "``" not in text
    for column in ("POSITION", "SENDER/CLIENT", "SERVICE", "GROUPS", "PAYLOAD"):
        assert column in text


def test_ids_are_plain_digits_and_quantities_are_grouped() -> None:
    from io import StringIO

    assert is_identifier("incarnation") and is_identifier("view_id")
    assert not is_identifier("messages_delivered")
    out = StringIO()
    print_report({"title": "t", "figures": {"engine incarnation": identifier(1795786823953),
                                            "messages": 12345}}, out=out)
    assert "1795786823953" in out.getvalue() and "12,345" in out.getvalue()


def test_check_prints_the_socket_mode_in_octal(capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch,
                                               short_dir: Path) -> None:
    for key, value in {"AMCAST_API__SOCKET": str(short_dir / "a.sock"),
                       "AMCAST_LOGS__DIR": str(short_dir), "AMCAST_NODE__STATE_DIR":
                       str(short_dir), "AMCAST_PROTOCOL__INSECURE": "true",
                       "AMCAST_METRICS__ENABLED": "false"}.items():
        monkeypatch.setenv(key, value)
    assert daemon_main.main(["--config", str(REPO / "config" / "amcastd.toml"), "--check"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["api"]["socket_mode"] == "0o660"
    assert load_config(None, {**os.environ, "AMCAST_API__SOCKET_MODE": '"0o660"'}
                       ).api.socket_mode == 0o660  # what --check prints reads back


def test_cluster_start_refuses_before_announcing(capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path) -> None:
    def running(self: Any) -> None:
        raise localcluster.ClusterStateError(f"a cluster is already running in {tmp_path}")

    monkeypatch.setattr(localcluster.LocalCluster, "refuse_if_running", running)
    assert main(["cluster", "start", "--nodes", "3", "--dir", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert "starting" not in captured.out and "already running" in captured.err


def test_the_demo_says_what_its_rates_and_latencies_measure() -> None:
    reports = []
    for node in range(2):
        r = LoadReport(node=node, sent=100, delivered=200, digest="ab" * 8,
                       latencies=[0.2] * 10, first_delivery=10.0, last_delivery=10.5)
        reports.append(r)
    result = WorkloadResult(2, 100, 200, reports, seconds=2.0)
    shown = report(result)
    rows = shown["tables"][0]["rows"]
    assert [row[4] for row in rows] == [400.0, 400.0]  # 200 delivered over 0.5 s
    assert "first delivery to its last" in shown["tables"][0]["title"]
    assert any("burst" in note and "2 clients x 100" in note for note in shown["notes"])
