"""Redundant links: configuration checks and two unicast links on the loopback (the
namespace test with cut links is ``tests/deploy/test_netns_redundant.py``)."""

from __future__ import annotations

import asyncio
import socket

import pytest
from amcast.daemon.config import NetworkSection
from amcast.daemon.redundant import RedundantTransport
from amcast.daemon.transports import open_transport
from pydantic import ValidationError

pytestmark = pytest.mark.usefixtures("socket_io")  # both socket_io implementations


def free_udp_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def test_a_second_link_must_be_another_one_of_the_same_kind() -> None:
    with pytest.raises(ValidationError, match="IP version"):
        NetworkSection(interface="127.0.0.1", redundant={"interface": "::1"})
    with pytest.raises(ValidationError, match="must differ from the first link"):
        NetworkSection(interface="127.0.0.1", redundant={"interface": "127.0.0.1"})
    with pytest.raises(ValidationError, match="same members"):
        NetworkSection(transport="unicast", peers={1: "a:1", 2: "b:1"},
                       redundant={"interface": "127.0.0.2", "peers": {1: "c:1"}})
    net = NetworkSection(interface="127.0.0.1", port=4000,
                         redundant={"interface": "127.0.0.1", "port": 4001})
    second = net.second_link()
    assert second is not None and (second.interface, second.port) == ("127.0.0.1", 4001)


async def test_every_datagram_goes_on_both_links_and_each_link_is_counted() -> None:
    loop = asyncio.get_running_loop()
    a_ports = [free_udp_port(), free_udp_port()]
    b_ports = [free_udp_port("127.0.0.2"), free_udp_port("127.0.0.2")]

    def node(i: int) -> NetworkSection:
        j = 1 - i
        return NetworkSection(
            transport="unicast", interface="127.0.0.1", port=a_ports[i],
            peers={j: f"127.0.0.1:{a_ports[j]}"},
            redundant={"interface": "127.0.0.2", "port": b_ports[i],
                       "peers": {j: f"127.0.0.2:{b_ports[j]}"}})

    sender, receiver = open_transport(node(0), 0), open_transport(node(1), 1)
    assert isinstance(sender, RedundantTransport) and isinstance(receiver, RedundantTransport)
    got: asyncio.Queue[list[bytes]] = asyncio.Queue()
    receiver.start(loop, got.put_nowait)
    try:
        sender.send([b"twice"])
        copies: list[bytes] = []
        while len(copies) < 2:
            copies += await asyncio.wait_for(got.get(), 5)
        assert copies == [b"twice", b"twice"]  # the engine drops the second (replayed)
        links = receiver.link_status()
        assert [(x["interface"], x["datagrams_received"]) for x in links] == [
            ("127.0.0.1", 1), ("127.0.0.2", 1)]
        assert sender.datagrams_sent == 2
    finally:
        sender.close()
        receiver.close()
