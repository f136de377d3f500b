"""UDP unicast transport on loopback: every datagram to each peer, names resolved and
re-resolved, an unresolvable peer counted, config checks."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest
from amcast.daemon.config import DaemonConfig, NetworkSection, split_host_port
from amcast.daemon.transport import TransportSetupError
from amcast.daemon.transports import open_transport
from amcast.daemon.unicast import UnicastTransport, send_order
from amcast.protocols.session import prompt_origins
from pydantic import ValidationError

pytestmark = pytest.mark.usefixtures("socket_io")  # both socket_io implementations


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def nets(n: int, host: str = "127.0.0.1") -> list[NetworkSection]:
    ports = [free_udp_port() for _ in range(n)]
    return [NetworkSection(transport="unicast", interface="127.0.0.1", port=ports[i],
                           peers={j: f"{host}:{ports[j]}" for j in range(n) if j != i})
            for i in range(n)]


async def test_each_datagram_reaches_every_other_member_once() -> None:
    loop = asyncio.get_running_loop()
    configs = nets(3)
    transports = [UnicastTransport(net, i) for i, net in enumerate(configs)]
    queues: list[asyncio.Queue[list[bytes]]] = [asyncio.Queue() for _ in transports]
    for t, q in zip(transports, queues, strict=True):
        t.start(loop, q.put_nowait)
    try:
        transports[0].send([b"one", b"two"])
        for q in queues[1:]:
            got: list[bytes] = []
            while len(got) < 2:
                got += await asyncio.wait_for(q.get(), 5)
            assert got == [b"one", b"two"]
        assert queues[0].empty()  # no copy to itself
        assert transports[0].datagrams_sent == 4  # 2 datagrams x 2 peers
        assert transports[1].datagrams_received == 2
    finally:
        for t in transports:
            t.close()


def test_the_members_that_ack_at_once_are_sent_to_last() -> None:
    peers = {n: f"127.0.0.1:{4000 + n}" for n in range(8)}
    assert send_order(2, peers) == [1, 0, 7, 6, 5, 4, 3]
    assert send_order(0, peers) == [7, 6, 5, 4, 3, 2, 1]
    members = tuple(range(8))
    for me in members:
        order = send_order(me, peers)
        ackers = {n for n in members if me in prompt_origins(members, n, 4.0)}
        assert set(order[-len(ackers):]) == ackers  # the prompt ackers come last
    # a view without some members keeps the same ring order
    assert send_order(5, {n: peers[n] for n in (0, 2, 5, 6)}) == [2, 0, 6]


def test_a_late_resolving_peer_takes_its_place_in_the_send_order(monkeypatch: Any) -> None:
    real = socket.getaddrinfo
    state = {"up": False}

    def dns(host: str, *args: Any, **kw: Any) -> Any:
        if host == "late.test" and not state["up"]:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real("127.0.0.1" if host == "late.test" else host, *args, **kw)

    monkeypatch.setattr(socket, "getaddrinfo", dns)
    net = NetworkSection(transport="unicast", interface="127.0.0.1", port=free_udp_port(),
                         peers={1: "late.test:4001", 2: "127.0.0.1:4002",
                                3: "127.0.0.1:4003"})
    t = UnicastTransport(net, 0)
    try:
        assert list(t.addresses) == [3, 2]

        async def resolved(host: str, *args: Any, **kw: Any) -> Any:
            return dns(host, *args, **kw)

        state["up"] = True
        loop = asyncio.new_event_loop()
        try:
            monkeypatch.setattr(loop, "getaddrinfo", resolved)
            loop.run_until_complete(t.resolve_names())
        finally:
            loop.close()
        assert list(t.addresses) == [3, 2, 1]
    finally:
        t.close()


async def test_host_names_resolve_and_follow_a_moved_peer(monkeypatch: Any) -> None:
    loop = asyncio.get_running_loop()
    a_net, b_net = nets(2, host="localhost")
    a = UnicastTransport(a_net, 0)
    assert a.addresses == {1: ("127.0.0.1", b_net.port)}
    answers = {"localhost": "127.0.0.2"}  # the peer came back at another address

    async def fake_getaddrinfo(host: str, *args: Any, **kw: Any) -> list[Any]:
        if host not in answers:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [(socket.AF_INET, socket.SOCK_DGRAM, 17, "", (answers[host], 0))]

    monkeypatch.setattr(loop, "getaddrinfo", fake_getaddrinfo)
    try:
        await a.resolve_names()
        assert a.addresses == {1: ("127.0.0.2", b_net.port)}
        del answers["localhost"]  # DNS fails for a while: the last good address stays
        await a.resolve_names()
        assert a.addresses == {1: ("127.0.0.2", b_net.port)}
    finally:
        a.close()


def test_a_name_that_does_not_resolve_is_skipped_counted_and_reported_once(
    monkeypatch: Any,
) -> None:
    real = socket.getaddrinfo

    def no_dns(host: str, *args: Any, **kw: Any) -> Any:  # no resolver wait in a test
        if host.endswith(".invalid"):
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real(host, *args, **kw)

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    port = free_udp_port()
    net = NetworkSection(transport="unicast", interface="127.0.0.1", port=free_udp_port(),
                         peers={1: f"127.0.0.1:{port}", 2: "no-such-host.invalid:4000"})
    failed: list[tuple[int, str]] = []
    t = UnicastTransport(net, 0, on_resolve_error=lambda n, h: failed.append((n, h)))
    try:
        assert set(t.addresses) == {1}
        t.send([b"x", b"y"])
        t.send([b"z"])
        assert t.send_errors["unresolved"] == 3 and t.datagrams_sent == 3
        t.set_peers(net.peers, resolve=True)
        assert failed == [(2, "no-such-host.invalid")]  # logged once per name
    finally:
        t.close()


def test_config_needs_every_other_members_address_and_refuses_bad_ones() -> None:
    base: dict[str, Any] = {"node": {"id": 0, "members": [0, 1, 2]},
                            "protocol": {"insecure": True}}
    with pytest.raises(ValidationError, match=r"network.peers for members \[2\]"):
        DaemonConfig.model_validate({**base, "network": {
            "transport": "unicast", "peers": {"1": "h1:4000"}}})
    for bad in ("h1", "h1:0", "h1:70000", ":4000", "h1:x"):
        with pytest.raises(ValidationError, match="is not 'host:port'"):
            NetworkSection(transport="unicast", peers={1: bad})
    ok = DaemonConfig.model_validate({**base, "network": {
        "transport": "unicast", "peers": {"1": "h1:4000", "2": "10.0.0.2:4000"}}})
    assert ok.network.peers == {1: "h1:4000", 2: "10.0.0.2:4000"}


def test_a_taken_port_is_an_actionable_error() -> None:
    (net,) = nets(1)
    hog = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    hog.bind(("127.0.0.1", net.port))
    try:
        with pytest.raises(TransportSetupError, match=r"choose another network\.port"):
            open_transport(net, 0)
    finally:
        hog.close()


async def test_ipv6_unicast_on_the_loopback() -> None:
    loop = asyncio.get_running_loop()
    ports = [free_udp_port(), free_udp_port()]
    a = UnicastTransport(NetworkSection(transport="unicast", interface="::1", port=ports[0],
                                        peers={1: f"[::1]:{ports[1]}"}), 0)
    b = UnicastTransport(NetworkSection(transport="unicast", interface="::1", port=ports[1],
                                        peers={0: f"[::1]:{ports[0]}"}), 1)
    got: asyncio.Queue[list[bytes]] = asyncio.Queue()
    b.start(loop, got.put_nowait)
    try:
        assert a.addresses == {1: ("::1", ports[1])}
        a.send([b"over IPv6"])
        assert await asyncio.wait_for(got.get(), 5) == [b"over IPv6"]
    finally:
        a.close()
        b.close()


def test_addresses_and_families_are_checked() -> None:
    assert split_host_port("[fd42::10]:42999") == ("fd42::10", 42999)
    assert split_host_port("node1.example:42999") == ("node1.example", 42999)
    with pytest.raises(ValueError, match=r"as '\[addr\]:port'"):
        split_host_port("fd42::10:42999")
    with pytest.raises(ValueError, match="not an IPv6 address"):
        split_host_port("[node1]:42999")
    with pytest.raises(ValidationError, match="not of one IP version"):
        NetworkSection(group="ff05::4242", interface="127.0.0.1")
    with pytest.raises(ValidationError, match="not a multicast address"):
        NetworkSection(group="fd42::1", interface="fd42::2")
    assert NetworkSection(group="ff05::4242", interface="::1").ipv6


def test_an_ipv6_interface_address_no_interface_holds_is_an_actionable_error() -> None:
    net = NetworkSection(group="ff05::4242", interface="fd42:dead::77", port=free_udp_port())
    with pytest.raises(TransportSetupError, match="no interface has the IPv6 address"):
        open_transport(net, 0)
