"""The kernel filter of a daemon's own multicasts: the program drops exactly the own
sources, and on a real loopback group the own copies never reach the receive socket
while the others' do."""

from __future__ import annotations

import asyncio
import socket

import pytest
from amcast.daemon import own_filter
from amcast.daemon.transport import MulticastTransport

from tests.daemon.test_transport import loopback_net

pytestmark = pytest.mark.usefixtures("socket_io")  # both socket_io implementations


def test_the_program_drops_exactly_the_own_sources() -> None:
    own = [("127.0.0.1", 40001), ("127.0.0.2", 40002)]
    prog = own_filter.program(own)
    assert own_filter.run(prog, ("127.0.0.1", 40001)) == own_filter.DROP
    assert own_filter.run(prog, ("127.0.0.2", 40002)) == own_filter.DROP
    for other in (("127.0.0.1", 40002), ("127.0.0.2", 40001), ("127.0.0.3", 40001),
                  ("10.0.0.1", 40001), ("127.0.0.1", 1)):
        assert own_filter.run(prog, other) == own_filter.ACCEPT, other
    prog6 = own_filter.program([("fd00::1", 5000)], ipv6=True)
    assert own_filter.run(prog6, ("fd00::1", 5000), ipv6=True) == own_filter.DROP
    for other in (("fd00::2", 5000), ("fd00::1", 5001), ("fe00::1", 5000)):
        assert own_filter.run(prog6, other, ipv6=True) == own_filter.ACCEPT, other
    assert own_filter.program([]) == [(0x06, 0, 0, own_filter.ACCEPT),
                                      (0x06, 0, 0, own_filter.DROP)]


async def test_own_copies_are_dropped_in_the_kernel() -> None:
    net = loopback_net()
    loop = asyncio.get_running_loop()
    a, b = MulticastTransport(net), MulticastTransport(net)
    got_a: asyncio.Queue[list[bytes]] = asyncio.Queue()
    got_b: asyncio.Queue[list[bytes]] = asyncio.Queue()
    a.start(loop, got_a.put_nowait)
    b.start(loop, got_b.put_nowait)
    try:
        assert a.own_filter and b.own_filter
        a.send([b"from-a"])
        b.send([b"from-b"])
        assert await asyncio.wait_for(got_b.get(), 5) == [b"from-a"]
        assert await asyncio.wait_for(got_a.get(), 5) == [b"from-b"]
        # nothing else is queued on either receive socket: not even a's own copy, which
        # the source check would have left out after a wake-up
        for t in (a, b):
            t._remove_reader(t._rx)
            assert t._rx_io.receive(16) == ([], 0, 0, 0)
    finally:
        a.close()
        b.close()


def test_without_the_filter_the_own_copy_reaches_the_socket() -> None:
    """The planted counterpart: the same exchange with no filter queues a's own copy,
    which only the source check leaves out."""
    net = loopback_net()
    a = MulticastTransport(net)
    try:
        a._rx_io.set_skip(a.own_addresses)
        a.send([b"from-a"])  # loopback queues the copy before sendto returns
        got, _, skipped, error = a._rx_io.receive(16)
        assert (got, skipped, error) == ([], 1, 0)
    finally:
        a.close()


def test_a_refused_filter_is_no_error() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.close()
        assert own_filter.attach(s, [("127.0.0.1", 1)]) is False
