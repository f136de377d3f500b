"""Several local clusters on this host, federated: ``amcast cluster start --clusters K``.

Theory of operation: a ``LocalFederation`` is K ``LocalCluster`` objects (clusters
``a``, ``b``, ``c``, ... in subdirectories of one directory), each with its own multicast
group and port, sharing one key ring (``authkey`` in the directory: every cross-cluster
datagram is sealed under it, as every cluster's own). Every daemon's config gets the
same ``[federation]`` table: its cluster's name and every cluster's members as
``node:127.0.0.1:port``, one free UDP port per daemon for the cross-cluster traffic.
The clusters start one after another (each waits for its own primary view);
``federation.json`` in the directory names the clusters for ``stop`` and ``load``.
"""

from __future__ import annotations

import json
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .keygen import new_keyring, write_keyring
from .localcluster import ClusterStateError, LocalCluster, free_port

NAMES = string.ascii_lowercase
"""Cluster names, in order: ``a``, ``b``, ``c``, ..."""
INDEX = "federation.json"


@dataclass
class LocalFederation:
    clusters: int
    nodes: int
    directory: Path
    protocol: dict[str, Any] = field(default_factory=dict)
    metrics: bool = True
    log_level: str = "warning"
    extra: dict[str, dict[str, Any]] = field(default_factory=dict)
    """More config tables for every daemon (``federation`` keys are merged)."""
    options: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Cluster -> more ``LocalCluster`` arguments (``transport``, ``unicast_ports``,
    ``peers``: a fault relay's ports, for tests)."""
    members: dict[str, LocalCluster] = field(default_factory=dict)
    ports: dict[str, list[int]] = field(default_factory=dict)
    """Cluster -> each node's federation port."""

    def __post_init__(self) -> None:
        if not 1 <= self.clusters <= len(NAMES):
            raise ValueError(f"clusters: 1..{len(NAMES)}, not {self.clusters}")
        self.directory = Path(self.directory).resolve()
        if self.members:
            return
        names = NAMES[: self.clusters]
        self.ports = {name: [free_port() for _ in range(self.nodes)] for name in names}
        table = {name: {"members": [f"{i}:127.0.0.1:{port}"
                                    for i, port in enumerate(self.ports[name])]}
                 for name in names}
        insecure = bool(self.protocol.get("insecure"))
        for name in names:
            extra = {k: dict(v) for k, v in self.extra.items()}
            extra["federation"] = {**extra.get("federation", {}), "cluster": name,
                                   "clusters": table}
            self.members[name] = LocalCluster(
                self.nodes, self.directory / name, protocol=dict(self.protocol),
                metrics=self.metrics, log_level=self.log_level, extra=extra,
                key_path=None if insecure else self.directory / "authkey",
                **self.options.get(name, {}))

    @property
    def names(self) -> list[str]:
        return list(self.members)

    def sockets(self, name: str) -> list[str]:
        return self.members[name].sockets

    def refuse_if_running(self) -> None:
        for cluster in self.members.values():
            cluster.refuse_if_running()

    def alive(self) -> list[int]:
        return [pid for c in self.members.values() for pid in c.alive()]

    def start(self, timeout: float = 30.0, *, detach: bool = False) -> None:
        """Write the shared key and every config, start each cluster (each waits for
        its own primary view), record ``federation.json``."""
        self.refuse_if_running()
        self.directory.mkdir(parents=True, exist_ok=True)
        key = self.directory / "authkey"
        if not self.protocol.get("insecure"):
            if key.exists():
                key.chmod(0o600)
                key.unlink()
            write_keyring(key, new_keyring())
        started: list[LocalCluster] = []
        try:
            for cluster in self.members.values():
                cluster.start(timeout, detach=detach)
                started.append(cluster)
        except BaseException:
            for cluster in started:
                cluster.stop(timeout=5)
            raise
        (self.directory / INDEX).write_text(json.dumps(
            {"clusters": self.names, "nodes": self.nodes, "ports": self.ports}, indent=2))

    def stop(self, timeout: float = 20.0) -> dict[str, dict[int, int | None]]:
        return {name: c.stop(timeout) for name, c in self.members.items()}

    @classmethod
    def load(cls, directory: Path) -> LocalFederation:
        """The federation ``start`` recorded in ``directory`` (``ClusterStateError`` if
        none)."""
        path = Path(directory) / INDEX
        try:
            info = json.loads(path.read_text())
            members = {name: LocalCluster.load(Path(directory) / name)
                       for name in info["clusters"]}
            return cls(len(members), int(info["nodes"]), Path(directory), members=members,
                       ports={k: list(v) for k, v in info.get("ports", {}).items()})
        except FileNotFoundError:
            raise ClusterStateError(f"no federation in {directory} ({INDEX} not found)") \
                from None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ClusterStateError(f"cannot read {path}: {exc}") from None

    @staticmethod
    def recorded(directory: Path) -> bool:
        """``directory`` holds a federation's record (``stop`` reads it)."""
        return (Path(directory) / INDEX).exists()
