"""The typed configuration of one member's federation layer.

``clusters`` names every cluster of the federation and its member node ids (the same
mapping at every member of every cluster); ``cluster`` is the member's own. The other
fields bound time and memory: how often an unacknowledged datagram is sent again,
when a message that waits counts as stalled, how many messages may be in flight and
how many delivered ids the replicated state remembers (the duplicate horizon).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import ConfigurationError

MAX_NAME_BYTES = 64
"""Cluster and node ids: at most this many ASCII bytes (the wire refuses longer ones)."""
MAX_CLUSTERS = 64
"""At most this many clusters in a federation, so at most this many in Dst(m)."""


@dataclass(frozen=True)
class FederationConfig:
    cluster: str
    """This member's own cluster."""
    clusters: Mapping[str, tuple[str, ...]]
    """Cluster name -> the node ids of its members (every node that may ever be in a
    view of that cluster)."""
    retransmit_s: float = 0.2
    """A Submit, Timestamp or own record not yet acknowledged is sent again after this
    long (doubling up to ``8 * retransmit_s`` for a cluster that stays silent)."""
    stall_after_s: float = 5.0
    """A message known here that is still undelivered after this long is reported
    (``Stalled``), and again every ``stall_after_s`` while it waits."""
    max_in_flight: int = 10_000
    """Own multicasts not yet acknowledged by every destination; also the bound of the
    replicated pending set and of the timestamps that arrived before their Submit."""
    horizon: int = 65_536
    """Delivered ids the replicated state remembers, to drop duplicates; older ones are
    summarised by a per-origin sequence floor (docs/multigroup.md)."""
    max_payload: int = 1 << 20
    """Largest payload of a global message, bytes."""
    snapshot_retry_s: float = 2.0
    """A joiner whose state request got no snapshot after this long asks again."""
    deadline_s: float = 60.0
    """An own multicast that not every destination cluster has acknowledged holding
    after this long is reported to its client (``Undelivered``, outcome ``unknown``:
    the member goes on trying, so it may still be delivered, by every destination)."""

    def __post_init__(self) -> None:
        if self.cluster not in self.clusters:
            raise ConfigurationError(f"federation: own cluster {self.cluster!r} is not in "
                                     "clusters")
        if len(self.clusters) > MAX_CLUSTERS:
            raise ConfigurationError(f"federation: more than {MAX_CLUSTERS} clusters")
        seen: set[str] = set()
        for name, members in self.clusters.items():
            _check_name(name, "cluster")
            if not members:
                raise ConfigurationError(f"federation: cluster {name!r} has no members")
            for node in members:
                _check_name(node, "node")
                if node in seen:
                    raise ConfigurationError(f"federation: node {node!r} is in two clusters "
                                             "or twice in one")
                seen.add(node)
        if not self.retransmit_s > 0 or not self.stall_after_s > 0:
            raise ConfigurationError("federation: retransmit_s and stall_after_s must be > 0")
        if self.max_in_flight < 1 or self.horizon < 1 or self.max_payload < 0:
            raise ConfigurationError("federation: max_in_flight and horizon must be >= 1")
        if not self.snapshot_retry_s > 0:
            raise ConfigurationError("federation: snapshot_retry_s must be > 0")
        if not self.deadline_s > 0:
            raise ConfigurationError("federation: deadline_s must be > 0")

    def members_of(self, cluster: str) -> tuple[str, ...]:
        return tuple(self.clusters[cluster])


def _check_name(name: str, what: str) -> None:
    if (not isinstance(name, str) or not name or not name.isascii()
            or len(name) > MAX_NAME_BYTES):
        raise ConfigurationError(f"federation: {what} id {name!r} must be 1 to "
                                 f"{MAX_NAME_BYTES} ASCII characters")
