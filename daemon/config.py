"""The daemon's configuration: one pydantic model, loaded from TOML, overridden by env.

Theory of operation: ``load_config(path, environ)`` reads the TOML file with the
stdlib ``tomllib``, applies ``AMCAST_<SECTION>__<KEY>=value`` environment overrides
(values are parsed as JSON when they parse, else taken as strings, so
``AMCAST_NODE__MEMBERS='[0,1,2]'`` and ``AMCAST_NETWORK__INTERFACE=127.0.0.1`` both
work), and validates the result with ``DaemonConfig``. Unknown sections or keys and bad
values are start-up errors (``ConfigurationError``) naming the offending key.
``AMCAST_CONFIG`` names the config file when ``--config`` is not given and is not an
override; nor are ``AMCAST_CORE``, ``AMCAST_SEAL``, ``AMCAST_RELIABLE`` and ``AMCAST_IO``
(the data path's core, docs/native.md).

The ``[protocol]`` table is handed to the sans-IO engine's ``NodeConfig``
(``amcast.protocols.node_config``) after validating its keys against that dataclass, so the
engine keeps the single definition (and the defaults) of its own knobs.

One limit for one thing: an application message has one maximum size,
``api.max_message_bytes``. The largest client frame (``ApiSection.max_frame_bytes``) and
the engine's largest message (``NodeConfig.max_message_size``: one envelope) are derived
from it by adding the protocol's overheads (``amcast.socket_protocol``); neither is a
setting, so they can never disagree. ``DaemonConfig.limits`` lists the effective values
(``amcastd --check`` prints them). Cross-checks make every queue hold at least one
largest message.

Every key, its unit and its default are documented in ``config/amcastd.toml``.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .. import socket_protocol as sp
from ..protocols.errors import ConfigurationError
from ..protocols.node_config import NodeConfig
from ..protocols.reliable.native import RELIABLE_ENV
from ..protocols.wire.keys import Keyring
from ..protocols.wire.native import CORE_ENV, SEAL_ENV
from .access import parse_principal
from .keyfile import load_keyring
from .socket_io import IO_ENV

ENV_PREFIX = "AMCAST_"
MAX_MESSAGE_BYTES = 1 << 30
"""Upper bound of ``api.max_message_bytes`` (1 GiB; frames carry a u32 length)."""
ENV_CONFIG_PATH = "AMCAST_CONFIG"
ENV_NOT_KEYS = frozenset({ENV_CONFIG_PATH, CORE_ENV, SEAL_ENV, RELIABLE_ENV, IO_ENV})
"""Variables of the ``AMCAST_`` prefix that are not configuration keys: the config file's
path and the data path's core, sealing, reliable layer and socket I/O (docs/native.md)."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NodeSection(_Section):
    id: int = Field(0, ge=0, description="this daemon's stable node id")
    members: list[int] = Field(default_factory=lambda: [0], min_length=1)
    seed: int | None = Field(None, description="seed of the engine's random.Random")
    state_dir: str = Field(
        "/var/lib/amcast",
        description="directory of the membership state file (incarnation, ballots, last view)",
    )

    @model_validator(mode="after")
    def _member(self) -> NodeSection:
        if len(set(self.members)) != len(self.members):
            raise ValueError(f"members has duplicates: {self.members}")
        if self.members != sorted(self.members):
            raise ValueError(f"members must be in processor-id (ascending) order: {self.members}")
        if self.id not in self.members:
            raise ValueError(f"node id {self.id} is not in members {self.members}")
        return self


class RedundantLink(_Section):
    """A second link (``network.redundant``): every datagram also goes this way."""

    interface: str = Field(description="address of the second interface (same IP version)")
    port: int | None = Field(None, ge=1, le=65535,
                             description="its UDP port; unset: network.port")
    peers: dict[int, str] = Field(
        default_factory=dict,
        description="unicast: node id -> 'host:port' of every other member on this link")

    @field_validator("interface")
    @classmethod
    def _interface(cls, value: str) -> str:
        ipaddress.ip_address(value)
        return value

    @field_validator("peers")
    @classmethod
    def _peers(cls, value: dict[int, str]) -> dict[int, str]:
        for node, address in value.items():
            split_host_port(address, f"redundant.peers.{node}")
        return value


