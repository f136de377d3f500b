"""The asyncio ``Client`` against a scripted daemon: refusals, stalls, the end."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from amcast.client import (
    Client,
    ClientTimeout,
    ConnectionClosed,
    MessagesRefused,
    OrderGap,
    Undelivered,
    Unreachable,
    ViewChange,
    WouldBlock,
)
from tests.client.fakedaemon import FakeDaemon


@pytest.fixture
async def loop_errors() -> AsyncIterator[list[dict[str, Any]]]:
    """Whatever reaches the event loop's exception handler ("Exception in callback")."""
    errors: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, ctx: errors.append(ctx))
    yield errors
    loop.set_exception_handler(None)


def sends(fake: FakeDaemon) -> list[dict[str, Any]]:
    return [f for f in fake.received if f["t"] == "send"]


async def test_send_numbers_messages_and_frames_carry_the_first_number(sock: str) -> None:
    with FakeDaemon(sock) as fake:
        c = await Client.connect(sock)
        assert [c.send(b"%d" % k, "g") for k in range(3)] == [0, 1, 2]
        assert c.send(b"x", "h", "safe") == 3
        assert await c.sync() == 4
        assert [(f["id"], f["payloads"]) for f in sends(fake)] == [
            (0, [b"0", b"1", b"2"]), (3, [b"x"])]
        assert c.confirmed == 4 and c.unconfirmed_bytes == 0
        await c.close()


async def test_a_str_payload_raises_at_once(sock: str) -> None:
    with FakeDaemon(sock):
        c = await Client.connect(sock)
        with pytest.raises(TypeError, match="encode"):
            c.send("text", "g")  # type: ignore[arg-type]
        assert c.sent == 0 and not c.errors
        await c.close()


async def test_a_refusal_names_the_refused_messages_and_spares_the_others(sock: str) -> None:
    def refuse(frame: dict[str, Any]) -> str | None:
        return "too_many_groups" if frame["groups"] == ["bad"] else None

    with FakeDaemon(sock, refuse=refuse) as fake:
        c = await Client.connect(sock)
        c.send(b"ok0", "g")
        c.send(b"no1", "bad")
        c.send(b"no2", "bad")
        c.send(b"ok3", "g")
        with pytest.raises(MessagesRefused) as info:
            await c.sync()
        assert info.value.code == "too_many_groups"
        assert info.value.messages == [1, 2]
        assert info.value.payloads == [b"no1", b"no2"]
        assert [f["payloads"] for f in sends(fake) if f["groups"] == ["g"]] == [[b"ok0"],
                                                                                [b"ok3"]]
        assert await c.sync() == 4  # reported once
        # a refusal is also raised by the next send(), which then queues nothing
        c.send(b"no4", "bad")
        await c.status()  # a round trip: the refusal (written before the reply) is in
        with pytest.raises(MessagesRefused) as info:
            c.send(b"ok5", "g")
        assert info.value.messages == [4]
        assert c.send(b"ok5", "g") == 5
        await c.close()


async def test_a_stalled_daemon_bounds_memory_and_waits_time_out(sock: str) -> None:
    with FakeDaemon(sock, stall_after_hello=True) as fake:
        c = await Client.connect(sock, max_unconfirmed_bytes=256 * 1024, timeout=0.5)
        sent = 0
        with pytest.raises(WouldBlock):
            for _ in range(100_000):  # a sender that never awaits anything
                c.send(b"x" * 1000, "g")
                sent += 1
        assert 200 <= sent <= 262
        assert c.unconfirmed_bytes <= 256 * 1024
        with pytest.raises(ClientTimeout, match="stalled") as info:
            await c.drain(timeout=0.3)
        assert isinstance(info.value, TimeoutError) and info.value.unconfirmed == sent
        with pytest.raises(ClientTimeout):
            await c.sync()  # the client's timeout
        with pytest.raises(ClientTimeout):
            await c.status(timeout=0.2)
        with pytest.raises(ClientTimeout):
            await c.send_wait(b"y" * 1000, "g", timeout=0.2)
        fake.resume()
        assert await c.send_wait(b"y" * 1000, "g", timeout=10) == sent
        assert await c.sync(timeout=10) == sent + 1
        await c.drain()
        assert len(sends(fake)) > 0 and sum(len(f["payloads"]) for f in sends(fake)) == sent + 1
        await c.close()


