"""Connection slots: connections that have not said hello are a pool of their own
(``api.max_pending_hellos``), so that however many connect and stay silent, a client
that says hello gets one of ``api.max_clients``. Driven by hand (``ApiServer`` with
fake transports over real socket pairs, so that what waits unread in a socket is real);
the same against a real daemon is in test_api.py."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest
from amcast.daemon.api import ApiServer, ClientConnection, complete_frame_waiting
from amcast.daemon.config import ApiSection
from daemon_helpers import Backend, FakeTransport

from amcast.socket_protocol import PREFIX, FrameDecoder, encode_frame

HELLO = encode_frame({"t": "hello", "v": 1, "name": "honest"})


class Slots:
    """An ``ApiServer`` and the connections made to it, each over a socket pair whose
    other end (``peer``) plays the client."""

    def __init__(self, pairs: list[socket.socket], **api: Any) -> None:
        self.pairs = pairs
        self.backend = Backend()
        self.server = ApiServer(ApiSection(hello_timeout_s=60, **api), self.backend)
        self.conns: list[ClientConnection] = []
        self.transports: list[FakeTransport] = []
        self.peers: list[socket.socket] = []

    def connect(self, first: bytes = b"") -> ClientConnection:
        """A new connection whose client has written ``first`` (unread by the daemon)."""
        ours, peer = socket.socketpair()
        self.pairs += [ours, peer]
        if first:
            peer.sendall(first)
        conn = ClientConnection(self.server, len(self.conns) + 1)
        transport = FakeTransport(ours)
        conn.connection_made(transport)  # type: ignore[arg-type]
        self.conns.append(conn)
        self.transports.append(transport)
        self.peers.append(peer)
        return conn

    def errors(self, k: int) -> list[str]:
        """The error codes connection ``k`` (0-based) was sent."""
        frames = FrameDecoder().feed(bytes(self.transports[k].out))
        return [f["code"] for f in frames if isinstance(f, dict) and f["t"] == "error"]

    def replies(self, k: int) -> list[dict[str, Any]]:
        return [f for f in FrameDecoder().feed(bytes(self.transports[k].out))
                if isinstance(f, dict)]


@pytest.fixture
def pairs() -> Iterator[list[socket.socket]]:
    made: list[socket.socket] = []
    yield made
    for s in made:
        s.close()


async def test_silent_connections_past_max_clients_never_keep_a_client_out(
    pairs: list[socket.socket],
) -> None:
    """Before, every connection took one of ``max_clients`` at connect: 20 silent ones
    filled all 2 and the honest client got ``too_many_clients`` until ``hello_timeout``.
    Now the silent ones share 3 pending slots, the oldest going first, and the honest
    client is greeted and served."""
    slots = Slots(pairs, max_clients=2, max_pending_hellos=3)
    for _ in range(20):
        slots.connect()
    assert len(slots.server.pending) == 3
    assert [slots.errors(k) for k in range(17)] == [["too_many_pending_hellos"]] * 17
    assert all(slots.transports[k].closed for k in range(17))
    honest = slots.connect()
    honest.data_received(HELLO + encode_frame({"t": "send", "id": 0, "groups": ["g"],
                                               "payloads": [b"m"]}))
    assert honest.greeted and slots.replies(20)[0]["t"] == "welcome"
    assert slots.errors(20) == [] and slots.backend.sent == [[b"m"]]
    assert slots.errors(17) == ["too_many_pending_hellos"]  # made room for the honest one
    assert slots.backend.disconnects == ["too_many_pending_hellos"] * 18
    assert honest.id not in slots.server.pending and len(slots.server.pending) == 2


async def test_the_pending_connection_closed_is_the_oldest_without_a_whole_frame_waiting(
    pairs: list[socket.socket],
) -> None:
    """A connection whose hello already waits in its socket (a burst of clients: the
    daemon accepts them all before it reads any) is about to be served: the oldest
    silent one, or one that sent part of a frame, goes instead; only when every
    pending connection has a whole frame waiting does the oldest go."""
    slots = Slots(pairs, max_pending_hellos=3)
    ready = slots.connect(HELLO)
    slots.connect(HELLO[:3])  # part of a prefix, then silence
    slots.connect()
    slots.connect(HELLO)
    assert slots.errors(1) == ["too_many_pending_hellos"] and slots.errors(0) == []
    slots.connect(HELLO)
    assert slots.errors(2) == ["too_many_pending_hellos"]
    assert list(slots.server.pending) == [1, 4, 5]  # all three with a hello waiting
    slots.connect()
    assert slots.errors(0) == ["too_many_pending_hellos"] and ready.closed
    assert list(slots.server.pending) == [4, 5, 6]


async def test_a_partial_frame_already_read_is_not_a_hello_waiting(
    pairs: list[socket.socket],
) -> None:
    slots = Slots(pairs, max_pending_hellos=1)
    staller = slots.connect()
    staller.data_received(HELLO[:-1])  # read, and held incomplete by the decoder
    slots.peers[0].sendall(HELLO)  # more bytes queued behind it change nothing
    slots.connect(HELLO)
    assert slots.errors(0) == ["too_many_pending_hellos"]


async def test_a_hello_past_max_clients_is_refused_and_its_pending_slot_is_free(
    pairs: list[socket.socket],
) -> None:
    slots = Slots(pairs, max_clients=1, max_pending_hellos=1)
    first = slots.connect()
    first.data_received(HELLO)
    second = slots.connect()
    second.data_received(HELLO)
    assert first.greeted and not second.greeted
    assert slots.errors(1) == ["too_many_clients"] and slots.transports[1].closed
    assert slots.server.pending == {} and list(slots.server.clients) == [1]
    third = slots.connect()  # the pool has room: nobody is closed for it
    assert slots.errors(0) == [] and third.id in slots.server.pending


async def test_any_error_before_hello_is_fatal(pairs: list[socket.socket]) -> None:
    """A connection that has not said hello is not a client yet: garbage closes it (it
    used to get a non-fatal ``bad_frame`` and keep its slot until ``hello_timeout``)."""
    slots = Slots(pairs)
    conn = slots.connect()
    conn.data_received(PREFIX.pack(2) + b"\xc1\xc1")
    frames = slots.replies(0)
    assert [(f["code"], f["fatal"]) for f in frames] == [("bad_frame", True)]
    assert conn.closed and slots.server.pending == {}


def test_a_whole_frame_waiting_is_seen_without_reading_it(
    pairs: list[socket.socket],
) -> None:
    ours, peer = socket.socketpair()
    pairs += [ours, peer]
    assert not complete_frame_waiting(ours.fileno())
    peer.sendall(HELLO[:2])
    assert not complete_frame_waiting(ours.fileno())  # not even a whole prefix
    peer.sendall(HELLO[2:-1])
    assert not complete_frame_waiting(ours.fileno())
    peer.sendall(HELLO[-1:])
    assert complete_frame_waiting(ours.fileno())
    assert ours.recv(1 << 16) == HELLO  # nothing was taken
    assert not complete_frame_waiting(-1)
