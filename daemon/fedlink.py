"""The federation link: one sealed UDP socket between this daemon and the other clusters.

Theory of operation. The daemon binds the address its own entry of
``federation.clusters`` names and sends each cross-cluster datagram to the address of
the member the protocol chose. A datagram is the ``encode_link`` body (source cluster
and node, destination cluster, the protocol's bytes) sealed with AES-256-GCM under the
key ring of ``security.key_file`` by an ``Authenticator`` of its own
(``amcast.protocols.wire.auth``: a fresh random session per daemon life, the replay
window, key rollover), so the same key file serves the whole federation. ``open``
refuses, with ``DecodeError``, what does not authenticate, is stale or replayed, is
malformed, is not for this cluster, comes from this cluster or from a daemon the table
does not list; the caller counts the reasons. ``heard`` keeps when each cluster was last
heard (``ping`` sends empty datagrams for it).
"""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import time
from collections import Counter
from collections.abc import Callable

from ..protocols.errors import DecodeError
from ..protocols.wire.auth import SESSION_BYTES, Authenticator
from ..protocols.wire.keys import Keyring
from .config import FederationSection
from .fedframing import decode_link, encode_link
from .transport import MAX_DATAGRAM, TransportSetupError

MAX_READS = 256
"""Datagrams read per wake-up of the federation socket."""


class FederationLink:
    """One UDP socket on this daemon's federation address: sealed datagrams to and from
    the members of the other clusters (module docstring)."""

    def __init__(self, section: FederationSection, node_id: int, keys: Keyring | None,
                 wall_clock: Callable[[], float] = time.time) -> None:
        self.cluster = section.cluster
        self.node_id = node_id
        self.addresses: dict[tuple[str, int], tuple[str, int]] = {
            (name, node): address for name, c in section.clusters.items()
            for node, address in c.addresses().items()}
        host, port = self.addresses[(self.cluster, node_id)]
        self._wall_clock = wall_clock
        self.auth = Authenticator(keys, os.urandom(SESSION_BYTES))
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
        try:
            self.sock.bind((host, port))
            self.sock.setblocking(False)
        except OSError as exc:
            self.sock.close()
            raise TransportSetupError(
                f"cannot bind the federation socket to {host}:{port} ({exc.strerror}): "
                f"federation.clusters.{self.cluster}.members names this address for node "
                f"{node_id}; choose a free one") from None
        self.sent = 0
        self.received = 0
        self.send_errors: Counter[str] = Counter()
        self.heard: dict[str, float] = {}
        """Cluster -> when an authentic datagram of it last arrived (reachability)."""
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def address(self) -> tuple[str, int]:
        return self.sock.getsockname()[:2]

    def start(self, loop: asyncio.AbstractEventLoop,
              on_datagrams: Callable[[list[bytes]], None]) -> None:
        self._loop = loop
        sock = self.sock

        def readable() -> None:
            batch = []
            for _ in range(MAX_READS):
                try:
                    batch.append(sock.recv(MAX_DATAGRAM))
                except OSError:  # drained (BlockingIOError), or an ICMP error: next time
                    break
            if batch:
                on_datagrams(batch)

        loop.add_reader(sock.fileno(), readable)

    def seal(self, dst_cluster: str, datagram: bytes) -> bytes:
        body = encode_link(self.cluster, self.node_id, dst_cluster, datagram)
        return self.auth.seal(body, int(self._wall_clock() * 1000))

    def send(self, cluster: str, node: int, datagram: bytes) -> bool:
        address = self.addresses.get((cluster, node))
        if address is None:
            self.send_errors["unknown_member"] += 1
            return False
        try:
            self.sock.sendto(self.seal(cluster, datagram), address)
        except OSError as exc:
            self.send_errors[errno.errorcode.get(exc.errno or 0, "oserror")] += 1
            return False
        self.sent += 1
        return True

    def open(self, data: bytes) -> tuple[str, int, bytes]:
        """``(src cluster, src node, datagram)`` of an authentic datagram for this
        cluster from a member of another; ``DecodeError`` otherwise."""
        body = self.auth.open(data, int(self._wall_clock() * 1000))
        src_cluster, src_node, dst_cluster, datagram = decode_link(bytes(body))
        if dst_cluster != self.cluster:
            raise DecodeError("wrong_cluster", f"for cluster {dst_cluster!r}")
        if src_cluster == self.cluster:
            raise DecodeError("own_cluster", "from this cluster")
        if (src_cluster, src_node) not in self.addresses:
            raise DecodeError("unknown_sender", f"{src_cluster}/{src_node}")
        self.received += 1
        self.heard[src_cluster] = self._wall_clock()
        return src_cluster, src_node, datagram

    def ping(self) -> None:
        """An empty datagram to every member of the other clusters (reachability)."""
        for cluster, node in self.addresses:
            if cluster != self.cluster:
                self.send(cluster, node, b"")

    def close(self) -> None:
        if self._loop is not None:
            self._loop.remove_reader(self.sock.fileno())
            self._loop = None
        self.sock.close()
