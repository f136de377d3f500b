"""The compiled protocol core's guard (``amcast.daemon.native``): a build older than its
sources, partial, or damaged is refused with one line, and ``make test``'s compiled run
really runs compiled."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import structlog.testing
from amcast.daemon import main as daemon_main
from amcast.daemon import native


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A protocols/ of two sources and no build, in place of the real one."""
    (tmp_path / "wire").mkdir()  # modules amcast.protocols does not have: never compiled
    (tmp_path / "wire" / "standin.py").write_text("X = 1\n")
    (tmp_path / "standin.py").write_text("Y = 2\n")
    monkeypatch.setattr(native, "PROTOCOLS", tmp_path)
    monkeypatch.setattr(native, "MANIFEST", tmp_path / "native.json")
    return tmp_path


def build(tree: Path, **changes: str) -> None:
    modules = {"wire.standin": native.digest(tree / "wire" / "standin.py"),
               "standin": native.digest(tree / "standin.py"), **changes}
    (tree / "native.json").write_text(json.dumps({"mypy": "2.4.1", "group": "g__mypyc",
                                                  "modules": modules}))


def test_no_build_is_interpreted_and_fine(tree: Path) -> None:
    assert native.problem() is None
    assert native.state()["protocol_core"] == "interpreted"


def test_compiled_modules_without_a_manifest_are_refused(tree: Path) -> None:
    (tree / "standin.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    assert "no native.json" in (native.problem() or "")


def test_a_source_edited_after_the_build_is_refused(tree: Path) -> None:
    build(tree, standin="0" * 64)
    assert native.problem() == ("protocols/standin.py changed after `make native`: run "
                                "`make native` again, or `make pure` to run interpreted")


def test_a_module_of_the_build_that_does_not_load_compiled_is_refused(tree: Path) -> None:
    build(tree)  # the hashes match, but these stand-ins never load from an extension
    assert "is missing or was built for another Python" in (native.problem() or "")


def test_a_damaged_manifest_is_refused(tree: Path) -> None:
    (tree / "native.json").write_text("{not json")
    assert "damaged" in (native.problem() or "")


def test_amcastd_refuses_to_start_on_a_stale_build(
    tree: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    build(tree, standin="0" * 64)
    # the daemon's logging setup would bind this test's captured stderr for good
    monkeypatch.setattr(daemon_main, "configure_logging", lambda *a, **k: None)
    with structlog.testing.capture_logs() as logs:
        assert daemon_main.main(["--check", "--config", "/nonexistent.toml"]) == 2
    assert len(logs) == 1 and logs[0]["log_level"] == "error"
    assert logs[0]["event"] == "amcastd cannot start"
    assert "protocols/standin.py changed after `make native`" in logs[0]["error"]


def test_the_real_tree_runs_what_its_manifest_says() -> None:
    """In make test's compiled run every module of the build loads compiled; in the
    interpreted run none is present."""
    assert native.problem() is None
    state = native.state()
    if native.MANIFEST.exists():
        assert state["protocol_core"] == "compiled"
        assert state["compiled_modules"] == len(native.MODULES)
        from amcast.protocols.ordering import engine
        assert engine.__file__ is not None and engine.__file__.endswith(".so")
    else:
        assert state == {"protocol_core": "interpreted", "compiled_modules": 0, "mypyc": None}
        assert native.extensions() == []
