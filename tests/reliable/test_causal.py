"""Causal release: causal order, no duplicates, bounded hold buffer, gaps for nacks."""

from __future__ import annotations

import random

import pytest
from amcast.protocols.errors import ProtocolViolation
from amcast.protocols.reliable.causal import (
    BEYOND_WINDOW,
    BUFFER_FULL,
    DUPLICATE,
    HELD,
    CausalReleaser,
)
from amcast.protocols.reliable.stability import AckMatrix
from amcast.protocols.vocabulary import ServiceLevel
from amcast.protocols.wire.codec import Vertex
from hypothesis import given, settings
from hypothesis import strategies as st


def vx(origin: int, seq: int, *acks: tuple[int, int]) -> Vertex:
    return Vertex(origin, seq, tuple(acks), ServiceLevel.AGREED, 0.0, (b"x",))


def history(rng: random.Random, n: int, length: int) -> list[Vertex]:
    """A causal history: each new vertex acks what its sender 'received' (delta acks)."""
    seen = [[0] * n for _ in range(n)]  # seen[p][q]: highest seq of q that p holds
    latest = [0] * n
    out: list[Vertex] = []
    acked = [[0] * n for _ in range(n)]
    for _ in range(length):
        p = rng.randrange(n)
        for q in range(n):  # p receives a random prefix of q's vertices
            if q != p and latest[q] > seen[p][q]:
                seen[p][q] = rng.randint(seen[p][q], latest[q])
        latest[p] += 1
        seen[p][p] = latest[p]
        delta = tuple((q, seen[p][q]) for q in range(n) if q != p and seen[p][q] > acked[p][q])
        for q, s in delta:
            acked[p][q] = s
        out.append(vx(p, latest[p], *delta))
    return out


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32), st.integers(2, 6), st.integers(1, 60))
def test_any_arrival_order_with_duplicates_releases_everything_causally(
    seed: int, n: int, length: int
) -> None:
    rng = random.Random(seed)
    vertices = history(rng, n, length)
    arrivals = vertices + rng.sample(vertices, len(vertices) // 3)
    rng.shuffle(arrivals)
    releaser = CausalReleaser(range(n), receive_window=10_000, max_held=10_000)
    released: list[Vertex] = []
    statuses = [releaser.offer(v, released) for v in arrivals]
    assert statuses.count(DUPLICATE) == len(arrivals) - len(vertices)
    assert sorted(released, key=lambda v: v.id) == sorted(vertices, key=lambda v: v.id)
    done: dict[int, int] = dict.fromkeys(range(n), 0)
    for v in released:
        assert done[v.origin] == v.seq - 1, "sender order"
        for node, seq in v.acks:
            assert done[node] >= seq, "acked vertex released first"
        done[v.origin] = v.seq
    assert releaser.held_count == 0


def test_gaps_are_reported_as_ranges_and_bounds_hold() -> None:
    r = CausalReleaser([0, 1, 2], receive_window=5, max_held=3)
    out: list[Vertex] = []
    assert r.offer(vx(1, 3), out) == HELD
    assert r.offer(vx(1, 6), out) == BEYOND_WINDOW
    assert r.offer(vx(2, 1, (1, 2)), out) == HELD  # released only after (1, 2)
    assert r.missing(1, 10) == [(1, 2), (4, 5)]  # known = 6, window caps at 5
    assert r.offer(vx(1, 4), out) == HELD
    assert r.offer(vx(1, 5), out) == BUFFER_FULL
    r.note_known(0, 2)
    assert r.has_gap(0) and r.missing(0, 10) == [(1, 2)]
    assert r.offer(vx(1, 1), out) == HELD
    assert out == [vx(1, 1)]
    assert r.offer(vx(1, 2), out) == HELD
    assert [v.id for v in out[:2]] == [(1, 1), (1, 2)]
    assert sorted(v.id for v in out) == [(1, 1), (1, 2), (1, 3), (1, 4), (2, 1)]
    assert r.held_count == 0
    assert r.offer(vx(1, 2), out) == DUPLICATE
    with pytest.raises(ProtocolViolation):
        r.offer(vx(2, 5, (2, 5)), out)
    with pytest.raises(ProtocolViolation):
        r.offer(vx(2, 5, (7, 1)), out)


def test_ack_matrix_rebuilds_full_vectors_from_deltas_and_finds_stability() -> None:
    m = AckMatrix([0, 1, 2])
    m.apply(vx(0, 1))
    m.apply(vx(1, 1, (0, 1)))
    assert dict(m.refresh()) == {}
    m.apply(vx(2, 1, (1, 1)))  # delta: acks (1, 1), which already acked (0, 1)...
    assert m.vectors[2] == {0: 0, 1: 1, 2: 1}  # ...but vectors hold only direct acks
    m.apply(vx(2, 2, (0, 1)))
    assert dict(m.refresh()) == {0: 1}
    m.apply(vx(0, 2, (1, 1), (2, 2)))
    m.apply(vx(1, 2, (2, 2)))
    assert dict(m.refresh()) == {1: 1, 2: 2}
    assert m.delta_for(0, {0: 2, 1: 2, 2: 2}) == ((1, 2),)
