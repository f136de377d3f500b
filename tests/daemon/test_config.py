"""Config: defaults, TOML, environment overrides, clear errors for unknown keys/bad values."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.config import DaemonConfig, load_config
from protocols.errors import ConfigurationError

ROOT = Path(__file__).resolve().parents[2]


def test_documented_default_file_equals_the_model_defaults() -> None:
    assert load_config(ROOT / "config" / "amcastd.toml") == DaemonConfig()


def test_every_key_of_the_model_is_documented_in_the_default_file() -> None:
    text = (ROOT / "config" / "amcastd.toml").read_text()
    for section, model in DaemonConfig.model_fields.items():
        assert f"[{section}]" in text
        sub = model.annotation
        for key in getattr(sub, "model_fields", {}):
            assert f"\n{key} =" in text or f"\n# {key} =" in text, f"{section}.{key}"


def test_toml_and_env_overrides(tmp_path: Path) -> None:
    path = tmp_path / "a.toml"
    path.write_text('[node]\nid = 1\nmembers = [0, 1, 2]\n[network]\nport = 5000\n')
    cfg = load_config(path, {"AMCAST_NETWORK__PORT": "6000", "AMCAST_API__SOCKET_MODE": "0600",
                             "AMCAST_LOGS__DIR": "/tmp/x", "AMCAST_NODE__MEMBERS": "[0,1,2,3]"})
    assert (cfg.node.id, cfg.node.members) == (1, [0, 1, 2, 3])
    assert cfg.network.port == 6000
    assert cfg.api.socket_mode == 0o600
    assert cfg.logs.dir == "/tmp/x"


def test_config_path_from_environment(tmp_path: Path) -> None:
    path = tmp_path / "b.toml"
    path.write_text("[network]\nttl = 0\n")
    assert load_config(None, {"AMCAST_CONFIG": str(path)}).network.ttl == 0


@pytest.mark.parametrize(
    ("toml", "env", "needle"),
    [
        ("[network]\nprot = 1\n", {}, "unknown key network.prot"),
        ("[netwrk]\n", {}, "unknown key netwrk"),
        ("[network]\nport = 70000\n", {}, "network.port"),
        ('[network]\ngroup = "10.0.0.1"\n', {}, "not an IPv4 multicast address"),
        ("[node]\nid = 5\nmembers = [0, 1]\n", {}, "not in members"),
        ("[node]\nmembers = [1, 0]\n", {}, "ascending"),
        ("", {"AMCAST_NETWORK__TTL": "lots"}, "network.ttl"),
        ("", {"AMCAST_PORT": "1"}, "AMCAST_<SECTION>__<KEY>"),
        ("[api]\nclient_queue_max_bytes = 65536\n", {}, "client_queue_max_bytes"),
        ("port = [", {}, "not valid TOML"),
    ],
)
def test_bad_configuration_is_a_clear_error(
    tmp_path: Path, toml: str, env: dict[str, str], needle: str
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(toml)
    with pytest.raises(ConfigurationError, match=needle.replace("[", r"\[")):
        load_config(path, env)


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="does not exist"):
        load_config(tmp_path / "nope.toml", {})
