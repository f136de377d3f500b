"""``amcast bench`` from a checkout: it finds ``bench/`` beside the package whatever the
current directory, ``python -m bench`` is the same command, and a ``bench`` module that
is not amcast's is never run. (From an installed wheel: tests/packaging/test_wheel.py.)"""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import pytest

from amcast.commands import bench as launcher
from tests.cli.helpers import amcast, env

ROOT = Path(__file__).resolve().parents[2]


def test_amcast_bench_finds_the_checkout_from_any_directory(tmp_path: Path) -> None:
    r = amcast("bench", "--help", cwd=tmp_path)
    assert r.code == 0, r.err
    assert r.out.startswith("usage: amcast bench")
    for name in ("engine", "cluster", "flood", "floor", "plot-peers"):
        assert f"    {name} " in r.out or f"    {name}\n" in r.out, name
    assert launcher.NOT_INSTALLED not in r.out + r.err


def test_python_m_bench_is_amcast_bench() -> None:
    done = subprocess.run([sys.executable, "-m", "bench", "engine", "--rules", "nope"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60, env=env())
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert lines[0].startswith("amcast: error: --rules 'nope': want some of lex, "), lines


def test_a_bench_module_that_is_not_amcasts_is_not_run(monkeypatch: pytest.MonkeyPatch) -> None:
    assert launcher.find() is not None  # this checkout's
    monkeypatch.setitem(sys.modules, "bench", types.ModuleType("bench"))
    assert launcher.find() is None