class NetworkSection(_Section):
    transport: Literal["multicast", "unicast"] = Field(
        "multicast",
        description="multicast: one datagram to the group reaches every member (a LAN); "
        "unicast: every datagram goes to each member's address in network.peers over UDP "
        "(clouds, Kubernetes: no IP multicast needed; a datagram is sent N-1 times)",
    )
    peers: dict[int, str] = Field(
        default_factory=dict,
        description="unicast: node id -> 'host:port' of every other member (host names "
        "allowed, re-resolved every resolve_interval_s); this node listens on "
        "interface:port",
    )
    resolve_interval_s: float = Field(
        5.0, gt=0, description="unicast: seconds between DNS lookups of peer host names")
    redundant: RedundantLink | None = Field(
        None, description="a second link (knet style): each datagram is sent on both, the "
        "second copy is dropped on arrival; a cut link stalls nothing")
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
        addr = ipaddress.ip_address(value)
        if not addr.is_multicast:
            raise ValueError(f"{value} is not a multicast address (224.0.0.0/4, ff00::/8)")
        return value

    @field_validator("interface")
    @classmethod
    def _interface(cls, value: str) -> str:
        ipaddress.ip_address(value)
        return value

    @model_validator(mode="after")
    def _one_family(self) -> NetworkSection:
        if (self.transport == "multicast" and ipaddress.ip_address(self.group).version
                != ipaddress.ip_address(self.interface).version):
            raise ValueError(f"group {self.group} and interface {self.interface} are not of "
                             "one IP version (IPv6: an ff0x:: group and an IPv6 address)")
        return self

    @model_validator(mode="after")
    def _redundant(self) -> NetworkSection:
        r = self.redundant
        if r is None:
            return self
        if ipaddress.ip_address(r.interface).version != ipaddress.ip_address(
                self.interface).version:
            raise ValueError("redundant.interface must be of the IP version of interface")
        if r.interface == self.interface and (r.port or self.port) == self.port:
            raise ValueError("redundant must differ from the first link (interface or port)")
        if self.transport == "unicast" and set(r.peers) != set(self.peers):
            raise ValueError("redundant.peers must name the same members as peers")
        return self

    def second_link(self) -> NetworkSection | None:
        """The ``redundant`` link as a network section of its own (``None``: none)."""
        r = self.redundant
        if r is None:
            return None
        return self.model_copy(update={"interface": r.interface, "port": r.port or self.port,
                                       "peers": r.peers, "redundant": None})

    @property
    def ipv6(self) -> bool:
        """The daemon speaks IPv6 (its interface address is one)."""
        return ipaddress.ip_address(self.interface).version == 6

    @field_validator("peers")
    @classmethod
    def _peers(cls, value: dict[int, str]) -> dict[int, str]:
        for node, address in value.items():
            split_host_port(address, f"peers.{node}")
        return value


def split_host_port(address: str, what: str = "address") -> tuple[str, int]:
    """``"host:port"`` or ``"[v6 address]:port"`` -> ``(host, port)``; ``ValueError``
    naming ``what`` otherwise."""
    host, sep, port = address.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f"{what}: {address!r}: {host!r} is not an IPv6 address") from None
    elif ":" in host:
        raise ValueError(f"{what}: {address!r}: write an IPv6 address as '[addr]:port'")
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"{what}: {address!r} is not 'host:port' (port 1..65535)")
    return host, int(port)


RETIRED_API_KEYS = {
    "max_frame_bytes": "the frame limit is derived from api.max_message_bytes; remove the key",
    "submit_queue_frames": "the submit queue is bounded in bytes: api.submit_queue_bytes",
}


