"""``amcastd --check``: accept exactly what the daemon accepts, and show what it would run.

Theory of operation: ``check(config)`` builds, in the daemon's order, the objects the
daemon builds at start-up, or tries what the daemon will do, without serving anything:

1. the engine: ``Node(node_config, node_id, members, ...)`` itself, the very constructor
   the daemon calls (it resolves phi for n = len(members): phi = 10 with 4 members, or
   ``gltoto`` with phi = 0.5, fail here as they fail there);
2. the API socket: the checks ``ApiServer.start`` makes (path length, directory
   creatable and writable, no live daemon on the path, ``socket_group`` exists);
3. the log directory: creatable and writable (``DeliveryLog`` creates it);
4. the network: ``MulticastTransport(config.network)`` opens the daemon's two multicast
   sockets (bind, group membership on ``network.interface``) and closes them at once;
5. the metrics endpoint: a throwaway TCP socket bound like the endpoint's asyncio server
   (``SO_REUSEADDR``) to ``metrics.address:metrics.port``, and its TLS and users files
   loaded as the daemon loads them (``amcast.daemon.metrics_access.load_access``).

A failure raises ``ConfigurationError`` (or ``OSError``), which ``amcastd`` prints as one
line with exit status 2, exactly as the daemon would. On success ``effective`` returns
the configuration the daemon would run with: every section with its defaults, the whole
engine configuration, and the derived values (size limits, the phi the engine resolved).
"""

from __future__ import annotations

import dataclasses
import grp
import os
import random
from typing import Any

from ..protocols import extension
from ..protocols.errors import ConfigurationError
from ..protocols.node import Node
from ..protocols.wire import native as cores
from .api import directory_problem, socket_path_problem
from .config import DaemonConfig
from .metrics_access import load_access
from .metrics_http import listening_socket
from .state import StateFile
from .transports import open_transport

HIDDEN = "<set, not shown>"


def check(config: DaemonConfig) -> dict[str, Any]:
    """Raise what the daemon would raise at start-up; return ``effective(...)``."""
    node_config = config.node_config()
    node = Node(node_config, node_id=config.node.id, members=list(config.node.members),
                rng=random.Random(0), now=0.0)
    problem = socket_path_problem(config.api.socket)
    if problem is not None:
        raise ConfigurationError(problem)
    if config.api.socket_group:
        try:
            grp.getgrnam(config.api.socket_group)
        except KeyError:
            raise ConfigurationError(
                f"api.socket_group: there is no group named {config.api.socket_group!r}"
            ) from None
    problem = directory_problem(config.logs.dir, "logs.dir") or log_files_problem(config.logs.dir)
    if problem is not None:
        raise ConfigurationError(problem)
    problem = directory_problem(config.node.state_dir, "node.state_dir")
    if problem is not None:
        raise ConfigurationError(problem)
    StateFile(config.node.state_dir, config.node.id).load()  # a damaged file stops the daemon
    open_transport(config.network, config.node.id).close()
    if config.metrics.enabled:
        check_tcp_bind(config.metrics.address, config.metrics.port)
        load_access(config.metrics)  # TLS and users files: present, loadable, private
    return effective(config, node_config, node.phi)


LOG_FILES = ("delivery.jsonl", "view.jsonl", "metrics.jsonl")


def log_files_problem(directory: str) -> str | None:
    """An existing log file the daemon could not append to, or ``None``."""
    for name in LOG_FILES:
        path = os.path.join(directory, name)
        if os.path.isdir(path) or (os.path.exists(path) and not os.access(path, os.W_OK)):
            return f"logs.dir: {path} exists and cannot be appended to"
    return None


def check_tcp_bind(address: str, port: int) -> None:
    """Bind (and close) the metrics endpoint's listening socket as the daemon would."""
    listening_socket(address, port).close()


def effective(config: DaemonConfig, node_config: Any, phi: float) -> dict[str, Any]:
    """The configuration the daemon runs with, defaults and derived values included."""
    shown = config.model_dump(mode="json")
    shown["api"]["socket_mode"] = f"0o{config.api.socket_mode:03o}"  # as written in the file
    protocol = dataclasses.asdict(node_config)
    keys = node_config.keys()
    del protocol["group_key"]
    protocol["keyring"] = None if keys is None else f"{HIDDEN}: key ids {list(keys.ids)}"
    shown["protocol"] = protocol
    limits = config.limits(node_config)
    shown["derived"] = {
        "api.max_frame_bytes": limits.max_frame_bytes,
        "protocol.max_message_size": limits.engine_max_message_size,
        "protocol.max_pending_bytes": limits.engine_max_pending_bytes,
        "envelope_bytes": limits.envelope_bytes,
        "phi": phi,
        # the data path's core as AMCAST_CORE and AMCAST_SEAL select it (docs/native.md)
        "core": {"decode": cores.core_name(), "seal": cores.seal_core()},
        # a built extension of another interface than the package's is not used
        "native_extension": extension.problem() or "used",
    }
    return shown
