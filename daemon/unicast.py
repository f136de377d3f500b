"""UDP unicast transport: where there is no IP multicast (clouds, Kubernetes).

Theory of operation: the same contract as ``MulticastTransport`` (``start``, ``send``,
``close``, counters), so the engine, its wire format, repair, flow control and
membership do not know which one runs. One non-blocking UDP socket bound to
``(network.interface, network.port)`` receives from anyone (every datagram is
authenticated by the engine before it is used, so the source address is not trusted)
and sends each datagram once to every other member's address from ``network.peers``
(``node id -> "host:port"``): a multicast of N members costs N-1 ``sendto`` calls and
N-1 copies on the network, the price of not having multicast (Corosync's udpu and
knet, JGroups' TCPPING/UDP unicast pay the same).

Addresses: a literal address is used as it is (``"[v6 address]:port"`` for IPv6); a host
name is resolved at start (``socket.getaddrinfo``, in the family of
``network.interface``: an IPv6 interface makes an IPv6 daemon) and again every
``network.resolve_interval_s`` on the event loop's resolver (``loop.getaddrinfo``), so a
member that restarts with a new address (a rescheduled pod behind a headless Service)
is reached again within one interval. A name that does not resolve (yet) is skipped:
its datagrams are counted in ``send_errors["unresolved"]`` (and repaired by the engine
once it resolves), and the first failure of each name is logged.
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import socket
from collections.abc import Callable, Mapping

from .config import NetworkSection, split_host_port
from .socket_io import make_socket_io
from .transport import DatagramSocketTransport, TransportSetupError, errno_hint


def is_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def resolve_now(host: str, family: int = socket.AF_INET) -> str | None:
    """The first address of ``host`` in ``family`` (blocking; ``None``: it does not
    resolve)."""
    if is_literal(host):
        return host
    try:
        infos = socket.getaddrinfo(host, None, family, socket.SOCK_DGRAM)
    except OSError:
        return None
    return str(infos[0][4][0]) if infos else None


def send_order(me: int, peers: Mapping[int, str]) -> list[int]:
    """The other members in the order a datagram goes to them: farthest first round the
    ring of node ids, so the members right after this one come last. Those are the
    members that ack this one's data at once (``protocols.session.prompt_origins``,
    the same ring over a view's sorted members): sent to first, their acks reached the
    others before this datagram's own copy whenever this daemon was preempted in the
    middle of its N-1 sends, and every such member nacked a "gap" that was only late
    (a spurious repair). Sent to last, a prompt acker can only ack what the rest were
    already sent."""
    after = sorted((node for node in peers if node != me), key=lambda node: (node < me, node))
    return after[::-1]


def open_unicast_socket(net: NetworkSection) -> socket.socket:
    family = socket.AF_INET6 if net.ipv6 else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, net.recv_buffer_bytes)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, net.send_buffer_bytes)
        try:
            sock.bind((net.interface, net.port))
        except OSError as exc:
            name = errno.errorcode.get(exc.errno or 0, "unknown")
            hint = (f"port {net.port} is taken on {net.interface}: choose another network.port"
                    if exc.errno == errno.EADDRINUSE else errno_hint(exc.errno or 0, net))
            raise TransportSetupError(
                f"cannot bind the unicast socket to {net.interface}:{net.port} "
                f"({name}: {exc.strerror}): {hint}") from None
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


class UnicastTransport(DatagramSocketTransport):
    """One UDP socket; every datagram to each member's address (module docstring)."""

    def __init__(self, net: NetworkSection, node_id: int, *, batch: int = 256,
                 on_resolve_error: Callable[[int, str], None] | None = None) -> None:
        super().__init__(net, batch)
        self.node_id = node_id
        self._family = socket.AF_INET6 if net.ipv6 else socket.AF_INET
        self._sock = open_unicast_socket(net)
        self._io = make_socket_io(self._sock)
        self.io = self._io.name
        self.own_address: tuple[str, int] = self._sock.getsockname()[:2]
        self.peers: dict[int, tuple[str, int]] = {}
        """Node id -> (host as configured, port)."""
        self.addresses: dict[int, tuple[str, int]] = {}
        """Node id -> the resolved (IPv4, port) datagrams go to now."""
        self.on_resolve_error = on_resolve_error
        self._failed_names: set[str] = set()
        self._resolver: asyncio.Task[None] | None = None
        self.set_peers(net.peers, resolve=True)

    @property
    def rcvbuf(self) -> int:
        return self._sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)

    def set_peers(self, peers: Mapping[int, str], resolve: bool = False) -> None:
        """The members' addresses (a reload may change them); ``resolve`` looks names up
        now (blocking: start-up only), else they wait for the next resolution round."""
        self.peers = {node: split_host_port(peers[node], f"network.peers.{node}")
                      for node in send_order(self.node_id, peers)}
        old = self.addresses
        self.addresses = {}
        for node, (host, port) in self.peers.items():
            if is_literal(host):
                self.addresses[node] = (host, port)
            elif resolve:
                ip = resolve_now(host, self._family)
                if ip is not None:
                    self.addresses[node] = (ip, port)
                else:
                    self._resolve_failed(node, host)
            elif node in old:
                self.addresses[node] = (old[node][0], port)
        self._io.set_destinations(self.addresses.values())

    def _resolve_failed(self, node: int, host: str) -> None:
        if host not in self._failed_names:
            self._failed_names.add(host)
            if self.on_resolve_error is not None:
                self.on_resolve_error(node, host)

    async def resolve_names(self) -> None:
        """One round of lookups of the peers' host names (on the loop's resolver)."""
        loop = asyncio.get_running_loop()
        for node, (host, port) in list(self.peers.items()):
            if is_literal(host):
                continue
            try:
                infos = await loop.getaddrinfo(host, None, family=self._family,
                                               type=socket.SOCK_DGRAM)
            except OSError:
                infos = []
            if infos and self.peers.get(node) == (host, port):
                newcomer = node not in self.addresses
                self.addresses[node] = (str(infos[0][4][0]), port)
                if newcomer:  # into its place in the send order
                    self.addresses = {n: self.addresses[n] for n in self.peers
                                      if n in self.addresses}
                self._io.set_destinations(self.addresses.values())
                self._failed_names.discard(host)
            elif not infos:
                self._resolve_failed(node, host)  # keep the last good address, if any

    async def _resolve_forever(self) -> None:
        while True:
            await asyncio.sleep(self.net.resolve_interval_s)
            await self.resolve_names()

    def start(
        self, loop: asyncio.AbstractEventLoop, on_datagrams: Callable[[list[bytes]], None]
    ) -> None:
        self._add_reader(loop, self._sock, self._io, on_datagrams)
        if any(not is_literal(host) for host, _ in self.peers.values()):
            self._resolver = loop.create_task(self._resolve_forever())

    def send(self, datagrams: list[bytes]) -> None:
        self._send_all(self._io, datagrams)  # each datagram to every peer before the next
        unresolved = len(self.peers) - len(self.addresses)
        if unresolved:
            self.send_errors["unresolved"] += unresolved * len(datagrams)

    def close(self) -> None:
        if self._resolver is not None:
            self._resolver.cancel()
            self._resolver = None
        self._remove_reader(self._sock)
        self._sock.close()
