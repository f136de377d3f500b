"""The house rule: protocols/ is sans-IO (no asyncio, sockets, time, logging, global random)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PROTOCOLS = Path(__file__).resolve().parent.parent / "protocols"
FORBIDDEN_MODULES = {"asyncio", "socket", "time", "logging", "selectors", "threading", "uvloop"}


def _python_files() -> list[Path]:
    return sorted(PROTOCOLS.rglob("*.py"))


def _violations(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                if top in FORBIDDEN_MODULES:
                    found.append(f"line {node.lineno}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            top = node.module.split(".")[0]
            if top in FORBIDDEN_MODULES:
                found.append(f"line {node.lineno}: from {node.module} import ...")
            if top == "random" and any(a.name != "Random" for a in node.names):
                found.append(f"line {node.lineno}: from random import anything but Random")
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "random"
            and node.attr != "Random"
        ):
            found.append(f"line {node.lineno}: random.{node.attr} uses the global RNG")
    return found


def test_there_are_protocol_modules() -> None:
    assert len(_python_files()) >= 3


@pytest.mark.parametrize("path", _python_files(), ids=lambda p: str(p.relative_to(PROTOCOLS)))
def test_protocol_module_is_sans_io(path: Path) -> None:
    assert _violations(path) == []


def test_checker_catches_violations(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import time\nimport random\nx = random.random()\nfrom asyncio import sleep\n")
    found = _violations(bad)
    assert len(found) == 3, found
