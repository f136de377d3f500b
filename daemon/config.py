"""The daemon's configuration: one pydantic model, loaded from TOML, overridden by env.

Theory of operation: ``load_config(path, environ)`` reads the TOML file with the
stdlib ``tomllib``, applies ``AMCAST_<SECTION>__<KEY>=value`` environment overrides
(values are parsed as JSON when they parse, else taken as strings, so
``AMCAST_NODE__MEMBERS='[0,1,2]'`` and ``AMCAST_NETWORK__INTERFACE=127.0.0.1`` both
work), and validates the result with ``DaemonConfig``. Unknown sections or keys and bad
values are start-up errors (``ConfigurationError``) naming the offending key.
``AMCAST_CONFIG`` names the config file when ``--config`` is not given and is not an
override.

The ``[protocol]`` table is handed to the sans-IO engine's ``NodeConfig``
(``protocols.node_config``) after validating its keys against that dataclass, so the
engine keeps the single definition (and the defaults) of its own knobs.

Every key, its unit and its default are documented in ``config/amcastd.toml``.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from protocols.errors import ConfigurationError

ENV_PREFIX = "AMCAST_"
ENV_CONFIG_PATH = "AMCAST_CONFIG"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NodeSection(_Section):
    id: int = Field(0, ge=0, description="this daemon's stable node id")
    members: list[int] = Field(default_factory=lambda: [0], min_length=1)
    seed: int | None = Field(None, description="seed of the engine's random.Random")

    @model_validator(mode="after")
    def _member(self) -> NodeSection:
        if len(set(self.members)) != len(self.members):
            raise ValueError(f"members has duplicates: {self.members}")
        if self.members != sorted(self.members):
            raise ValueError(f"members must be in processor-id (ascending) order: {self.members}")
        if self.id not in self.members:
            raise ValueError(f"node id {self.id} is not in members {self.members}")
        return self


class NetworkSection(_Section):
    group: str = "239.255.42.99"
    port: int = Field(42999, ge=1, le=65535)
    interface: str = "127.0.0.1"
    ttl: int = Field(1, ge=0, le=255)
    loopback: bool = True
    recv_buffer_bytes: int = Field(4 << 20, ge=65536)
    send_buffer_bytes: int = Field(4 << 20, ge=65536)

    @field_validator("group")
    @classmethod
    def _group(cls, value: str) -> str:
        addr = ipaddress.IPv4Address(value)
        if not addr.is_multicast:
            raise ValueError(f"{value} is not an IPv4 multicast address (224.0.0.0/4)")
        return value

    @field_validator("interface")
    @classmethod
    def _interface(cls, value: str) -> str:
        ipaddress.IPv4Address(value)
        return value


class ApiSection(_Section):
    socket: str = "/run/amcast/amcastd.sock"
    socket_mode: int = Field(0o660, ge=0, le=0o777)
    socket_group: str = ""
    max_frame_bytes: int = Field(1 << 20, ge=1024)
    max_message_bytes: int = Field(65536, ge=1)
    max_groups: int = Field(64, ge=1)
    max_group_name_bytes: int = Field(128, ge=1)
    max_clients: int = Field(256, ge=1)
    client_queue_high_bytes: int = Field(4 << 20, ge=65536)
    client_queue_max_bytes: int = Field(32 << 20, ge=65536)
    submit_queue_frames: int = Field(1024, ge=1)
    close_grace_s: float = Field(5.0, ge=0)

    @field_validator("socket_mode", mode="before")
    @classmethod
    def _mode(cls, value: Any) -> Any:
        if isinstance(value, str):
            return int(value, 8)
        return value

    @model_validator(mode="after")
    def _queues(self) -> ApiSection:
        if self.client_queue_max_bytes < self.client_queue_high_bytes:
            raise ValueError("client_queue_max_bytes must be >= client_queue_high_bytes")
        if self.max_message_bytes > self.max_frame_bytes:
            raise ValueError("max_message_bytes must be <= max_frame_bytes")
        return self


class MetricsSection(_Section):
    enabled: bool = True
    address: str = "127.0.0.1"
    port: int = Field(9464, ge=0, le=65535)


class LogsSection(_Section):
    dir: str = "/var/log/amcast"
    level: Literal["debug", "info", "warning", "error"] = "info"
    format: Literal["auto", "console", "json"] = "auto"
    delivery_log: bool = True
    rotate_bytes: int = Field(64 << 20, ge=4096)
    rotate_keep: int = Field(5, ge=1)
    snapshot_interval_s: float = Field(10.0, gt=0)


class SystemdSection(_Section):
    watchdog: bool = True


class ShutdownSection(_Section):
    grace_s: float = Field(2.0, ge=0)


class DaemonConfig(_Section):
    node: NodeSection = NodeSection()
    network: NetworkSection = NetworkSection()
    api: ApiSection = ApiSection()
    metrics: MetricsSection = MetricsSection()
    logs: LogsSection = LogsSection()
    systemd: SystemdSection = SystemdSection()
    shutdown: ShutdownSection = ShutdownSection()
    protocol: dict[str, Any] = Field(default_factory=dict)

    def node_config(self) -> Any:
        """The engine's ``NodeConfig`` built from ``[protocol]`` (validated, typed)."""
        return build_node_config(self.protocol)


