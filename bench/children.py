"""Command lines for the benchmarks' own child processes, which run modules of the checkout.

``bench/`` and ``tools/`` are folders of a source checkout, not installed packages: a
child that runs one of their modules (``python -m bench.floor``, the flood attacker
``tools/floodattack.py``) needs the checkout's root on its import path whatever the
current directory is. ``amcast`` itself comes from the environment, as for any program.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
"""The checkout's root: the folder holding ``bench/``, ``tools/`` and ``amcast/``."""


def env() -> dict[str, str]:
    """This process's environment with the checkout's root first on ``PYTHONPATH``."""
    rest = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), rest) if p)}


def tool(name: str, *argv: str) -> list[str]:
    """The command line of ``tools/NAME.py`` (a script: it imports ``amcast`` only)."""
    return [sys.executable, str(ROOT / "tools" / f"{name}.py"), *argv]


def spawn_child(benchmark: str, spec: Mapping[str, Any]) -> subprocess.Popen[str]:
    """``python -m bench BENCHMARK --child SPEC``: one of a benchmark's own worker
    processes (its ``run`` answers ``--child`` with one JSON line on stdout)."""
    return subprocess.Popen([sys.executable, "-m", "bench", benchmark, "--child",
                             json.dumps(spec)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env())


def collect_children(procs: Sequence[subprocess.Popen[str]], timeout: float,
                     what: str = "child") -> list[dict[str, Any]]:
    """Each child's JSON line, in order; ``RuntimeError`` with the last line of its
    stderr for one that failed."""
    out = []
    for k, p in enumerate(procs):
        stdout, err = p.communicate(timeout=timeout)
        if p.returncode != 0:
            lines = [ln for ln in err.strip().splitlines() if ln.strip()]
            raise RuntimeError(f"{what} {k} exited {p.returncode}: "
                               f"{lines[-1] if lines else 'no output'}")
        out.append(json.loads(stdout.strip().splitlines()[-1]))
    return out
