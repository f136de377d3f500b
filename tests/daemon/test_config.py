"""Config: defaults, TOML, environment overrides, clear errors for unknown keys/bad values."""

from __future__ import annotations

from pathlib import Path

import msgpack
import pytest
from amcast.daemon.config import DaemonConfig, load_config
from amcast.protocols.errors import ConfigurationError
from pydantic import ValidationError

from amcast import socket_protocol as sp

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


def test_core_variable_is_not_a_config_key(tmp_path: Path) -> None:
    """``AMCAST_CORE`` picks the protocol core (read by the wire layer); the config loader
    leaves it alone instead of refusing it as a malformed ``AMCAST_<SECTION>__<KEY>``."""
    path = tmp_path / "c.toml"
    path.write_text("[network]\nttl = 0\n")
    for core in ("pure", "native", "auto"):
        assert load_config(path, {"AMCAST_CORE": core}).network.ttl == 0
    with pytest.raises(ConfigurationError, match="AMCAST_COR"):
        load_config(path, {"AMCAST_COR": "pure"})


@pytest.mark.parametrize(
    ("toml", "env", "needle"),
    [
        ("[network]\nprot = 1\n", {}, "unknown key network.prot"),
        ("[netwrk]\n", {}, "unknown key netwrk"),
        ("[network]\nport = 70000\n", {}, "network.port"),
        ('[network]\ngroup = "10.0.0.1"\n', {}, "not a multicast address"),
        ("[node]\nid = 5\nmembers = [0, 1]\n", {}, "not in members"),
        ("[node]\nmembers = [1, 0]\n", {}, "ascending"),
        ("", {"AMCAST_NETWORK__TTL": "lots"}, "network.ttl"),
        ("", {"AMCAST_PORT": "1"}, "AMCAST_<SECTION>__<KEY>"),
        ("[api]\nclient_queue_max_bytes = 65536\n", {}, "client_queue_max_bytes"),
        ("[api]\nmax_pending_hellos = 0\n", {}, "api.max_pending_hellos"),
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


def test_file_not_utf8_is_a_clear_error(tmp_path: Path) -> None:
    """Found by the config fuzz target (fuzz/regressions/config): tomllib raises
    UnicodeDecodeError, not TOMLDecodeError, for bytes that are not UTF-8."""
    path = tmp_path / "latin1.toml"
    path.write_bytes(b"[node]\nid = 1\n# caf\xe9\n")
    with pytest.raises(ConfigurationError, match="not valid TOML: not UTF-8 at byte 19"):
        load_config(path, {})


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="does not exist"):
        load_config(tmp_path / "nope.toml", {})


def test_one_size_knob_and_the_limits_derived_from_it() -> None:
    """Item 4: api.max_message_bytes is the one knob; the rest follows and always fits."""
    cfg = DaemonConfig(protocol={"insecure": True})
    lim = cfg.limits()
    assert lim.max_message_bytes == cfg.api.max_message_bytes >= 1 << 20  # 1 MiB by default
    groups = sp.groups_bytes(cfg.api.max_groups, cfg.api.max_group_name_bytes)
    # the largest send frame (longest groups, a big id) fits the derived frame limit
    frame = msgpack.packb(
        {"t": "send", "id": 2**63 - 1, "groups": ["g" * cfg.api.max_group_name_bytes]
         * cfg.api.max_groups, "service": "agreed", "payloads": [b"x" * lim.max_message_bytes]},
        use_bin_type=True,
    )
    assert len(frame) <= lim.max_frame_bytes < lim.max_message_bytes + groups + 8192
    # ... and so does its envelope in the engine's limit
    env = sp.encode_envelope(2**63 - 1, ["g" * cfg.api.max_group_name_bytes] * cfg.api.max_groups,
                             [b"x" * lim.max_message_bytes])
    assert len(env) <= lim.engine_max_message_size == cfg.node_config().max_message_size
    assert cfg.node_config().max_pending_bytes >= lim.engine_max_message_size
    big = DaemonConfig(api={"max_message_bytes": 16 << 20}, protocol={"insecure": True})
    assert big.node_config().max_message_size > 16 << 20
    assert big.limits().max_frame_bytes > 16 << 20


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ({"api": {"max_frame_bytes": 1 << 20}}, "derived from api.max_message_bytes"),
        ({"api": {"submit_queue_frames": 10}}, "api.submit_queue_bytes"),
        ({"api": {"max_message_bytes": 64 << 20}}, "client_queue_max_bytes"),
        ({"api": {"max_message_bytes": 40 << 20, "client_queue_max_bytes": 1 << 30}},
         "submit_queue_bytes"),
    ],
)
def test_limits_that_would_disagree_are_refused(data: dict, needle: str) -> None:
    with pytest.raises(ValidationError, match=needle):
        DaemonConfig.model_validate(data)


def test_engine_size_keys_cannot_contradict_the_api_limit() -> None:
    with pytest.raises(ConfigurationError, match=r"derived from api\.max_message_bytes"):
        DaemonConfig(protocol={"insecure": True, "max_message_size": 1000}).node_config()
    with pytest.raises(ConfigurationError, match="max_pending_bytes"):
        DaemonConfig(protocol={"insecure": True, "max_pending_bytes": 1000}).node_config()
    cfg = DaemonConfig(api={"max_message_bytes": 48 << 20, "client_queue_max_bytes": 1 << 30,
                            "submit_queue_bytes": 1 << 30}, protocol={"insecure": True})
    nc = cfg.node_config()  # unset max_pending_bytes grows to hold the largest envelope
    assert nc.max_pending_bytes == nc.max_message_size > 48 << 20


@pytest.mark.parametrize("argv", [["--bogus"], ["--config"], ["extra"]])
def test_a_usage_error_of_amcastd_is_one_line_and_exits_2(
    argv: list[str], capsys: pytest.CaptureFixture[str],
) -> None:
    from amcast.daemon.main import main

    with pytest.raises(SystemExit) as stop:
        main(argv)
    err = capsys.readouterr().err.splitlines()
    assert stop.value.code == 2 and len(err) == 1, err
    assert err[0].startswith("amcastd: error: ") and err[0].endswith("(see amcastd --help)")
