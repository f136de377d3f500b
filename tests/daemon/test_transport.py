"""Multicast sockets on loopback: shared port, own datagrams skipped, errno triage."""

from __future__ import annotations

import asyncio
import errno
import random
import socket

import pytest
from amcast.daemon.config import NetworkSection
from amcast.daemon.transport import MulticastTransport, TransportSetupError, errno_hint

pytestmark = pytest.mark.usefixtures("socket_io")  # both socket_io implementations


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def loopback_net(**kw: object) -> NetworkSection:
    group = f"239.255.{random.randrange(1, 255)}.{random.randrange(1, 255)}"
    return NetworkSection(group=group, port=free_udp_port(), interface="127.0.0.1", **kw)


async def test_two_transports_share_the_port_and_skip_their_own_datagrams() -> None:
    net = loopback_net()
    loop = asyncio.get_running_loop()
    a, b = MulticastTransport(net), MulticastTransport(net)
    got_a: asyncio.Queue[list[bytes]] = asyncio.Queue()
    got_b: asyncio.Queue[list[bytes]] = asyncio.Queue()
    a.start(loop, got_a.put_nowait)
    b.start(loop, got_b.put_nowait)
    try:
        a.send([b"from-a-1", b"from-a-2"])
        b.send([b"from-b"])
        received_b: list[bytes] = []
        while len(received_b) < 2:
            received_b += await asyncio.wait_for(got_b.get(), 5)
        assert received_b == [b"from-a-1", b"from-a-2"]
        assert await asyncio.wait_for(got_a.get(), 5) == [b"from-b"]
        assert a.datagrams_sent == 2 and b.datagrams_received == 2
        assert got_a.empty()  # a never sees its own datagrams
    finally:
        a.close()
        b.close()


def test_bad_interface_is_an_actionable_error() -> None:
    net = loopback_net().model_copy(update={"interface": "192.0.2.77"})
    with pytest.raises(TransportSetupError, match=r"network\.interface"):
        MulticastTransport(net)


def test_port_taken_without_reuseport_is_an_actionable_error() -> None:
    net = loopback_net()
    hog = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    hog.bind(("", net.port))
    try:
        with pytest.raises(TransportSetupError, match=r"choose another network\.port"):
            MulticastTransport(net)
    finally:
        hog.close()


def test_every_triaged_errno_has_a_hint() -> None:
    net = loopback_net()
    for err in (errno.EADDRINUSE, errno.ENODEV, errno.ENOBUFS, errno.ENETUNREACH, errno.EPERM):
        assert "unexpected error" not in errno_hint(err, net)
