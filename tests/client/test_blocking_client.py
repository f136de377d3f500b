"""``BlockingClient`` against a scripted daemon: numbers, refusals, stalls, the end."""

from __future__ import annotations

import select
import time
from typing import Any

import pytest

from amcast.client import (
    BlockingClient,
    ClientTimeout,
    ConnectionClosed,
    DeliveredBatch,
    MessagesRefused,
    OrderGap,
    Undelivered,
    Unreachable,
    ViewChange,
)
from tests.client.fakedaemon import FakeDaemon


def sends(fake: FakeDaemon) -> list[dict[str, Any]]:
    return [f for f in fake.received if f["t"] == "send"]


def test_numbers_refusals_and_sync(sock: str) -> None:
    with FakeDaemon(sock, refuse=lambda f: "bad_field" if f["groups"] == ["bad"] else None) \
            as fake:
        with BlockingClient(sock) as c:
            assert [c.send(b"a", "g"), c.send(b"b", "bad"), c.send(b"c", "g")] == [0, 1, 2]
            with pytest.raises(MessagesRefused) as info:
                c.sync()
            assert info.value.messages == [1] and info.value.payloads == [b"b"]
            assert c.sync() == 3
            with pytest.raises(TypeError):
                c.send("text", "g")  # type: ignore[arg-type]
        assert [f["payloads"] for f in sends(fake)] == [[b"a"], [b"b"], [b"c"]]
        assert [f["id"] for f in sends(fake)] == [0, 1, 2]


def test_a_stalled_daemon_blocks_send_until_the_timeout(sock: str) -> None:
    with FakeDaemon(sock, stall_after_hello=True) as fake:
        c = BlockingClient(sock, max_unconfirmed_bytes=64 * 1024, timeout=0.3)
        sent = 0
        start = time.monotonic()
        with pytest.raises(ClientTimeout, match="stalled"):
            for _ in range(10_000):
                c.send(b"x" * 1000, "g")
                sent += 1
        assert 60 <= sent <= 66 and time.monotonic() - start < 5
        with pytest.raises(ClientTimeout):
            c.sync(timeout=0.2)
        with pytest.raises(ClientTimeout):
            c.status(timeout=0.2)
        fake.resume()
        assert c.sync(timeout=10) == sent
        c.close()


def test_a_write_the_daemon_never_reads_closes_with_a_report(sock: str) -> None:
    with FakeDaemon(sock, stall_after_hello=True):
        c = BlockingClient(sock, max_unconfirmed_bytes=1 << 30, max_batch_bytes=1 << 20,
                           timeout=0.3)
        big = b"z" * 60_000
        with pytest.raises(ConnectionClosed) as info:
            for _ in range(1000):  # the socket buffers fill, then a write cannot finish
                c.send(big, "g")
        err = info.value
        assert err.code == "timeout"
        unsent = [m for b in err.unsent for m in b.messages]
        unknown = list(err.unknown_messages())
        assert unsent and sorted(unknown + unsent) == list(range(unknown[0] if unknown else 0,
                                                                 unsent[-1] + 1))
        with pytest.raises(ConnectionClosed):
            c.send(b"more", "g")


def test_deliveries_poll_and_fileno(sock: str) -> None:
    with FakeDaemon(sock), BlockingClient(sock) as c:
        c.join("g")
        assert c.poll_event() is None
        c.send(b"one", "g")
        c.flush()
        select.select([c], [], [], 10)
        item = c.next_event(10)
        assert isinstance(item, DeliveredBatch)
        assert [d.payload for d in item] == [b"one"]
        with pytest.raises(ClientTimeout):
            c.next_event(0.1)


def test_a_daemon_that_dies_is_reported(sock: str) -> None:
    with FakeDaemon(sock, echo=False) as fake:
        c = BlockingClient(sock)
        c.send(b"a", "g")
        c.sync()
        fake.kill()
        with pytest.raises(ConnectionClosed) as info:
            c.next_event(10)
        assert info.value.code == "closed" and info.value.unknown == []
        c.close()  # nothing unsent or unknown: a quiet close


def test_a_stopping_daemon_reports_undelivered(sock: str) -> None:
    with FakeDaemon(sock, echo=False) as fake:
        c = BlockingClient(sock)
        for k in range(5):
            c.send(b"%d" % k, "g")
        c.sync()
        fake.stop(undelivered_from=3)
        assert c.next_event(10) == Undelivered(range(3, 5), "stopped")
        with pytest.raises(ConnectionClosed) as info:
            c.next_event(10)
        assert info.value.code == "shutting_down" and info.value.unknown == [range(3, 5)]
        with pytest.raises(ConnectionClosed):
            c.close()


def test_no_daemon_is_unreachable(sock: str) -> None:
    with pytest.raises(Unreachable, match="no amcastd listening"):
        BlockingClient(sock)


def test_views_gaps_and_undelivered_come_in_frame_order(sock: str) -> None:
    gap = {"t": "gap", "view": 7, "after": [6, 3]}
    with FakeDaemon(sock, welcome_extra={"primary": True, "gap": gap}) as fake, \
            BlockingClient(sock) as c:
        assert c.gap == OrderGap(7, (6, 3)) and c.view == ViewChange(0, [0])
        c.join("g")
        fake.emit({"t": "view", "view": 7, "members": [0, 1], "primary": False,
                   "reason": "excluded"})
        fake.emit({"t": "gap", "view": 8, "after": [7, 0]})
        c.send(b"x", "g")
        c.sync()
        fake.in_doubt(0, 0, 1, "unknown")
        fake.emit({"t": "view", "view": 8, "members": [0, 1], "primary": True,
                   "joined": [], "left": [1], "excluded": [], "previous": 7})
        events = [c.next_event(10) for _ in range(5)]
        assert events[0] == ViewChange(7, [0, 1], primary=False, reason="excluded")
        assert events[1] == OrderGap(8, (7, 0))
        assert isinstance(events[2], DeliveredBatch)
        assert events[3] == Undelivered(range(0, 1), "excluded", "unknown")
        assert events[4] == ViewChange(8, [0, 1], True, [], [1], [], 7)
        assert c.gap == OrderGap(8, (7, 0)) and c.view == events[4]
        assert c.poll_event() is None
