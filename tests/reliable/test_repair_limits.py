"""Per-peer limits on nack handling and retransmission (``reliable.ratelimit``).

The reliable layer is driven by hand with a fake clock: one origin holds vertices, a
"peer" sends it nacks (well-formed ones, as a member holding the group key could), and
the tests count the REPAIR datagrams and bytes that come out against the configured
buckets. Honest repair is checked on the same layer (a real loss, nacked and repaired
within the defaults).
"""

from __future__ import annotations

import random

import pytest
from amcast.protocols.errors import ConfigurationError
from amcast.protocols.node_config import NodeConfig
from amcast.protocols.reliable.layer import ReliableCounters, ReliableLayer, repair_size
from amcast.protocols.reliable.ratelimit import MAX_PEERS, PeerLimiter, RepairLimits, TokenBucket
from amcast.protocols.vocabulary import ServiceLevel
from amcast.protocols.wire.auth import SESSION_BYTES, Authenticator
from amcast.protocols.wire.codec import Datagram, Kind, encode

VIEW = 3
MEMBERS = (1, 2, 3)
AUTH = Authenticator(None, bytes(SESSION_BYTES))


class Origin:
    """Node 1 with ``sent`` own data vertices of ``size`` bytes each."""

    def __init__(self, cfg: NodeConfig, sent: int = 100, size: int = 1000) -> None:
        self.drops: dict[str, int] = {}
        self.layer = ReliableLayer(
            VIEW,
            1,
            MEMBERS,
            config=cfg,
            rng=random.Random(1),
            now=0.0,
            drop=self._drop,
            counters=ReliableCounters(),
        )
        for i in range(sent):
            v = self.layer.new_vertex(ServiceLevel.AGREED, (bytes([i % 256]) * size,), 0.0)
            self.layer.on_release(v, 0.0)
        self.layer.take_datagrams(0.0)
        self.vertex_bytes = repair_size(v)

    def _drop(self, reason: str, detail: str) -> None:
        self.drops[reason] = self.drops.get(reason, 0) + 1

    def nack(self, now: float, *ranges: tuple[int, int], peer: int = 2) -> None:
        nacks = tuple((1, first, last) for first, last in ranges)
        self.layer.receive(Datagram(Kind.NACK, peer, VIEW, 0, nacks), now)

    def repairs(self, until: float) -> list[Datagram]:
        """Fire every timer up to ``until``; the REPAIR datagrams sent."""
        out: list[Datagram] = []
        layer = self.layer
        while (at := layer.next_timer()) is not None and at <= until:
            layer.handle_timer(at)
            out += [dg for dg in layer.take_datagrams(at) if dg.kind == Kind.REPAIR]
        return out


def cfg(**kw: float) -> NodeConfig:
    return NodeConfig(insecure=True, **kw)  # type: ignore[arg-type]


def test_token_bucket_refills_at_its_rate_up_to_its_burst_and_ignores_a_clock_going_back() -> None:
    b = TokenBucket(rate=10.0, burst=5.0, now=0.0)
    assert b.take(5, 0.0) and not b.take(1, 0.0)
    assert b.take(1, 0.1) and not b.take(1, 0.1)  # 0.1 s at 10/s: one token
    assert b.refill(100.0) == 5.0  # never more than the burst
    assert b.take(5, 100.0)
    assert b.refill(50.0) == 0.0  # an earlier time refills nothing
    assert not b.take(0.5, 100.0)


def test_defaults_follow_the_window_and_the_nack_retry() -> None:
    c = NodeConfig(insecure=True)
    lim = c.repair_limits(4)
    assert lim.nack_burst == 4 * c.max_nack_ranges
    assert lim.nack_rate == pytest.approx(lim.nack_burst / c.nack_retry)
    assert lim.repair_burst_bytes == 3 * c.effective_window_bytes(4)
    assert lim.repair_rate_bytes == lim.repair_burst_bytes
    set_ = cfg(nack_rate=7, nack_burst=3, repair_rate_bytes=5000, repair_burst_bytes=9000)
    assert set_.repair_limits(4) == RepairLimits(7, 3, 5000, 9000)


def test_bad_limits_are_configuration_errors() -> None:
    with pytest.raises(ConfigurationError):
        cfg(nack_rate=-1)
    with pytest.raises(ConfigurationError):
        cfg(repair_burst_bytes=100)  # less than one datagram


def test_one_peer_cannot_make_the_node_retransmit_more_than_its_burst_plus_rate() -> None:
    o = Origin(cfg(repair_burst_bytes=20_000, repair_rate_bytes=10_000, repair_holdoff=0.0))
    per = o.vertex_bytes
    sent = 0
    t = 0.0
    for _ in range(200):  # a nack for all 100 vertices every 10 ms for 2 s
        o.nack(t, (1, 100))
        sent += len(o.repairs(t + 0.0099))
        t += 0.01
    budget = 20_000 + 10_000 * t
    assert sent * per <= budget
    assert sent * per >= budget - 2 * per  # and the budget is what it gets, not less
    assert o.drops["repair_rate_limited"] > 0


