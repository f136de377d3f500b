"""Reload (SIGHUP): what of a changed configuration applies without a restart.

A changed ``[access]`` applies to the requests that follow (groups already joined are
kept); a changed ``node.members`` takes effect at the next view change
(``Node.reconfigure``); changed ``network.peers`` (unicast) and key file at once (a key
rollover: the engine accepts every key of the new ring and moves its sending key as the
peers advertise theirs). Any other change needs a restart and is only logged; a
configuration that does not load is logged and ignored.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Protocol

import structlog

from ..protocols.node import Node
from ..protocols.node_config import NodeConfig
from .access import AccessPolicy
from .api import ApiServer
from .config import DaemonConfig
from .federation import Federation
from .keyfile import load_keyring
from .redundant import RedundantTransport
from .transports import AnyTransport
from .unicast import UnicastTransport

log = structlog.get_logger("amcastd")


class Host(Protocol):
    """What a reload reads and replaces of the daemon."""

    config: DaemonConfig
    node_config: NodeConfig
    node_id: int
    node: Node | None
    api: ApiServer
    transport: AnyTransport | None
    federation: Federation | None

    def now(self) -> float: ...

    def wall_time(self) -> float: ...

    def request_pump(self) -> None: ...


def reload_keys(d: Host, new: DaemonConfig) -> None:
    """A key rollover: the key file is read again; the engine accepts every key of
    the new ring at once and moves its sending key as the peers advertise theirs."""
    node = d.node
    if d.config.insecure or new.insecure or node is None:
        return
    try:
        keys = load_keyring(new.security.key_file)
        if keys == d.node_config.keys():
            return
        node.set_keyring(keys, d.now())
    except Exception as exc:
        log.error("reload: key file refused, keeping the running keys", node=d.node_id,
                  error=str(exc))
        return
    d.node_config = dataclasses.replace(d.node_config, keyring=keys, group_key=None)
    if d.federation is not None:  # the cross-cluster link seals under the same ring
        d.federation.link.auth.set_keys(keys, int(d.wall_time() * 1000))
    log.info("key ring reloaded", node=d.node_id, key_ids=list(keys.ids),
             sending_with=node.key_status().get("sends_with"))


def reload(d: Host, load: Callable[[], DaemonConfig]) -> None:
    """SIGHUP: re-read the configuration; a changed ``[access]`` applies to the
    requests that follow (groups already joined are kept); a changed ``node.members``
    takes effect at the next view change (``Node.reconfigure``), changed
    ``network.peers`` (unicast) and key file at once; any other change needs a restart
    and is only logged. A configuration that does not load (``load`` raises) is logged
    and ignored."""
    try:
        new = load()
    except Exception as exc:
        log.error("reload failed: keeping the running configuration", node=d.node_id,
                  error=str(exc))
        return
    if new.access != d.config.access:
        d.api.access = AccessPolicy.from_config(new.access)
        d.config = d.config.model_copy(update={"access": new.access})
        log.info("access rules reloaded", node=d.node_id, rules=len(new.access.rules),
                 default=new.access.default)
    old = d.config
    reload_keys(d, new)
    if new.node.members != old.node.members:
        try:
            assert d.node is not None
            d.node.reconfigure(list(new.node.members), d.now())
        except Exception as exc:
            log.error("reload failed: member list refused", node=d.node_id,
                      error=str(exc))
            return
        log.info("member list reloaded", node=d.node_id,
                 old=list(old.node.members), new=list(new.node.members))
        d.config = old.model_copy(update={"node": new.node})
        d.request_pump()
    if (isinstance(d.transport, UnicastTransport | RedundantTransport)
            and new.network.peers != old.network.peers):
        d.transport.set_peers(new.network.peers)  # names: at the next lookup round
        log.info("peer addresses reloaded", node=d.node_id,
                 peers={str(k): v for k, v in new.network.peers.items()})
        d.config = d.config.model_copy(update={
            "network": d.config.network.model_copy(update={"peers": new.network.peers})})
    skip = {"node": {"members"}, "security": {"key_file"}, "network": {"peers"},
            "access": True}
    rest_old = old.model_dump(exclude=skip)
    rest_new = new.model_dump(exclude=skip)
    if rest_old != rest_new:
        changed = sorted(k for k in rest_new if rest_new[k] != rest_old.get(k))
        log.warning("reload: only node.members, network.peers, the key file's keys and "
                    "[access] take effect without a restart",
                    node=d.node_id, changed_sections=changed)
