"""The in-memory stream of the embedded member (``amcast.daemon.inprocess``): order,
no re-entrant delivery, flow control both ways, and the end of the stream."""

from __future__ import annotations

import asyncio

from amcast.daemon.inprocess import pipe


class Recorder(asyncio.Protocol):
    def __init__(self) -> None:
        self.data: list[bytes] = []
        self.lost: list[Exception | None] = []
        self.pauses: list[str] = []
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.data.append(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost.append(exc)

    def pause_writing(self) -> None:
        self.pauses.append("pause")

    def resume_writing(self) -> None:
        self.pauses.append("resume")


async def turns(n: int = 3) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


async def test_bytes_arrive_in_order_on_a_later_turn() -> None:
    a, b = Recorder(), Recorder()
    ta, tb = pipe(asyncio.get_running_loop(), a, b)
    assert a.transport is ta and b.transport is tb
    ta.write(b"one")
    ta.write(b"two")
    assert b.data == []  # never inside write(), as with a socket
    await turns()
    assert b"".join(b.data) == b"onetwo"
    tb.write(b"back")
    await turns()
    assert a.data == [b"back"]
    assert ta.get_extra_info("socket") is None


async def test_a_reader_that_pauses_holds_the_bytes_in_the_writers_buffer() -> None:
    a, b = Recorder(), Recorder()
    ta, tb = pipe(asyncio.get_running_loop(), a, b)
    ta.set_write_buffer_limits(high=10, low=4)
    tb.pause_reading()
    ta.write(b"x" * 8)
    await turns()
    assert b.data == [] and ta.get_write_buffer_size() == 8 and a.pauses == []
    ta.write(b"y" * 8)  # 16 > high: the writer is told to pause
    assert a.pauses == ["pause"]
    await turns()
    assert b.data == [] and ta.get_write_buffer_size() == 16
    tb.resume_reading()
    await turns()
    assert b"".join(b.data) == b"x" * 8 + b"y" * 8
    assert ta.get_write_buffer_size() == 0 and a.pauses == ["pause", "resume"]


async def test_close_hands_over_the_written_bytes_then_the_end() -> None:
    a, b = Recorder(), Recorder()
    ta, tb = pipe(asyncio.get_running_loop(), a, b)
    tb.pause_reading()
    ta.write(b"last words")
    ta.close()
    assert ta.is_closing()
    ta.write(b"ignored")
    await turns()
    assert b.data == [] and b.lost == []  # the end waits behind the unread bytes
    tb.resume_reading()
    await turns()
    assert b.data == [b"last words"]
    assert a.lost == [None] and b.lost == [None]
    assert tb.is_closing()


async def test_abort_drops_what_is_buffered_and_ends_both_sides() -> None:
    a, b = Recorder(), Recorder()
    ta, tb = pipe(asyncio.get_running_loop(), a, b)
    tb.pause_reading()
    ta.write(b"never read")
    tb.abort()
    await turns()
    assert b.data == [] and a.lost == [None] and b.lost == [None]
    assert ta.get_write_buffer_size() == 0
