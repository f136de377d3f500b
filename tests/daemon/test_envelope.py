"""Envelopes: round trip, garbage rejected, splitting keeps order and respects the limit."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from daemon import envelope


def test_round_trip_and_garbage() -> None:
    data = envelope.encode(7, ["a", "b"], [b"x", b""])
    assert envelope.decode(data) == [7, ["a", "b"], [b"x", b""]]
    for bad in (b"", b"\xc1", envelope.encode(7, ["a"], [b"x"])[:-1], b"\x93\x01\x02\x03"):
        assert envelope.decode(bad) is None


@given(st.lists(st.binary(max_size=300), min_size=1, max_size=50), st.integers(64, 2000))
def test_split_keeps_order_and_bounds_parts(payloads: list[bytes], limit: int) -> None:
    parts = envelope.split(payloads, limit)
    assert [p for part in parts for p in part] == payloads
    for part in parts:
        assert part
        assert len(part) == 1 or sum(len(p) + 8 for p in part) <= limit