async def test_a_daemon_that_dies_ends_the_client_cleanly(
    sock: str, loop_errors: list[dict[str, Any]],
) -> None:
    with FakeDaemon(sock, echo=False) as fake:
        c = await Client.connect(sock)
        await c.join("g")
        for k in range(3):
            c.send(b"%d" % k, "g")
        assert await c.sync() == 3
        fake.stall()
        c.send(b"3", "g")
        c.flush()  # written, never read by the daemon
        fake.kill()
        with pytest.raises(ConnectionClosed) as info:
            await c.next_event(10)
        with pytest.raises(ConnectionClosed) as info:
            c.send(b"4", "g")
        assert info.value.code == "closed"
        assert info.value.unknown == [range(3, 4)] and info.value.unsent == []
        with pytest.raises(ConnectionClosed):
            await c.close()  # message 3 is of unknown outcome: close says so
    assert loop_errors == []


async def test_a_flush_after_the_connection_is_gone_reports_the_messages_unsent(
    sock: str, loop_errors: list[dict[str, Any]],
) -> None:
    with FakeDaemon(sock):
        c = await Client.connect(sock)
        c.send(b"a", "g")  # its flush is scheduled for the end of this loop turn ...
        c.send(b"b", "g")
        c._proto.transport.abort()  # ... and the transport dies first
        with pytest.raises(ConnectionClosed) as info:
            await c.drain()
        assert [(b.messages, b.payloads) for b in info.value.unsent] == [
            (range(0, 2), [b"a", b"b"])]
        await asyncio.sleep(0)
    assert loop_errors == []  # no "Exception in callback Client.flush()"


async def test_a_stopping_daemon_reports_undelivered_messages_as_unknown(sock: str) -> None:
    with FakeDaemon(sock, echo=False) as fake:
        c = await Client.connect(sock)
        for k in range(6):
            c.send(b"%d" % k, "a")
        for k in range(4):
            c.send(b"%d" % k, "b")
        assert await c.sync() == 10
        fake.stop(undelivered_from=7)
        assert await c.next_event(10) == Undelivered(range(7, 10), "stopped")
        with pytest.raises(ConnectionClosed) as info:
            await c.next_event(10)
        assert info.value.code == "shutting_down"
        assert info.value.unknown == [range(7, 10)]
        assert "3 message(s) of unknown outcome (7..9)" in str(info.value)


async def test_a_daemon_without_sync_still_confirms(sock: str) -> None:
    with FakeDaemon(sock, old_daemon=True):
        c = await Client.connect(sock)
        c.send(b"x", "g")
        assert await c.sync() == 1
        assert not c.errors
        await c.close()


async def test_close_confirms_and_raises_a_last_refusal(sock: str) -> None:
    with FakeDaemon(sock, refuse=lambda f: "message_too_large" if f["payloads"] == [b"big"]
                    else None) as fake:
        async with await Client.connect(sock) as c:
            c.send(b"fine", "g")
        assert [f["payloads"] for f in sends(fake)] == [[b"fine"]]
        c = await Client.connect(sock)
        c.send(b"big", "g")
        with pytest.raises(MessagesRefused) as info:
            await c.close()
        assert info.value.messages == [0]
        with pytest.raises(ConnectionClosed):
            c.send(b"late", "g")


async def test_no_daemon_is_unreachable(sock: str) -> None:
    with pytest.raises(Unreachable) as info:
        await Client.connect(sock)
    assert info.value.code == "not_running"


async def test_a_daemon_that_never_welcomes_times_out(sock: str) -> None:
    import socket

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(sock)
    listener.listen()
    try:
        with pytest.raises(ClientTimeout, match="hello"):
            await Client.connect(sock, timeout=0.3)
    finally:
        listener.close()


async def test_deliveries_and_views_reach_the_application(sock: str) -> None:
    with FakeDaemon(sock) as fake:
        c = await Client.connect(sock)
        assert await c.join("g") == ["g"]
        c.send(b"hello", "g")
        got = [d async for d in _take(c, 1)]
        assert got[0].payload == b"hello" and got[0].client == c.client_id
        assert got[0].message_id == "0:0:0:0" and got[0].position == 0
        assert fake.clients() == 1
        await c.close()


async def _take(c: Client, n: int) -> AsyncIterator[Any]:
    k = 0
    async for d in c.deliveries(10):
        yield d
        k += 1
        if k == n:
            return


GAP = {"t": "gap", "view": 3, "after": [2, 41]}
LOST = {"t": "view", "view": 2, "members": [0], "primary": False, "reason": "no_quorum"}
INSTALLED = {"t": "view", "view": 3, "members": [0, 2], "primary": True, "joined": [2],
             "left": [], "excluded": [1], "previous": 2}