def test_one_nack_datagram_never_causes_more_than_the_burst() -> None:
    o = Origin(cfg(repair_burst_bytes=5_000, max_nack_ranges=8))
    o.nack(0.0, *[(1, 100)] * 8)
    assert len(o.repairs(1.0)) * o.vertex_bytes <= 5_000


def test_the_burst_belongs_to_the_peer_another_peer_has_its_own() -> None:
    o = Origin(cfg(repair_burst_bytes=5_000, repair_rate_bytes=1))
    o.nack(0.0, (1, 50))
    first = len(o.repairs(1.0))
    o.nack(1.0, (51, 100), peer=3)
    assert len(o.repairs(2.0)) == first == 5_000 // o.vertex_bytes


def test_a_long_range_is_truncated_to_max_repair_per_nack_and_counted() -> None:
    o = Origin(cfg(max_repair_per_nack=10))
    o.nack(0.0, (1, 100))
    assert len(o.repairs(1.0)) == 10
    assert o.drops == {"nack_range_truncated": 1}


def test_nacks_of_own_vertices_never_sent_are_refused_whole_and_counted() -> None:
    o = Origin(cfg(), sent=5)
    o.nack(0.0, (6, 10**12))
    o.nack(0.5, (4, 6))  # partly real: no honest member asks for seq 6, refused whole
    assert o.repairs(1.0) == []
    assert o.layer.counters.own_losses == 0  # no loss signal either: the window stays
    assert o.drops == {"nack_beyond_sent": 2}


def test_nacks_for_vertices_the_requester_acknowledged_are_ignored() -> None:
    o = Origin(cfg(), sent=10)
    o.layer.acks.report(2, ((1, 7),))  # peer 2 said it holds node 1's vertices up to 7
    o.nack(0.0, (1, 7))
    assert o.repairs(1.0) == []
    assert o.layer.counters.own_losses == 0
    o.nack(1.0, (5, 9))  # only 8 and 9 can be missing there
    assert sorted(dg.vertices[0].seq for dg in o.repairs(2.0)) == [8, 9]
    assert o.drops == {}  # stale nacks are honest: not counted as drops


def test_nack_handling_is_rate_limited_per_peer() -> None:
    o = Origin(cfg(nack_burst=4, nack_rate=100, max_nack_ranges=16), sent=20)
    o.nack(0.0, *[(i, i) for i in range(1, 17)])
    assert len(o.repairs(0.5)) == 4  # the other 12 ranges were refused whole
    assert o.drops == {"nack_rate_limited": 1}  # once per datagram and reason
    o.nack(0.52, (5, 5), (6, 6))  # 20 ms at 100/s: two more ranges
    assert len(o.repairs(1.0)) == 2


def test_nacks_for_stable_or_unheld_vertices_cost_nothing_and_schedule_nothing() -> None:
    o = Origin(cfg(repair_burst_bytes=5_000, repair_rate_bytes=1), sent=3)
    o.nack(0.0, (1, 3))
    o.nack(0.001, (1, 3))  # pending already: no second charge
    assert len(o.repairs(1.0)) == 3
    o.nack(2.0, (4, 3 * 10**6), peer=3)  # beyond sent: refused before any loop
    assert o.repairs(3.0) == []


def test_honest_repair_under_the_defaults_is_not_limited() -> None:
    """A member that lost every vertex of a full window gets it all at once."""
    c = NodeConfig(insecure=True, window_bytes=200_000)
    o = Origin(c, sent=180, size=1000)
    o.nack(0.0, (1, 180))  # one range, within max_repair_per_nack
    got = o.repairs(1.0)
    assert sorted(dg.vertices[0].seq for dg in got) == list(range(1, 181))
    assert o.drops == {}
    assert sum(len(encode(dg, AUTH, 0)) for dg in got) <= 180 * o.vertex_bytes


def test_the_peer_table_is_bounded() -> None:
    lim = PeerLimiter(RepairLimits(1, 1, 1, 1))
    for peer in range(MAX_PEERS + 10):
        lim.allow_nack(peer, 0.0)
    assert len(lim._nacks) <= MAX_PEERS


def test_new_limits_apply_to_every_peer_from_a_full_burst() -> None:
    lim = PeerLimiter(
        RepairLimits(nack_rate=1, nack_burst=1, repair_rate_bytes=1, repair_burst_bytes=100)
    )
    assert lim.allow_repair(2, 100, 0.0) and not lim.allow_repair(2, 100, 0.0)
    lim.set_limits(RepairLimits(1, 1, repair_rate_bytes=1, repair_burst_bytes=300))
    assert lim.allow_repair(2, 300, 0.0)
