"""``api.frame_timeout_s`` on one ``ClientConnection`` driven by hand (a fake transport and
a fake clock): a frame must complete within the timeout of its first byte or of the last
complete frame; a client that keeps completing frames is never cut off, however its
reads split them; time while the daemon does not read the client does not count. And
the descriptor limit and listen backlog sized for ``max_clients``."""

from __future__ import annotations

import resource
import socket
from typing import Any

import pytest
from amcast.daemon import api as api_module
from amcast.daemon.api import ApiServer, ClientConnection
from amcast.daemon.config import ApiSection
from daemon_helpers import Backend, FakeTransport

from amcast.socket_protocol import FrameDecoder, encode_frame

TIMEOUT = 0.5


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def conn(monkeypatch: pytest.MonkeyPatch) -> Any:
    clock = Clock()
    monkeypatch.setattr(api_module.time, "monotonic", clock)
    backend = Backend()
    server = ApiServer(ApiSection(frame_timeout_s=TIMEOUT, hello_timeout_s=60), backend)
    c = ClientConnection(server, 1)
    transport = FakeTransport()
    c.connection_made(transport)  # type: ignore[arg-type]
    c.data_received(encode_frame({"t": "hello", "v": 1}))
    assert c.greeted and c.frame_since is None
    yield c, server, backend, clock, transport
    c.connection_lost(None)


def frame(i: int) -> bytes:
    return encode_frame({"t": "send", "id": i, "groups": ["g"], "payloads": [b"x" * 100]})


def codes(transport: FakeTransport) -> list[str]:
    return [f["code"] for f in FrameDecoder().feed(bytes(transport.out)) if f["t"] == "error"]


async def test_a_client_that_keeps_completing_frames_is_never_cut_off(conn: Any) -> None:
    c, server, backend, clock, transport = conn
    stream = b"".join(frame(i) for i in range(40))
    step = len(frame(0)) * 3 // 2  # every read ends inside a frame
    for k, at in enumerate(range(0, len(stream), step)):
        clock.now = 0.4 * k  # 40 s in all, each read 0.4 s after the last
        c.data_received(stream[at : at + step])
        server.check_frames(clock.now + 0.39)
    assert len(backend.sent) == 40 and codes(transport) == [] and not c.closed


async def test_a_frame_left_incomplete_is_cut_off_after_the_timeout(conn: Any) -> None:
    c, server, backend, clock, transport = conn
    clock.now = 10.0
    c.data_received(frame(1) + frame(2)[:3])  # a complete frame, then 3 bytes of a prefix
    assert c.frame_since == 10.0
    server.check_frames(10.0 + TIMEOUT)
    assert not c.closed
    clock.now = 10.3
    c.data_received(frame(2)[3:10])  # more of the same frame: no progress, no reset
    assert c.frame_since == 10.0
    server.check_frames(10.0 + TIMEOUT + 0.01)
    assert c.closed and codes(transport) == ["frame_timeout"]
    assert backend.disconnects == ["frame_timeout"] and c.id not in server.clients


async def test_time_while_the_daemon_does_not_read_does_not_count(conn: Any) -> None:
    c, server, backend, clock, transport = conn
    assert backend.sent == []
    clock.now = 1.0
    c.data_received(frame(1)[:5])
    c._pause("window")  # the cluster's send window is full: nobody is read
    server.check_frames(100.0)
    assert not c.closed and not transport.reading
    clock.now = 100.0
    c._resume("window")  # the client gets the whole timeout again from now
    assert transport.reading and c.frame_since == 100.0
    server.check_frames(100.0 + TIMEOUT)
    assert not c.closed
    server.check_frames(100.0 + TIMEOUT + 0.01)
    assert c.closed and codes(transport) == ["frame_timeout"]


def test_the_fd_limit_is_raised_for_max_clients_up_to_the_hard_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
        got = api_module.ensure_fd_limit(1000)
        want = 1000 + api_module.FD_MARGIN
        if hard != resource.RLIM_INFINITY:
            want = min(want, hard)
        assert got == want == resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        assert api_module.ensure_fd_limit(10) == want  # never lowered
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert api_module.listen_backlog(1000) == min(1000, socket.SOMAXCONN)
    assert api_module.listen_backlog(5) == 100
