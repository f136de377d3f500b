"""``make typecheck``: mypy over the protocol core's hot modules (``amcast.daemon.native``'s
``MODULES``, the modules the mypyc build compiled), as the package names them.

The layers state what they read of their configuration and of each other as
``typing.Protocol`` classes (docs/architecture.md, *Typed configuration*); this check is
what proves that ``NodeConfig`` and the membership layer satisfy them. Like the mypyc
build it stages ``protocols/`` as ``amcast/protocols/`` in a temporary directory, so that
mypy names the modules as the installed package does. Exit status: mypy's.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from amcast.daemon import native

import amcast


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="amcast-typecheck-") as tmp:
        stage = Path(tmp)
        package = stage / "amcast"
        shutil.copytree(native.PROTOCOLS, package / "protocols",
                        ignore=shutil.ignore_patterns("*.so", "__pycache__", "native.json"))
        shutil.copy(Path(amcast.__file__), package / "__init__.py")
        files = [str(Path("amcast", "protocols", *m.split(".")).with_suffix(".py"))
                 for m in native.MODULES]
        return subprocess.run([sys.executable, "-m", "mypy", "--ignore-missing-imports",
                               "--no-incremental", *files], cwd=stage).returncode


if __name__ == "__main__":
    sys.exit(main())
