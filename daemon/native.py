"""The compiled protocol core (``make native``): which build runs, and whether it is current.

Theory of operation: ``make native`` (``deploy/build_native.py``) compiles the modules in
``MODULES`` with mypyc into extension modules beside their sources
(``protocols/wire/codec.cpython-311-x86_64-linux-gnu.so`` next to ``codec.py``) and writes
``protocols/native.json``: the mypy version and the SHA-256 of each source as compiled.
Python imports an extension module in preference to the source beside it, so a source
edited after the build would silently not run. ``problem()`` compares the hashes:
``amcastd`` refuses to start on a stale or partial build (exit status 2, one line saying
to run ``make native`` again or ``make pure``), and the test suite refuses to run on
one. ``make pure`` removes the build. Without one, everything is interpreted, as before.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path
from typing import Any

from .. import protocols

PROTOCOLS = Path(protocols.__file__).resolve().parent
MANIFEST = PROTOCOLS / "native.json"
MODULES = (
    "wire.codec", "wire.auth", "wire.replay",
    "reliable.causal", "reliable.stability", "reliable.layer", "reliable.repair",
    "ordering.engine", "ordering.rules", "ordering.votes",
    "session", "node", "membership.layer", "membership.detector",
)
"""The hot path of every datagram, relative to ``amcast.protocols`` (the profile of a
daemon at light load: decode and authenticate, causal release, acks and stability, the
engine's insert and rule, the membership layer and the node around them)."""


def source(module: str) -> Path:
    return PROTOCOLS.joinpath(*module.split(".")).with_suffix(".py")


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def extensions() -> list[Path]:
    """The compiled modules present under ``protocols/`` (any Python version)."""
    return sorted(PROTOCOLS.rglob("*.so"))


def manifest() -> dict[str, Any] | None:
    try:
        data = json.loads(MANIFEST.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        return {"error": str(exc)}
    return data if isinstance(data, dict) else {"error": "not a JSON object"}


def problem() -> str | None:
    """Why the compiled build present must not run (None: none present, or current)."""
    built = manifest()
    if built is None:
        if extensions():
            return (f"{PROTOCOLS} holds compiled modules but no native.json: "
                    "run `make native` again, or `make pure` to run interpreted")
        return None
    modules = built.get("modules")
    if not isinstance(modules, dict):
        return f"{MANIFEST} is damaged: run `make native` again, or `make pure`"
    for module, expected in sorted(modules.items()):
        path = source(module)
        if not path.exists() or digest(path) != expected:
            return (f"protocols/{module.replace('.', '/')}.py changed after `make native`: "
                    "run `make native` again, or `make pure` to run interpreted")
        # the modules are compiled as one group that calls itself natively: one of them
        # imported from its source would be a second copy of its classes
        if not _loads_extension(f"amcast.protocols.{module}"):
            return (f"the compiled protocols/{module.replace('.', '/')} is missing or was "
                    "built for another Python: run `make native` again, or `make pure`")
    return None


def state() -> dict[str, Any]:
    """What runs: ``compiled`` (every module of the manifest loads from its extension),
    ``partly compiled`` or ``interpreted``, for ``amcastd --check`` and the logs."""
    built = manifest() or {}
    modules = built.get("modules") if isinstance(built.get("modules"), dict) else {}
    compiled = [m for m in modules if _loads_extension(f"amcast.protocols.{m}")]
    if not compiled:
        core = "interpreted"
    elif len(compiled) == len(modules):
        core = "compiled"
    else:
        core = "partly compiled"
    return {"protocol_core": core, "compiled_modules": len(compiled),
            "mypyc": built.get("mypy") if compiled else None}


def _loads_extension(name: str) -> bool:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return False
    return spec is not None and spec.origin is not None and spec.origin.endswith(".so")
