"""The configuration reference (docs/operations.md) is generated (deploy/config_reference.py)
from the config model and the documented default file, and documents every key."""

from __future__ import annotations

import importlib.util
import tomllib

from tests.deploy.conftest import REPO

spec = importlib.util.spec_from_file_location("config_reference",
                                              REPO / "deploy" / "config_reference.py")
assert spec is not None and spec.loader is not None
reference = importlib.util.module_from_spec(spec)
spec.loader.exec_module(reference)


def test_every_key_is_documented_in_the_default_config_file() -> None:
    assert reference.undocumented() == []


def test_the_documented_table_is_the_generated_one() -> None:
    page = (REPO / "docs" / "operations.md").read_text()
    assert reference.table() in page, "run: python deploy/config_reference.py"


def test_the_default_file_sets_the_model_defaults() -> None:
    from amcast.daemon.config import DaemonConfig

    written = tomllib.loads((REPO / "config" / "amcastd.toml").read_text())
    written.pop("protocol")
    assert DaemonConfig(**written) == DaemonConfig()
