"""The systemd units keep the membership state file where the sandbox lets the daemon
write it, and restart a crashed daemon (which then rejoins the view by itself).

Under ``ProtectSystem=strict`` the daemon may write only its Runtime/State/Logs
directories; ``StateDirectory=amcast/%i`` makes ``/var/lib/amcast/%i`` writable, not
``/var/lib/amcast`` itself, so each unit must point ``node.state_dir`` at exactly its
own StateDirectory (``systemd-analyze verify`` cannot see this: tests/deploy/test_systemd.py
runs it)."""

from __future__ import annotations

from pathlib import Path

import pytest
from amcast.daemon.config import load_config

from tests.deploy.conftest import REPO

UNITS = REPO / "deploy" / "systemd"


def _settings(source: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in (UNITS / source).read_text().splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            key, value = line.split("=", 1)
            out.setdefault(key.strip(), []).append(value.strip())
    return out


def _environment(settings: dict[str, list[str]], instance: str) -> dict[str, str]:
    pairs = (v.replace("%i", instance).split("=", 1) for v in settings["Environment"])
    return {k: v for k, v in pairs}


@pytest.mark.parametrize("source", ["amcastd.service", "amcastd@.service"])
def test_the_state_dir_is_the_units_writable_state_directory(
    source: str, tmp_path: Path,
) -> None:
    settings = _settings(source)
    env = _environment(settings, "node1")
    (state_directory,) = settings["StateDirectory"]
    writable = Path("/var/lib") / state_directory.replace("%i", "node1")
    assert settings["ProtectSystem"] == ["strict"]
    assert settings["User"] == ["amcast"]
    # the daemon's effective node.state_dir under this unit, whatever the config file says
    config = tmp_path / "amcastd.toml"
    config.write_text('[node]\nid = 0\nmembers = [0]\nstate_dir = "/srv/elsewhere"\n'
                      '[protocol]\ninsecure = true\n')
    loaded = load_config(config, env)
    assert Path(loaded.node.state_dir) == writable
    assert settings["StateDirectoryMode"] == ["0700"]


def test_the_default_state_dir_is_the_plain_units_state_directory() -> None:
    """Without the unit's override (another supervisor, a package), the default is the
    directory the documentation names."""
    (state_directory,) = _settings("amcastd.service")["StateDirectory"]
    assert load_config(None, {}).node.state_dir == f"/var/lib/{state_directory}"


@pytest.mark.parametrize("source", ["amcastd.service", "amcastd@.service"])
def test_a_crashed_daemon_is_restarted(source: str) -> None:
    settings = _settings(source)
    assert settings["Restart"] == ["on-failure"]
    assert 0 < float(settings["RestartSec"][0]) <= 10
