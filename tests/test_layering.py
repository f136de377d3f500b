"""Dependencies point one way (docs/architecture.md, "The rules of the house").

Every module of the installed namespace is mapped to a *unit*; imports between units must
follow the allowed edges below, and no module may import the bare top-level names that
the repository folders carry (``daemon``, ``protocols``, ``analytics``): an installed
amcast has exactly one import name. Inside ``amcast.protocols`` the shared vocabulary
sits at the bottom and the lower layers (wire, reliable, ordering) never import the
Node's event module or the Node.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = {"amcast": "amcast", "daemon": "amcast.daemon", "protocols": "amcast.protocols",
           "analytics": "amcast.analytics"}

# unit -> units it may import (besides itself)
ALLOWED: dict[str, set[str]] = {
    "protocols": set(),
    "socket_protocol": set(),
    "root": set(),  # amcast/__init__.py: the version only
    "argtypes": set(),  # option value types and the one-line parser
    "daemon": {"protocols", "socket_protocol", "root", "argtypes"},
    "client": {"socket_protocol", "protocols", "root"},
    "analytics": set(),
    "tools": {"protocols", "socket_protocol", "client", "root", "analytics", "tools",
              "argtypes"},
}
"""``tools``: the CLI, commands, benchmarks, demo, local clusters and reports; they sit
on top and nothing below imports them; they run daemons as processes, never import them.
``client`` may use ``protocols`` for the error hierarchy only (checked below)."""

PROTOCOL_LAYERS = {
    "vocabulary": set(),
    "errors": set(),
    "wire": {"vocabulary", "errors"},
    "ordering": {"vocabulary", "errors"},
    "reliable": {"vocabulary", "errors", "wire"},
    "swap": {"vocabulary", "errors"},
}
"""Lower layers of ``amcast.protocols`` and what each may import inside it."""


def _modules() -> dict[str, Path]:
    out = {}
    for folder, package in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT / folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            out[".".join([package, *parts])] = path
    return out


MODULES = _modules()


def _unit(module: str) -> str:
    parts = module.split(".")
    if module == "amcast":
        return "root"
    second = parts[1]
    if second in ("protocols", "daemon", "analytics"):
        return second
    if second in ("socket_protocol", "argtypes"):
        return second
    if second == "client":
        return "client"
    return "tools"


def _imports(path: Path, module: str) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            targets = {f"{name}.{a.name}" if f"{name}.{a.name}" in MODULES else name
                       for a in node.names}
            found.extend((node.lineno, t) for t in sorted(targets))
    return found


def _problems(module: str, path: Path) -> list[str]:
    unit = _unit(module)
    problems = []
    for line, name in _imports(path, module):
        top = name.split(".")[0]
        if top in ("daemon", "protocols", "analytics"):
            problems.append(f"line {line}: bare top-level import {name!r}")
            continue
        if top != "amcast":
            continue
        target = name if name in MODULES else name.rsplit(".", 1)[0]
        if target not in MODULES:
            continue
        other = _unit(target)
        if other != unit and other not in ALLOWED[unit]:
            problems.append(f"line {line}: {unit} must not import {other} ({name})")
        if unit == "client" and other == "protocols" and not target.startswith(
            "amcast.protocols.errors"
        ):
            problems.append(f"line {line}: the client may use only amcast.protocols.errors")
        if unit == "protocols" and other == "protocols":
            layer = module.split(".")[2] if len(module.split(".")) > 2 else ""
            their = target.split(".")[2] if len(target.split(".")) > 2 else ""
            if layer in PROTOCOL_LAYERS and their != layer and their not in PROTOCOL_LAYERS[layer]:
                problems.append(f"line {line}: protocols.{layer} must not import "
                                f"protocols.{their} ({name})")
    return problems


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_follow_the_layers(module: str) -> None:
    assert _problems(module, MODULES[module]) == []


def test_the_checker_catches_each_kind_of_violation(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import daemon\nfrom amcast.daemon.runner import Daemon\n"
                   "from amcast.protocols.events import BatchDelivered\n"
                   "from amcast.protocols import node\n")
    found = _problems("amcast.protocols.wire.codec", bad)
    assert len(found) == 4, found
    assert len(_problems("amcast.client", bad)) == 4
    assert _problems("amcast.cli", bad) == [
        "line 1: bare top-level import 'daemon'",
        "line 2: tools must not import daemon (amcast.daemon.runner)",
    ]


def test_the_checker_sees_every_unit() -> None:
    units = {_unit(m) for m in MODULES}
    assert units == set(ALLOWED)
    assert "amcast.protocols.vocabulary" in MODULES
    assert "amcast.daemon.runner" in MODULES