class ApiSection(_Section):
    socket: str = "/run/amcast/amcastd.sock"
    socket_mode: int = Field(0o660, ge=0, le=0o777)
    socket_group: str = ""
    max_message_bytes: int = Field(1 << 20, ge=1, le=MAX_MESSAGE_BYTES)
    max_groups: int = Field(64, ge=1, le=4096)
    max_group_name_bytes: int = Field(128, ge=1, le=65535)
    max_clients: int = Field(256, ge=1)
    max_pending_hellos: int = Field(256, ge=1)
    client_queue_high_bytes: int = Field(4 << 20, ge=65536)
    client_queue_max_bytes: int = Field(32 << 20, ge=65536)
    slow_reader_timeout_s: float = Field(5.0, gt=0)
    hello_timeout_s: float = Field(5.0, gt=0)
    frame_timeout_s: float = Field(10.0, gt=0)
    submit_queue_bytes: int = Field(64 << 20, ge=65536)
    close_grace_s: float = Field(5.0, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _retired(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key, why in RETIRED_API_KEYS.items():
                if key in data:
                    raise ValueError(f"api.{key} is not a setting any more: {why}")
        return data

    @field_validator("socket_mode", mode="before")
    @classmethod
    def _mode(cls, value: Any) -> Any:
        if isinstance(value, str):
            return int(value, 8)
        return value

    @property
    def max_frame_bytes(self) -> int:
        """Largest frame body a client may send: one largest message plus the frame's
        other fields (derived from ``max_message_bytes``, never configured)."""
        return self.max_message_bytes + sp.send_frame_overhead(
            self.max_groups, self.max_group_name_bytes
        )

    @model_validator(mode="after")
    def _queues(self) -> ApiSection:
        if self.client_queue_max_bytes < self.client_queue_high_bytes:
            raise ValueError("client_queue_max_bytes must be >= client_queue_high_bytes")
        frame = self.max_frame_bytes
        if self.client_queue_max_bytes < self.client_queue_high_bytes + frame:
            raise ValueError(
                f"api.client_queue_max_bytes ({self.client_queue_max_bytes}) must be >= "
                f"client_queue_high_bytes + the largest frame ({self.client_queue_high_bytes} "
                f"+ {frame}, from api.max_message_bytes), or a reading client could be "
                "disconnected for one delivery"
            )
        if self.submit_queue_bytes < 2 * frame:
            raise ValueError(
                f"api.submit_queue_bytes ({self.submit_queue_bytes}) must be >= twice the "
                f"largest frame ({2 * frame}, from api.max_message_bytes)"
            )
        return self


class MetricsSection(_Section):
    enabled: bool = True
    address: str = "127.0.0.1"
    port: int = Field(9464, ge=0, le=65535)
    max_connections: int = Field(
        16, ge=1, le=1024,
        description="connections served at once; more are closed at once and counted "
        "(amcast_metrics_connections_refused_total{reason=\"max_connections\"})",
    )
    header_timeout_s: float = Field(
        5.0, gt=0, le=300,
        description="seconds a connection has for its TLS handshake and a whole request "
        "head, and to read the response; an idle keep-alive connection closes after it",
    )
    max_header_bytes: int = Field(
        8192, ge=1024, le=1 << 20,
        description="largest request head (request line and headers); larger gets 431",
    )
    max_requests_per_s: float = Field(
        10.0, gt=0, le=10000,
        description="requests answered per second on average (bursts of one second's "
        "worth); while none is left nothing is accepted and requests get 429",
    )
    render_interval_s: float = Field(
        1.0, ge=0, le=60,
        description="scrapes within this many seconds of a render get that render (0: "
        "render every scrape)",
    )
    tls_cert_file: str = Field("", description="PEM certificate (chain): serve HTTPS")
    tls_key_file: str = Field(
        "", description="PEM private key of tls_cert_file (mode 0600, or 0640 for the group)"
    )
    tls_client_ca_file: str = Field(
        "", description="PEM CA certificates: require a client certificate (mutual TLS)",
    )
    basic_auth_users_file: str = Field(
        "", description="YAML basic_auth_users: {name: bcrypt hash}, as Prometheus' "
        "web.config.yml (mode 0600, or 0640 for the group): require HTTP basic auth",
    )

    @model_validator(mode="after")
    def _tls(self) -> MetricsSection:
        if bool(self.tls_cert_file) != bool(self.tls_key_file):
            raise ValueError("metrics.tls_cert_file and metrics.tls_key_file go together")
        if self.tls_client_ca_file and not self.tls_cert_file:
            raise ValueError("metrics.tls_client_ca_file needs tls_cert_file and tls_key_file")
        return self


class LogsSection(_Section):
    dir: str = "/var/log/amcast"
    level: Literal["debug", "info", "warning", "error"] = "info"
    format: Literal["auto", "console", "json"] = "auto"
    delivery_log: bool = True
    trace: bool = Field(
        False, description="latency trace: trace.ndjson, a line per client send frame and "
        "per data-plane datagram sent or received (amcast.daemon.trace; costs CPU)")
    rotate_bytes: int = Field(64 << 20, ge=4096)
    rotate_keep: int = Field(5, ge=1)
    snapshot_interval_s: float = Field(10.0, gt=0)


class SystemdSection(_Section):
    watchdog: bool = True


class ShutdownSection(_Section):
    grace_s: float = Field(2.0, ge=0)
    leave_timeout_s: float = Field(1.0, ge=0)


class SecuritySection(_Section):
    key_file: str = Field(
        "/etc/amcast/authkey",
        description="the group key ring (amcast keygen makes it; mode 0400, the same file on "
        "every node); every datagram is sealed with AES-256-GCM under it. Not read when "
        "protocol.insecure = true",
    )


class HealthSection(_Section):
    stall_after_s: float = Field(5.0, gt=0)


class AccessRule(_Section):
    """One ``[access]`` rule (``amcast.daemon.access``): who may join and send to the
    groups whose names match ``groups``."""

    groups: list[str] = Field(
        min_length=1,
        description="group-name patterns (fnmatch globs, case-sensitive); one string or a list",
    )
    join: list[str] = Field(
        description="principals allowed to join: user:NAME, uid:N, group:NAME, gid:N, * "
                    "(anyone); [] = nobody")
    send: list[str] = Field(
        description="principals allowed to send, same syntax; [] = nobody")

    @field_validator("groups", mode="before")
    @classmethod
    def _one_or_more(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("groups")
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        if not all(value):
            raise ValueError("a group pattern is empty (\"*\" matches every group)")
        return value

    @field_validator("join", "send")
    @classmethod
    def _principals(cls, value: list[str]) -> list[str]:
        for text in value:
            parse_principal(text)
        return value


class AccessSection(_Section):
    default: Literal["allow", "deny"] = Field(
        "allow", description="what a join or send to a group no rule matches gets")
    rules: list[AccessRule] = Field(
        default_factory=list, description="ordered rules; the first whose pattern matches the "
                                          "group decides")


CLUSTER_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
"""A federation cluster's name: lower-case letters, digits, ``_`` and ``-``, at most 64."""


def parse_member(text: str, what: str = "member") -> tuple[int, str, int]:
    """``"node:host:port"`` (``"node:[v6 address]:port"``) -> ``(node, host, port)``;
    ``ValueError`` naming ``what`` otherwise."""
    node, sep, address = text.partition(":")
    if not sep or not node.isdigit():
        raise ValueError(f"{what}: {text!r} is not 'node:host:port' (node: a node id)")
    host, port = split_host_port(address, what)
    return int(node), host, port


class FederationCluster(_Section):
    """One cluster of a federation (``[federation.clusters.NAME]``)."""

    members: list[str] = Field(
        min_length=1,
        description="'node:host:port' of every daemon of the cluster: its node id and the "
        "address it takes cross-cluster datagrams on")

    @field_validator("members")
    @classmethod
    def _members(cls, value: list[str]) -> list[str]:
        nodes = [parse_member(m, "members")[0] for m in value]
        if len(set(nodes)) != len(nodes):
            raise ValueError(f"members: a node id is listed twice: {value}")
        return value

    def addresses(self) -> dict[int, tuple[str, int]]:
        """Node id -> (host, port)."""
        out: dict[int, tuple[str, int]] = {}
        for text in self.members:
            node, host, port = parse_member(text)
            out[node] = (host, port)
        return out


class FederationSection(_Section):
    """Several clusters (``amcast.daemon.federation``); off while ``cluster`` is empty."""

    cluster: str = Field("", description="this daemon's cluster ('' = no federation)")
    clusters: dict[str, FederationCluster] = Field(
        default_factory=dict, description="every cluster of the federation, this one "
        "included: name -> its members")
    retransmit_s: float = Field(0.5, gt=0, le=60,
                                description="seconds between resends of unanswered "
                                "cross-cluster datagrams")
    stall_after_s: float = Field(5.0, gt=0,
                                 description="a cross-cluster message older than this is "
                                 "reported stalled")
    deadline_s: float = Field(60.0, gt=0,
                              description="an own cross-cluster message that not every "
                              "destination cluster acknowledged holding after this long is "
                              "reported undelivered to its client (outcome unknown)")
    tick_s: float = Field(0.05, gt=0, le=5,
                          description="seconds between the federation's timer ticks")

    @property
    def enabled(self) -> bool:
        return bool(self.cluster)

    @model_validator(mode="after")
    def _names(self) -> FederationSection:
        for name in self.clusters:
            if not CLUSTER_NAME.match(name):
                raise ValueError(f"clusters.{name}: a cluster name is 1-64 of a-z 0-9 _ - "
                                 "(a letter or digit first)")
        if self.cluster and self.cluster not in self.clusters:
            raise ValueError(f"cluster {self.cluster!r} is not one of clusters "
                             f"({', '.join(sorted(self.clusters)) or 'none'})")
        if not self.cluster and self.clusters:
            raise ValueError("clusters are listed but cluster (this daemon's) is not set")
        seen: dict[tuple[str, int], str] = {}
        for name, c in self.clusters.items():
            for node, address in c.addresses().items():
                where = f"clusters.{name}.members[{node}]"
                if address in seen:
                    raise ValueError(f"{where}: address {address[0]}:{address[1]} is also "
                                     f"{seen[address]}")
                seen[address] = where
        return self


class DaemonConfig(_Section):
    node: NodeSection = NodeSection()
    network: NetworkSection = NetworkSection()
    api: ApiSection = ApiSection()
    metrics: MetricsSection = MetricsSection()
    logs: LogsSection = LogsSection()
    systemd: SystemdSection = SystemdSection()
    shutdown: ShutdownSection = ShutdownSection()
    health: HealthSection = HealthSection()
    security: SecuritySection = SecuritySection()
    access: AccessSection = AccessSection()
    federation: FederationSection = FederationSection()
    protocol: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _federation(self) -> DaemonConfig:
        fed = self.federation
        if not fed.enabled:
            return self
        own = set(fed.clusters[fed.cluster].addresses())
        if own != set(self.node.members):
            raise ValueError(f"federation.clusters.{fed.cluster}.members must list exactly "
                             f"node.members {self.node.members} (it lists {sorted(own)})")
        return self

    @model_validator(mode="after")
    def _unicast_peers(self) -> DaemonConfig:
        if self.network.transport == "unicast":
            missing = [m for m in self.node.members
                       if m != self.node.id and m not in self.network.peers]
            if missing:
                raise ValueError(f"network.transport = unicast needs network.peers for "
                                 f"members {missing} ('host:port' each)")
        return self

    @property
    def insecure(self) -> bool:
        return self.protocol.get("insecure") is True

    def node_config(self, keyring: Keyring | None = None) -> NodeConfig:
        """The engine's ``NodeConfig`` built from ``[protocol]`` (validated, typed), its
        ``max_message_size`` derived from ``api.max_message_bytes`` (see ``limits``), its
        keys ``keyring`` (unless insecure; ``None``: read ``security.key_file``)."""
        if keyring is None and not self.insecure:
            # the [protocol] table's own errors first, then the key file's
            build_node_config(self.protocol, self.api, self.network, SIZING_KEYS)
            keyring = load_keyring(self.security.key_file)
        return build_node_config(self.protocol, self.api, self.network, keyring)

    def limits(self, node_config: NodeConfig | None = None) -> Limits:
        """The effective size limits (every one derived from ``api.max_message_bytes``)."""
        nc = self.node_config(SIZING_KEYS) if node_config is None else node_config
        return Limits(
            max_message_bytes=self.api.max_message_bytes,
            max_frame_bytes=self.api.max_frame_bytes,
            envelope_bytes=envelope_bytes(nc.datagram_budget),
            engine_max_message_size=nc.max_message_size,
            engine_max_pending_bytes=nc.max_pending_bytes,
            submit_queue_bytes=self.api.submit_queue_bytes,
        )


@dataclasses.dataclass(frozen=True, slots=True)
class Limits:
    """Sizes in bytes, all derived from the one knob ``api.max_message_bytes``."""

    max_message_bytes: int
    """Largest application message: checked once, at the API (``message_too_large``)."""
    max_frame_bytes: int
    """Largest frame body a client may send (one largest message plus its fields)."""
    envelope_bytes: int
    """Payload bytes per envelope when the daemon splits a many-message frame."""
    engine_max_message_size: int
    """The engine's ``NodeConfig.max_message_size``: the largest envelope."""
    engine_max_pending_bytes: int
    """The engine's ``NodeConfig.max_pending_bytes`` (>= its max_message_size)."""
    submit_queue_bytes: int
    """Hard cap of the daemon's submit queue; past it a send gets ``overloaded``."""


ENVELOPE_DATAGRAM_OVERHEAD = 200
"""Engine header, tag and envelope framing kept free in a datagram (bytes, generous)."""


def envelope_bytes(datagram_budget: int) -> int:
    """Payload bytes per envelope, so that one envelope fits one datagram (bigger single
    messages get an envelope of their own, which the engine fragments)."""
    return max(256, datagram_budget - ENVELOPE_DATAGRAM_OVERHEAD)


DERIVED_PROTOCOL_KEYS = {
    "max_message_size": "it is derived from api.max_message_bytes (set that instead)",
    "receive_buffer_bytes": "it is network.recv_buffer_bytes (set that instead)",
    "group_key": "the keys live in a key file: set security.key_file (amcast keygen makes one)",
    "keyring": "the keys live in a key file: set security.key_file (amcast keygen makes one)",
}
SIZING_KEYS = Keyring.single(bytes(32))
"""A stand-in ring for ``limits`` (sizes do not depend on the keys; no file is read)."""


def build_node_config(table: Mapping[str, Any], api: ApiSection | None = None,
                      network: NetworkSection | None = None,
                      keyring: Keyring | None = None) -> NodeConfig:
    from pydantic import TypeAdapter

    api = ApiSection() if api is None else api
    network = NetworkSection() if network is None else network
    known = {f.name for f in dataclasses.fields(NodeConfig) if f.init}
    unknown = sorted(set(table) - known)
    if unknown:
        raise ConfigurationError(
            f"[protocol]: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )
    for key, why in DERIVED_PROTOCOL_KEYS.items():
        if key in table:
            raise ConfigurationError(f"[protocol] {key}: not a setting: {why}")
    values = dict(table)
    values["max_message_size"] = engine_max_message_size(api, values.get("datagram_budget"))
    values["receive_buffer_bytes"] = network.recv_buffer_bytes
    pending = values.get("max_pending_bytes")
    if pending is None:
        default = _field_default(NodeConfig, "max_pending_bytes")
        values["max_pending_bytes"] = max(default, values["max_message_size"])
    elif isinstance(pending, int) and pending < values["max_message_size"]:
        raise ConfigurationError(
            f"[protocol] max_pending_bytes ({pending}) must be >= the largest envelope "
            f"({values['max_message_size']}, from api.max_message_bytes)"
        )
    try:
        config = TypeAdapter(NodeConfig).validate_python({**values, "insecure": True})
        if values.get("insecure") is True:
            return config
        if keyring is None:
            raise ConfigurationError("no keys: set security.key_file, or protocol.insecure = true")
        return dataclasses.replace(config, insecure=False, keyring=keyring)
    except ValidationError as exc:
        raise ConfigurationError(f"[protocol]: {_describe(exc)}") from None
    except (ValueError, TypeError) as exc:
        raise ConfigurationError(f"[protocol]: {exc}") from None


def engine_max_message_size(api: ApiSection, datagram_budget: Any = None) -> int:
    """The largest envelope: one largest message (or one split run of small ones) in its
    envelope (client id, groups, headers)."""
    budget = datagram_budget if isinstance(datagram_budget, int) else _field_default(
        NodeConfig, "datagram_budget"
    )
    return max(api.max_message_bytes, envelope_bytes(budget)) + sp.envelope_overhead(
        api.max_groups, api.max_group_name_bytes
    )


def _field_default(cls: Any, name: str) -> Any:
    return next(f.default for f in dataclasses.fields(cls) if f.name == name)


def env_overrides(environ: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """``AMCAST_SECTION__KEY=value`` pairs as a nested dict (see the module docstring)."""
    out: dict[str, dict[str, Any]] = {}
    for name, raw in environ.items():
        if not name.startswith(ENV_PREFIX) or name in ENV_NOT_KEYS:
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
        except UnicodeDecodeError as exc:  # tomllib decodes the bytes before it parses
            raise ConfigurationError(
                f"config file {path} is not valid TOML: not UTF-8 at byte {exc.start}"
            ) from None
    overrides = env_overrides(environ)
    for section, keys in overrides.items():
        current = data.get(section, {})
        if not isinstance(current, dict):
            raise ConfigurationError(f"[{section}] must be a table")
        data[section] = {**current, **keys}
    try:
        config = DaemonConfig.model_validate(data)
    except ValidationError as exc:
        # a key set by the environment is blamed on its variable, not on the file
        from_env = {f"{section}.{key}": f"{ENV_PREFIX}{section.upper()}__{key.upper()}"
                    for section, keys in overrides.items() for key in keys}
        locs = {".".join(str(p) for p in err["loc"][:2]) for err in exc.errors()}
        where = f" in {path}" if path and not locs <= from_env.keys() else ""
        raise ConfigurationError(
            f"invalid configuration{where}: {_describe(exc, from_env)}") from None
    return config


def _describe(exc: ValidationError, from_env: Mapping[str, str] | None = None) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        variable = (from_env or {}).get(".".join(str(p) for p in err["loc"][:2]))
        if variable is not None:
            loc = f"{loc} (environment variable {variable})"
        msg = str(err["msg"]).removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            parts.append(f"unknown key {loc}")
        elif err["type"] == "value_error":
            parts.append(msg if not loc or msg.startswith(loc) else f"{loc}: {msg}")
        elif loc:
            parts.append(f"{loc}: {msg} (got {err.get('input')!r})")
        else:
            parts.append(msg)
    return "; ".join(parts)