def build_node_config(table: Mapping[str, Any]) -> Any:
    from pydantic import TypeAdapter

    from protocols.node_config import NodeConfig  # the engine's own definition of its knobs

    known = {f.name for f in dataclasses.fields(NodeConfig) if f.init}
    unknown = sorted(set(table) - known)
    if unknown:
        raise ConfigurationError(
            f"[protocol]: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )
    values = dict(table)
    if isinstance(values.get("group_key"), str):
        values["group_key"] = values["group_key"].encode()
    try:
        return TypeAdapter(NodeConfig).validate_python(values)
    except ValidationError as exc:
        raise ConfigurationError(f"[protocol]: {_describe(exc)}") from None
    except (ValueError, TypeError) as exc:
        raise ConfigurationError(f"[protocol]: {exc}") from None


def env_overrides(environ: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """``AMCAST_SECTION__KEY=value`` pairs as a nested dict (see the module docstring)."""
    out: dict[str, dict[str, Any]] = {}
    for name, raw in environ.items():
        if not name.startswith(ENV_PREFIX) or name == ENV_CONFIG_PATH:
            continue
        rest = name[len(ENV_PREFIX) :]
        if "__" not in rest:
            raise ConfigurationError(
                f"environment variable {name}: expected AMCAST_<SECTION>__<KEY>, "
                "e.g. AMCAST_NETWORK__PORT=42999"
            )
        section, key = rest.lower().split("__", 1)
        try:
            value: Any = json.loads(raw)
        except ValueError:
            value = raw
        out.setdefault(section, {})[key] = value
    return out


def load_config(
    path: str | Path | None = None, environ: Mapping[str, str] | None = None
) -> DaemonConfig:
    """Read, override and validate; raise ``ConfigurationError`` with the key at fault."""
    environ = {} if environ is None else environ
    data: dict[str, Any] = {}
    if path is None:
        path = environ.get(ENV_CONFIG_PATH)
    if path is not None:
        try:
            with open(path, "rb") as fh:
                data = tomllib.load(fh)
        except FileNotFoundError:
            raise ConfigurationError(f"config file {path} does not exist") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigurationError(f"config file {path} is not valid TOML: {exc}") from None
    for section, keys in env_overrides(environ).items():
        current = data.get(section, {})
        if not isinstance(current, dict):
            raise ConfigurationError(f"[{section}] must be a table")
        data[section] = {**current, **keys}
    try:
        config = DaemonConfig.model_validate(data)
    except ValidationError as exc:
        where = f" in {path}" if path else ""
        raise ConfigurationError(f"invalid configuration{where}: {_describe(exc)}") from None
    return config


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        if err["type"] == "extra_forbidden":
            parts.append(f"unknown key {loc}")
        elif loc:
            parts.append(f"{loc}: {err['msg']} (got {err.get('input')!r})")
        else:
            parts.append(str(err["msg"]).removeprefix("Value error, "))
    return "; ".join(parts)
