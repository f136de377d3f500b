"""UDP IP-multicast transport between daemons (IPv4 or IPv6), set up the python-zeroconf way.

Theory of operation: two non-blocking sockets.

- The *receive* socket sets ``SO_REUSEADDR`` and ``SO_REUSEPORT`` (several daemons on
  one host share the port: the kernel hands every multicast datagram to every socket
  bound to it), binds to ``(group, port)`` (falls back to ``("", port)`` where binding
  to a group address is refused), joins the group with ``IP_ADD_MEMBERSHIP`` on the
  configured interface address and gets a large ``SO_RCVBUF``.
- The *send* socket binds to ``(interface, 0)`` and sets ``IP_MULTICAST_IF``,
  ``IP_MULTICAST_TTL`` and ``IP_MULTICAST_LOOP``. Its own address is how we recognise
  (and skip) our own datagrams looping back.
- IPv6 (an IPv6 ``interface`` and an ``ff0x::`` group, e.g. ``ff05::4242``, site-local
  scope): the same with ``IPV6_JOIN_GROUP``, ``IPV6_MULTICAST_IF``/``_HOPS``/``_LOOP``;
  the kernel wants the interface's *index*, found from its address in
  ``/proc/net/if_inet6``.

``MulticastTransport.start(loop, on_datagrams)`` registers one reader callback that
drains the receive socket (up to ``batch`` datagrams per wake-up) and hands the list
to ``on_datagrams`` once, so the daemon pumps its engine once per wake-up, not once per
datagram. ``send`` never blocks and never raises: a refused datagram is counted in
``send_errors`` by errno name and the engine's retransmission repairs it. The receiving
and sending themselves go through ``socket_io``: batched in the native extension
(``recvmmsg``, ``sendmmsg``) where the core is native, else one call per datagram. A
socket filter (``own_filter``) drops this daemon's own looped-back multicasts in the
kernel, so they do not wake the loop; the source check stays behind it.

Set-up failures raise ``TransportSetupError`` whose message says what to do
(``errno_hint``), after the zeroconf practice of triaging errno values into actionable
log lines.

The transport a configuration names (multicast, unicast, or two redundant links) is
opened by ``amcast.daemon.transports.open_transport``: this base module knows none of
the transports built on it.
"""

from __future__ import annotations

import asyncio
import errno
import socket
import struct
from collections import Counter
from collections.abc import Callable

from ..protocols.errors import ConfigurationError
from . import own_filter
from .config import NetworkSection
from .socket_io import MAX_DATAGRAM as MAX_DATAGRAM  # re-exported (fedlink)
from .socket_io import SocketIo, make_socket_io

IP_MULTICAST_ALL = getattr(socket, "IP_MULTICAST_ALL", 49)  # Linux values; not in every
IPV6_MULTICAST_ALL = getattr(socket, "IPV6_MULTICAST_ALL", 29)  # Python's socket module


class TransportSetupError(ConfigurationError):
    """The multicast sockets could not be set up; the message says what to do."""


_HINTS: dict[int, str] = {
    errno.EADDRINUSE: (
        "port {port} is taken by a socket without SO_REUSEPORT: stop that process or "
        "choose another network.port"
    ),
    errno.EADDRNOTAVAIL: (
        "{interface} is not an address of a local interface: set network.interface to one "
        "of `ip -4 addr` (127.0.0.1 for a single-host cluster)"
    ),
    errno.ENODEV: (
        "no multicast-capable interface has address {interface}: set network.interface to "
        "one of `ip -4 addr` (127.0.0.1 for a single-host cluster) or add a route "
        "(`ip route add 224.0.0.0/4 dev IFACE`)"
    ),
    errno.ENOBUFS: (
        "the kernel refused another multicast membership: raise "
        "net.ipv4.igmp_max_memberships or run fewer groups on this host"
    ),
    errno.EPERM: "not permitted: a firewall or a sandbox forbids multicast on {interface}",
    errno.EACCES: "permission denied: ports below 1024 need privileges; use port >= 1024",
    errno.ENETUNREACH: (
        "no route to {group}: add `ip route add 224.0.0.0/4 dev IFACE` or set "
        "network.interface"
    ),
    errno.EINVAL: "invalid group/interface combination {group} on {interface}",
}


