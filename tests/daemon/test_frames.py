"""The unix-socket frame codec: round trips, resync after bad frames, bounded buffering."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amcast.socket_protocol import PREFIX, FrameDecoder, FrameError
from amcast.socket_protocol import encode_frame as encode


def test_round_trip_split_anywhere() -> None:
    data = b"".join(encode({"t": "send", "payloads": [bytes([i]) * i], "i": i}) for i in range(50))
    for cut in (1, 3, 7, 64, len(data)):
        dec = FrameDecoder()
        got = []
        for i in range(0, len(data), cut):
            got += dec.feed(data[i : i + cut])
        assert [f["i"] for f in got] == list(range(50))
        assert dec.truncated() is None


def test_garbage_body_is_an_error_and_the_stream_resyncs() -> None:
    dec = FrameDecoder()
    bad = PREFIX.pack(3) + b"\xc1\xc1\xc1"
    not_map = PREFIX.pack(1) + msgpack.packb(7)
    no_type = PREFIX.pack(1) + msgpack.packb({})
    out = dec.feed(bad + not_map + no_type + encode({"t": "hello"}))
    assert [x.code for x in out[:3]] == ["bad_frame"] * 3
    assert out[3] == {"t": "hello"}


def test_oversized_frame_is_skipped_without_buffering() -> None:
    dec = FrameDecoder(max_frame_bytes=1024)
    out = dec.feed(PREFIX.pack(10_000) + b"x" * 100)
    assert out == [FrameError("frame_too_large", "10000 bytes > max_frame_bytes 1024")]
    assert dec.buffered == 0
    for _ in range(98):
        assert dec.feed(b"y" * 100) == []
    assert dec.buffered == 0
    assert dec.feed(b"z" * 100 + encode({"t": "status"})) == [{"t": "status"}]


def test_truncated_stream_is_reported() -> None:
    dec = FrameDecoder()
    frame = encode({"t": "hello", "v": 1})
    assert dec.feed(frame[:-1]) == []
    err = dec.truncated()
    assert err is not None and err.code == "truncated_frame"


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.binary(max_size=64), max_size=20), st.integers(1, 16))
def test_fuzz_never_raises_and_stays_bounded(chunks: list[bytes], step: int) -> None:
    dec = FrameDecoder(max_frame_bytes=256)
    data = b"".join(chunks)
    for i in range(0, len(data), step):
        for item in dec.feed(data[i : i + step]):
            assert isinstance(item, FrameError | dict)
            if isinstance(item, dict):
                assert isinstance(item["t"], str)
        assert dec.buffered <= 256 + 4 + step


@pytest.mark.slow
@settings(max_examples=1000, deadline=None)
@given(
    st.lists(
        st.dictionaries(
            st.text(max_size=5), st.binary(max_size=20) | st.integers(-(2**63), 2**63 - 1),
            max_size=4,
        ),
        max_size=10,
    ),
    st.binary(max_size=40),
)
def test_fuzz_valid_frames_survive_interleaved_garbage(maps: list[dict], junk: bytes) -> None:
    dec = FrameDecoder()
    data = b""
    for m in maps:
        data += PREFIX.pack(len(junk)) + junk + encode({**m, "t": "x"})
    out = [x for x in dec.feed(data) if isinstance(x, dict)]
    # every valid frame comes out (junk bodies may themselves decode as frames)
    assert len(out) >= len(maps)


def test_pop_leaves_what_it_did_not_return_undecoded() -> None:
    """``push`` then ``pop`` one item at a time: what is not popped stays as bytes (the
    daemon stops handling a client's frames while it does not read its answers)."""
    frames = [encode({"t": "status", "id": i}) for i in range(10_000)]
    data = b"".join(frames)
    dec = FrameDecoder()
    dec.push(data[:-3])  # the last frame incomplete
    got = [dec.pop() for _ in range(100)]
    assert [f["id"] for f in got] == list(range(100))
    assert dec.buffered == len(data) - 3 - sum(map(len, frames[:100]))
    assert dec.partial
    rest = []
    while (item := dec.pop()) is not None:
        rest.append(item["id"])
    assert rest == list(range(100, 9_999))
    assert dec.buffered == len(frames[-1]) - 3  # only the partial frame is kept
    assert dec.feed(data[-3:]) == [{"t": "status", "id": 9_999}]
    assert dec.buffered == 0 and not dec.partial and dec.truncated() is None