async def test_views_gaps_and_undelivered_come_in_frame_order(sock: str) -> None:
    with FakeDaemon(sock, welcome_extra={"primary": False, "gap": GAP}) as fake:
        c = await Client.connect(sock)
        assert c.gap == OrderGap(3, (2, 41))  # a gap before we connected, from welcome
        assert c.view == ViewChange(0, [0], primary=False)
        await c.join("g")
        fake.emit(LOST)
        fake.emit({**GAP, "view": 4, "after": None})
        fake.emit({**INSTALLED, "view": 4})
        c.send(b"m0", "g")
        c.send(b"m1", "g")
        await c.sync()
        fake.in_doubt(0, 1, 1)  # message 1 of send frame 0 was not delivered
        events = [await c.next_event(10) for _ in range(5)]
        assert events[:3] == [
            ViewChange(2, [0], primary=False, reason="no_quorum"),
            OrderGap(4, None),
            ViewChange(4, [0, 2], True, [2], [], [1], 2),
        ]
        batch = events[3]
        assert [d.message_id for d in batch] == ["0:0:0:0", "0:0:0:1"]  # type: ignore[union-attr]
        assert events[4] == Undelivered(range(1, 2), "excluded", "not_delivered")
        assert (events[4].count, events[4].first) == (1, 1)  # type: ignore[union-attr]
        assert c.view == events[2] and c.gap == OrderGap(4, None)
        fake.stop()
        with pytest.raises(ConnectionClosed) as info:
            await c.next_event(10)
        assert info.value.unknown == [range(1, 2)]  # still counted as unknown at the end
        c.abort()


async def test_old_view_frames_and_welcome_parse_with_defaults(sock: str) -> None:
    with FakeDaemon(sock) as fake:
        c = await Client.connect(sock)
        assert c.gap is None and c.view == ViewChange(0, [0])
        fake.emit({"t": "view", "view": 5, "members": [0, 1]})
        ev = await c.next_event(10)
        assert ev == ViewChange(5, [0, 1], True, [], [], [], None, None)
        await c.close()


def syncs(fake: FakeDaemon) -> int:
    return sum(1 for f in fake.received if f["t"] == "sync")


async def synced_reply(c: Client) -> None:
    """Until the next ``synced`` (or refusal, or the end) reaches the client."""
    c._progress.clear()
    await asyncio.wait_for(c._progress.wait(), 10)


async def test_a_light_sender_costs_no_sync_per_flush(sock: str) -> None:
    # one message per flush, each followed by a round trip (status): the client used to
    # keep a sync in flight, so the daemon answered (and the client read) one synced per
    # message; below an eighth of the bound in flight it now waits for its timer
    with FakeDaemon(sock) as fake:
        c = await Client.connect(sock, sync_interval=3600)
        for k in range(10):
            assert c.send(b"m%d" % k, "g") == k
            c.flush()
            await c.status()  # every earlier frame handled, and any synced read
        assert len(sends(fake)) == 10 and syncs(fake) == 0
        assert c.confirmed == 0 and c.unconfirmed_bytes == 20
        assert await c.sync() == 10  # a wait asks at once
        assert syncs(fake) == 1 and c.confirmed == 10 and c.unconfirmed_bytes == 0
        await c.close()


async def test_the_sync_timer_confirms_what_a_light_sender_wrote(sock: str) -> None:
    with FakeDaemon(sock) as fake:
        c = await Client.connect(sock, sync_interval=0.01)
        for k in range(5):
            c.send(b"m%d" % k, "g")
            c.flush()
        await synced_reply(c)  # nobody waits: the timer asked
        assert syncs(fake) == 1 and c.confirmed == 5 and c.unconfirmed_bytes == 0
        c.send(b"more", "g")
        c.flush()
        await synced_reply(c)
        assert syncs(fake) == 2 and c.confirmed == 6
        await c.close()


async def test_an_eighth_of_the_bound_in_flight_is_synced_with_the_write(sock: str) -> None:
    with FakeDaemon(sock) as fake:
        c = await Client.connect(sock, max_unconfirmed_bytes=8000, sync_interval=3600)
        for _ in range(9):  # 9 x 100 bytes: under 1,000 in flight, no sync
            c.send(b"x" * 100, "g")
        c.flush()
        await c.status()
        assert syncs(fake) == 0
        c.send(b"y" * 100, "g")  # 1,000 bytes in flight once written
        c.flush()
        await synced_reply(c)
        assert syncs(fake) == 1 and c.confirmed == 10
        await c.close()


async def test_an_undelivered_report_carries_its_reason_and_clusters(sock: str) -> None:
    """A cross-cluster report (``reason`` ``deadline``): the same ``Undelivered`` event,
    with the reason and the clusters that had not acknowledged."""
    with FakeDaemon(sock) as fake:
        c = await Client.connect(sock)
        c.send(b"m0", "g")
        c.send(b"m1", "g")
        await c.sync()
        fake.emit({"t": "error", "code": "undelivered", "fatal": False, "id": 0, "first": 0,
                   "count": 2, "detail": "late", "outcome": "unknown", "reason": "deadline",
                   "clusters": ["c", "b"]})
        event = await c.next_event(10)
        assert event == Undelivered(range(0, 2), "late", "unknown", "deadline", ("b", "c"))
        c.abort()