def errno_hint(err: int, net: NetworkSection) -> str:
    template = _HINTS.get(err, "unexpected error; check network.* in the config")
    return template.format(port=net.port, interface=net.interface, group=net.group)


def _fail(step: str, exc: OSError, net: NetworkSection) -> TransportSetupError:
    name = errno.errorcode.get(exc.errno or 0, str(exc.errno))
    return TransportSetupError(
        f"multicast {step} failed for {net.group}:{net.port} on {net.interface} "
        f"({name}: {exc.strerror}): {errno_hint(exc.errno or 0, net)}"
    )


def ipv6_interface_index(address: str) -> int:
    """The index of the interface that holds IPv6 ``address`` (Linux: /proc/net/if_inet6);
    ``TransportSetupError`` when no interface does."""
    want = socket.inet_pton(socket.AF_INET6, address).hex()
    try:
        with open("/proc/net/if_inet6", encoding="ascii") as fh:
            for line in fh:
                fields = line.split()
                if len(fields) >= 2 and fields[0] == want:
                    return int(fields[1], 16)
    except OSError:
        pass
    raise TransportSetupError(
        f"no interface has the IPv6 address {address}: set network.interface to one of "
        "`ip -6 addr` (a global or unique-local address; link-local ones are not supported)")


def _membership(net: NetworkSection) -> tuple[int, int, bytes]:
    """``(level, option, request)`` of joining (IP[V6]_ADD_MEMBERSHIP) the group."""
    if net.ipv6:
        index = ipv6_interface_index(net.interface)
        return (socket.IPPROTO_IPV6, socket.IPV6_JOIN_GROUP,
                socket.inet_pton(socket.AF_INET6, net.group) + struct.pack("@I", index))
    return (socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
            socket.inet_aton(net.group) + socket.inet_aton(net.interface))


def open_receive_socket(net: NetworkSection) -> socket.socket:
    family = socket.AF_INET6 if net.ipv6 else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if hasattr(socket, "SO_REUSEPORT"):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, net.recv_buffer_bytes)
        try:
            sock.bind((net.group, net.port))
        except OSError as exc:
            if exc.errno not in (errno.EADDRNOTAVAIL, errno.EINVAL):
                raise _fail("bind", exc, net) from None
            sock.bind(("::" if net.ipv6 else "", net.port))
        level, option, request = _membership(net)
        try:
            sock.setsockopt(level, option, request)
        except OSError as exc:
            raise _fail("join (IP_ADD_MEMBERSHIP)", exc, net) from None
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def open_send_socket(net: NetworkSection) -> socket.socket:
    family = socket.AF_INET6 if net.ipv6 else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, net.send_buffer_bytes)
        try:
            if net.ipv6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_IF,
                                ipv6_interface_index(net.interface))
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_HOPS, net.ttl)
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_LOOP,
                                int(net.loopback))
            else:
                sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF,
                                socket.inet_aton(net.interface))
                sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, net.ttl)
                sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP,
                                int(net.loopback))
            sock.bind((net.interface, 0))
        except OSError as exc:
            raise _fail("send socket setup", exc, net) from None
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


