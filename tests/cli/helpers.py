"""Running the ``amcast`` command as a user would: a subprocess, bounded in time."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

AMCAST = [sys.executable, "-m", "amcast.cli"]


@dataclass
class Result:
    code: int
    out: str
    err: str

    def one_error_line(self) -> str:
        """The run failed the documented way: one line on stderr, no traceback."""
        assert "Traceback" not in self.err, self.err
        lines = [ln for ln in self.err.splitlines() if ln.strip()]
        assert len(lines) == 1, self.err
        return lines[0]


def env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("AMCAST_")}


def amcast(*args: str, stdin: str | None = None, timeout: float = 60, **kw: Any) -> Result:
    p = subprocess.run([*AMCAST, *args], input=stdin, capture_output=True, text=True,
                       timeout=timeout, env=env(), **kw)
    return Result(p.returncode, p.stdout, p.stderr)
