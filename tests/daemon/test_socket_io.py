"""``socket_io``: the native batched I/O and the Python loop, over real loopback sockets,
give the same results for the same traffic; and which one a transport gets."""

from __future__ import annotations

import errno
import socket
from collections.abc import Iterator

import pytest
from amcast.daemon import socket_io as sio
from amcast.daemon.transport import MulticastTransport

from tests.daemon.test_transport import loopback_net

NATIVE = sio.native_class("native") if sio.wanted() != "pure" else None
IMPLEMENTATIONS = ["pure", "native"]


def udp() -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.setblocking(False)
    return s


def make(kind: str, sock: socket.socket) -> sio.SocketIo:
    if kind == "pure":
        return sio.PythonSocketIo(sock)
    found = sio.native_class("native")
    if found is None:
        pytest.skip("amcast_native is not built (make rust)")
    return sio.NativeSocketIo(sock, found)


@pytest.fixture
def sockets() -> Iterator[list[socket.socket]]:
    made = [udp() for _ in range(4)]
    yield made
    for s in made:
        s.close()


def drain(io: sio.SocketIo, want: int) -> tuple[list[bytes], int, int]:
    """Receive until ``want`` datagrams and skips came (loopback delivers at once, but
    a drain may see only part of them)."""
    got: list[bytes] = []
    nbytes = skipped = 0
    for _ in range(1000):
        batch, n, s, error = io.receive(256)
        assert error == 0
        got += batch
        nbytes += n
        skipped += s
        if len(got) + skipped >= want:
            break
    return got, nbytes, skipped


@pytest.mark.parametrize("kind", IMPLEMENTATIONS)
def test_each_datagram_goes_to_every_destination_in_order(
        kind: str, sockets: list[socket.socket]) -> None:
    tx, *rxs = sockets
    io = make(kind, tx)
    io.set_destinations([s.getsockname()[:2] for s in rxs])
    datagrams = [bytes([i]) * (1 + 7 * i) for i in range(50)]  # more than one call's worth
    copies, nbytes, refused = io.send(
        [bytearray(d) if i % 2 else d for i, d in enumerate(datagrams)])  # any buffers
    assert (copies, nbytes, refused) == (150, 3 * sum(map(len, datagrams)), [])
    for rx in rxs:
        got, n, skipped = drain(make(kind, rx), 50)
        assert got == datagrams and n == sum(map(len, datagrams)) and skipped == 0


@pytest.mark.parametrize("kind", IMPLEMENTATIONS)
def test_own_sources_are_left_out_and_max_is_kept(
        kind: str, sockets: list[socket.socket]) -> None:
    own, other, rx, _ = sockets
    to = rx.getsockname()
    for i in range(40):
        own.sendto(b"own%d" % i, to)
        other.sendto(b"other%d" % i, to)
    io = make(kind, rx)
    io.set_skip([own.getsockname()[:2]])
    first, _, skipped_first, error = io.receive(10)
    assert error == 0 and len(first) + skipped_first == 10
    rest, _, skipped_rest = drain(io, 70)
    assert first + rest == [b"other%d" % i for i in range(40)]
    assert skipped_first + skipped_rest == 40
    assert io.receive(256) == ([], 0, 0, 0)  # empty: no error


@pytest.mark.parametrize("kind", IMPLEMENTATIONS)
def test_a_refused_copy_is_counted_and_the_others_go(
        kind: str, sockets: list[socket.socket]) -> None:
    tx, rx, _, _ = sockets
    io = make(kind, tx)
    # a broadcast without SO_BROADCAST: the kernel refuses it (EACCES)
    io.set_destinations([("255.255.255.255", 9), rx.getsockname()[:2]])
    copies, nbytes, refused = io.send([b"a", b"bc", b"def"])
    assert (copies, nbytes, refused) == (3, 6, [errno.EACCES] * 3)
    assert drain(make(kind, rx), 3)[0] == [b"a", b"bc", b"def"]


@pytest.mark.parametrize("kind", IMPLEMENTATIONS)
def test_a_closed_socket_is_an_errno_not_an_exception(kind: str) -> None:
    s = udp()
    io = make(kind, s)
    io.set_destinations([("127.0.0.1", 9)])
    s.close()
    assert io.receive(8)[3] == errno.EBADF
    copies, _, refused = io.send([b"x"])
    assert copies == 0 and refused == [errno.EBADF]


def test_native_sends_to_a_non_literal_address_through_the_python_loop(
        sockets: list[socket.socket]) -> None:
    tx, rx, _, _ = sockets
    io = make("native", tx)
    io.set_destinations([("localhost", rx.getsockname()[1])])
    assert io.send([b"by name"])[:2] == (1, 7)
    assert drain(make("native", rx), 1)[0] == [b"by name"]
    io.set_destinations([rx.getsockname()[:2]])  # literal again: native again
    assert io.send([b"literal"])[:2] == (1, 7)


def test_the_selection_follows_the_core_and_amcast_io(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(sio.IO_ENV, raising=False)
    assert sio.native_class("pure") is None
    monkeypatch.setenv(sio.IO_ENV, "pure")
    assert sio.native_class("native") is None
    monkeypatch.setenv(sio.IO_ENV, "sometimes")
    with pytest.raises(ValueError, match="AMCAST_IO"):
        sio.wanted()
    monkeypatch.setenv(sio.IO_ENV, "native")
    monkeypatch.setattr(sio.extension, "load", lambda: None)
    with pytest.raises(ImportError, match="make rust"):
        sio.native_class("native")
    monkeypatch.setenv(sio.IO_ENV, "auto")
    assert sio.native_class("auto") is None  # not built: the Python loop


def test_a_transport_says_which_io_it_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(sio.CORE_ENV, raising=False)
    for asked, expected in (("pure", "pure"), ("auto", "native" if NATIVE else "pure")):
        monkeypatch.setenv(sio.IO_ENV, asked)
        t = MulticastTransport(loopback_net())
        try:
            assert t.io == expected
        finally:
            t.close()