class DatagramSocketTransport:
    """What both transports share: counters, send-error triage and the reader that
    drains a socket (up to ``batch`` datagrams per wake-up) into one engine call."""

    net: NetworkSection

    def __init__(self, net: NetworkSection, batch: int) -> None:
        self.net = net
        self._batch = batch
        self.io = "pure"
        """Which ``socket_io`` implementation moves this transport's datagrams: ``native``
        (batched, ``recvmmsg``/``sendmmsg``) or ``pure`` (the Python loop)."""
        self.send_errors: Counter[str] = Counter()
        self.datagrams_sent = 0
        self.bytes_sent = 0
        self.datagrams_received = 0
        self.bytes_received = 0
        self.on_send_error: Callable[[str, str], None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _add_reader(self, loop: asyncio.AbstractEventLoop, sock: socket.socket,
                    io: SocketIo, on_datagrams: Callable[[list[bytes]], None]) -> None:
        """Call ``on_datagrams`` once per wake-up with what ``sock`` holds (``io``
        leaves out the sources its ``set_skip`` named: our own, looped back)."""
        batch = self._batch
        receive = io.receive

        def readable() -> None:
            got, nbytes, _skipped, error = receive(batch)
            if error:  # e.g. ECONNREFUSED from an ICMP; never fatal
                self._count_errno(error)
            if got:
                self.datagrams_received += len(got)
                self.bytes_received += nbytes
                on_datagrams(got)

        self._loop = loop
        loop.add_reader(sock.fileno(), readable)

    def _remove_reader(self, sock: socket.socket) -> None:
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(sock.fileno())
        self._loop = None

    def _send_all(self, io: SocketIo, datagrams: list[bytes]) -> None:
        """Send every datagram to ``io``'s destinations; a refused copy is counted, never
        raised (the engine's repair resends it)."""
        copies, nbytes, refused = io.send(datagrams)
        self.datagrams_sent += copies
        self.bytes_sent += nbytes
        for error in refused:
            self._count_errno(error)

    def _count_errno(self, error: int) -> None:
        name = errno.errorcode.get(error, "unknown").lower()
        reason = f"send_{name}" if name != "unknown" else "send_error"
        first = reason not in self.send_errors
        self.send_errors[reason] += 1
        if first and self.on_send_error is not None:
            self.on_send_error(reason, errno_hint(error, self.net))


class MulticastTransport(DatagramSocketTransport):
    """The daemon's two multicast sockets (see the module docstring)."""

    def __init__(self, net: NetworkSection, *, batch: int = 256) -> None:
        super().__init__(net, batch)
        self._dest = (net.group, net.port)
        self._rx = open_receive_socket(net)
        try:
            self._tx = open_send_socket(net)
        except BaseException:
            self._rx.close()
            raise
        self.own_address: tuple[str, int] = self._tx.getsockname()[:2]
        self.own_addresses: set[tuple[str, int]] = {self.own_address}
        """Send sockets of this daemon (two with a redundant link): their loopback copies
        are skipped."""
        self._rx_io = make_socket_io(self._rx)
        self._tx_io = make_socket_io(self._tx)
        self._tx_io.set_destinations([self._dest])
        self.io = self._tx_io.name
        self.own_filter = False
        """Whether the kernel drops this daemon's own looped-back multicasts before they
        wake the loop (``own_filter``, attached at ``start``)."""

    @property
    def rcvbuf(self) -> int:
        return self._rx.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)

    def receive_only_joined(self) -> None:
        """Get only the groups this socket joined, on its own interface (Linux
        ``IP_MULTICAST_ALL`` off): two links' sockets on one port each get their own
        link's copies."""
        if self.net.ipv6:
            self._rx.setsockopt(socket.IPPROTO_IPV6, IPV6_MULTICAST_ALL, 0)
        else:
            self._rx.setsockopt(socket.IPPROTO_IP, IP_MULTICAST_ALL, 0)

    def start(
        self, loop: asyncio.AbstractEventLoop, on_datagrams: Callable[[list[bytes]], None]
    ) -> None:
        self._rx_io.set_skip(self.own_addresses)
        self.own_filter = own_filter.attach(self._rx, self.own_addresses, self.net.ipv6)
        self._add_reader(loop, self._rx, self._rx_io, on_datagrams)

    def send(self, datagrams: list[bytes]) -> None:
        self._send_all(self._tx_io, datagrams)

    def close(self) -> None:
        self._remove_reader(self._rx)
        for sock in (self._rx, self._tx):
            try:
                if sock is self._rx:
                    level, _join, request = _membership(self.net)
                    drop = (socket.IPV6_LEAVE_GROUP if level == socket.IPPROTO_IPV6
                            else socket.IP_DROP_MEMBERSHIP)
                    sock.setsockopt(level, drop, request)
            except (OSError, TransportSetupError):
                pass
            sock.close()

