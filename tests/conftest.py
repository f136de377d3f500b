"""Fixtures for every test: short socket paths (unix socket paths are limited to ~100 bytes)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def short_dir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="amc-cl-", dir="/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def sock(short_dir: Path) -> str:
    return str(short_dir / "fake.sock")
