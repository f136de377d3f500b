"""Fixtures for every test: short socket paths (unix socket paths are limited to ~100
bytes), the wheel builder as a module."""

from __future__ import annotations

import importlib.util
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile`` (make test's and make check's process tests on two workers)
    with the analytics tests as one unit: they share one Spark session and their log
    sets, which are made once where they all run. Any other ``--dist`` is xdist's own.
    (xdist's ``loadgroup`` marks do nothing under pytest 9.2: it renames items through an
    attribute pytest no longer reads.)"""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FileScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return "tests/analytics" if module.startswith("tests/analytics/") else module

    return FileScheduling(config, log)


@pytest.fixture
def short_dir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="amc-cl-", dir="/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def sock(short_dir: Path) -> str:
    return str(short_dir / "fake.sock")


@pytest.fixture(scope="session")
def build_wheel() -> ModuleType:
    """``deploy/build_wheel.py`` (amcast's own wheel from the tracked files) as a module."""
    path = Path(__file__).resolve().parents[1] / "deploy" / "build_wheel.py"
    spec = importlib.util.spec_from_file_location("build_wheel", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
