"""``make lint``'s type check: mypy over the protocol core's hot modules (``MODULES``), as
the package names them.

The layers state what they read of their configuration and of each other as
``typing.Protocol`` classes (docs/architecture.md, *Typed configuration*); this check is
what proves that ``NodeConfig`` and the membership layer satisfy them. It stages
``protocols/`` as ``amcast/protocols/`` in a temporary directory, so that mypy names the
modules as the installed package does. Exit status: mypy's.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import amcast
from amcast import protocols

PROTOCOLS = Path(protocols.__file__).resolve().parent
MODULES = (
    "wire.codec", "wire.auth", "wire.replay",
    "reliable.causal", "reliable.stability", "reliable.layer", "reliable.repair",
    "ordering.engine", "ordering.rules", "ordering.votes",
    "session", "node", "membership.layer", "membership.detector",
    "extension", "wire.native", "ordering.native", "reliable.native",
    "swap.engine", "swap.link", "swap.carry", "swap.delivery", "swap.outbox", "swap.tree",
    "swap.messages",
    "federation.member", "federation.state", "federation.wire", "federation.batching",
    "federation.outputs", "federation.config",
)
"""Relative to ``amcast.protocols``: the hot path of every datagram (decode and
authenticate, causal release, acks and stability, the engine's insert and rule, the
membership layer and the node around them), the choice of the native core, the swap
orderings the session runs in place of the engine, and the federation member the daemon
runs for cross-cluster messages."""


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="amcast-typecheck-") as tmp:
        stage = Path(tmp)
        package = stage / "amcast"
        shutil.copytree(PROTOCOLS, package / "protocols",
                        ignore=shutil.ignore_patterns("*.so", "__pycache__"))
        shutil.copy(Path(amcast.__file__), package / "__init__.py")
        files = [str(Path("amcast", "protocols", *m.split(".")).with_suffix(".py"))
                 for m in MODULES]
        return subprocess.run([sys.executable, "-m", "mypy", "--ignore-missing-imports",
                               "--no-incremental", *files], cwd=stage).returncode


if __name__ == "__main__":
    sys.exit(main())
