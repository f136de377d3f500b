"""Command lines for the benchmarks' own child processes, which run modules of the checkout.

``bench/`` and ``tools/`` are folders of a source checkout, not installed packages: a
child that runs one of their modules (``python -m bench.floor``, the flood attacker
``tools/floodattack.py``) needs the checkout's root on its import path whatever the
current directory is. ``amcast`` itself comes from the environment, as for any program.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
"""The checkout's root: the folder holding ``bench/``, ``tools/`` and ``amcast/``."""


def env() -> dict[str, str]:
    """This process's environment with the checkout's root first on ``PYTHONPATH``."""
    rest = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), rest) if p)}


def tool(name: str, *argv: str) -> list[str]:
    """The command line of ``tools/NAME.py`` (a script: it imports ``amcast`` only)."""
    return [sys.executable, str(ROOT / "tools" / f"{name}.py"), *argv]
