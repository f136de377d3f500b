"""Print the configuration reference (a markdown table) for docs/operations.md.

Keys and defaults come from the pydantic model (``amcast.daemon.config.DaemonConfig``) and the
engine's ``NodeConfig`` (the ``[protocol]`` table); the meaning and unit of each key come
from the comment above it in ``config/amcastd.toml``, the documented default file. A test
(tests/deploy/test_config_reference.py) checks that every key is documented and that the
table in docs/operations.md is this script's output, so neither can drift.

    python deploy/config_reference.py
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from amcast.daemon.config import DERIVED_PROTOCOL_KEYS, DaemonConfig  # noqa: E402
from amcast.protocols.node_config import NodeConfig  # noqa: E402

KEY_LINE = re.compile(r"^#?\s?([a-z_][a-z0-9_]*) = ")


def toml_comments(path: Path) -> dict[tuple[str, str], str]:
    """``(section, key) -> comment`` from the comment lines just above each key."""
    out: dict[tuple[str, str], str] = {}
    section, pending = "", []
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if line.startswith("["):
            section, pending = line.strip("[]"), []
        elif m := KEY_LINE.match(line):
            out.setdefault((section, m.group(1)), " ".join(pending))
            pending = []
        elif line.startswith("#"):
            text = line.lstrip("#").strip()
            pending = [*pending, text] if text else []
        else:
            pending = []
    return out


def _show(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    return json.dumps(value) if isinstance(value, str | list) else str(value)


def keys() -> list[tuple[str, str, Any]]:
    rows = []
    defaults = DaemonConfig()
    for section in DaemonConfig.model_fields:
        if section == "protocol":
            continue
        for key in type(getattr(defaults, section)).model_fields:
            rows.append((section, key, getattr(getattr(defaults, section), key)))
    for f in dataclasses.fields(NodeConfig):
        if f.init and f.name not in DERIVED_PROTOCOL_KEYS:  # derived, not settings
            rows.append(("protocol", f.name, f.default))
    return rows


def table() -> str:
    docs = toml_comments(REPO / "config" / "amcastd.toml")
    lines = ["| key | default | meaning (unit) |", "|---|---|---|"]
    for section, key, default in keys():
        meaning = docs.get((section, key), "")
        shown = oct(default) if (section, key) == ("api", "socket_mode") else _show(default)
        lines.append(f"| `{section}.{key}` | `{shown}` | {meaning} |")
    return "\n".join(lines) + "\n"


def undocumented() -> list[str]:
    docs = toml_comments(REPO / "config" / "amcastd.toml")
    return [f"{s}.{k}" for s, k, _ in keys() if not docs.get((s, k))]


if __name__ == "__main__":
    sys.stdout.write(table())
