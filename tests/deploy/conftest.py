"""Deployment checks run external tools (systemd-analyze, promtool, docker-compose, ip).

Locally a missing tool skips its tests with the reason; in CI (``CI=true``, where
``make deploy-tools`` installs them) a missing tool fails the test, so CI cannot go
green without running the checks.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def require_tool(name: str, hint: str) -> str:
    path = shutil.which(name)
    if path:
        return path
    message = f"{name} not found ({hint}; `make deploy-tools` installs it on Debian)"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(message)
    pytest.skip(message)
    raise AssertionError("unreachable")


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO
