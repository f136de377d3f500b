"""The Node contract: bad input is a counted drop, backpressure, ack-only and heartbeats,
repair of a lost last message, safe hold-back, fragmentation up to 16 MiB."""

from __future__ import annotations

import itertools
import random

import pytest
from amcast.protocols.errors import BackpressureError, ClientError, ConfigurationError
from amcast.protocols.events import (
    BackpressureApplied,
    BackpressureReleased,
    BatchDelivered,
    DatagramDropped,
    ServiceLevel,
)
from amcast.protocols.node import Node
from amcast.protocols.node_config import NodeConfig
from amcast.protocols.reliable.holdback import CausalHoldback
from amcast.protocols.simulation.cluster import Cluster
from amcast.protocols.wire.auth import Authenticator
from amcast.protocols.wire.codec import Datagram, Kind, Vertex, encode
from amcast.protocols.wire.keys import Keyring
from amcast.protocols.wire.membership import ViewRecord

KEY = b"simulation-group-key"


def node(n: int = 3, node_id: int = 0, **kw: object) -> Node:
    """A node already in view 1 of ``n`` members (as if every member had agreed on it)."""
    cfg = NodeConfig(group_key=KEY, **kw)  # type: ignore[arg-type]
    return Node(cfg, node_id=node_id, members=list(range(n)), rng=random.Random(1), now=0.0,
                initial_view=ViewRecord.agreed(list(range(n))))


def delivered(cluster: Cluster, i: int) -> list[bytes]:
    return [d.payload for d in cluster.logs[i]]


def kinds_sent(cluster: Cluster) -> dict[str, int]:
    total: dict[str, int] = {}
    for nd in cluster.nodes.values():
        for kind, count in nd.stats.datagrams_sent.items():
            total[kind] = total.get(kind, 0) + count
    return total


def test_config_requires_a_key_or_an_explicit_insecure_choice() -> None:
    with pytest.raises(ConfigurationError):
        NodeConfig()
    with pytest.raises(ConfigurationError):
        NodeConfig(group_key=b"short")
    with pytest.raises(ConfigurationError):
        NodeConfig(insecure=True, group_key=KEY)
    with pytest.raises(ConfigurationError):
        NodeConfig(insecure=True, rule="nonsense")
    NodeConfig(insecure=True)


def test_bad_input_never_raises_and_is_counted_with_a_reason() -> None:
    nd = node()
    peer = Authenticator(Keyring.single(KEY), bytes(16))
    other = Authenticator(Keyring.single(b"another-group-key"), b"o" * 16)
    rotated = Authenticator(Keyring(((1, KEY), (2, b"a later key, unknown here"))), b"r" * 16)
    nd.wall_offset = 100.0
    wall = 101_000  # ms: the node's clock below is 1.0 s, plus its wall offset
    replayed = encode(Datagram(Kind.HEARTBEAT, 1, 1, 0), peer, wall)
    inputs = {
        "truncated": b"\x01",
        "bad_version": b"\x07\x01" + b"x" * 40,
        "auth_failed": encode(Datagram(Kind.HEARTBEAT, 1, 1, 0), other, wall),
        "auth_missing": encode(Datagram(Kind.HEARTBEAT, 1, 1, 0),
                               Authenticator(None, b"i" * 16), wall),
        "unknown_key": rotated.seal(b"\x90", wall),  # sent with key 2, the newest
        "stale": encode(Datagram(Kind.HEARTBEAT, 1, 1, 0), peer, wall - 31_000),
        "future": encode(Datagram(Kind.HEARTBEAT, 1, 1, 0), peer, wall + 31_000),
        "malformed": peer.seal(b"\xc1", wall),
        "unknown_sender": encode(Datagram(Kind.HEARTBEAT, 9, 1, 0),
                                 Authenticator(Keyring.single(KEY), b"u" * 16), wall),
        # (a session is one daemon's: the peer's claiming another id is refused whole)
        "session_sender_mismatch": encode(Datagram(Kind.HEARTBEAT, 2, 1, 0), peer, wall),
        "stale_view": encode(Datagram(Kind.HEARTBEAT, 1, 0, 0), peer, wall),
        "unknown_member": encode(Datagram(Kind.NACK, 1, 1, 0, ((9, 1, 1),)), peer, wall),
    }
    nd.receive_datagram(replayed, 1.0)  # admitted (a heartbeat of a known member)
    nd.events()
    inputs["replayed"] = replayed
    for data in inputs.values():
        nd.receive_datagram(data, 1.0)
    events = nd.events()
    assert [e.reason for e in events if isinstance(e, DatagramDropped)] == list(inputs)
    assert nd.stats.drops == dict.fromkeys(inputs, 1)
    echo = Authenticator(Keyring.single(KEY), b"e" * 16)  # as the node's own session
    nd.receive_datagram(encode(Datagram(Kind.HEARTBEAT, 0, 1, 0), echo, wall), 1.0)
    assert nd.stats.own_echoes == 1 and not nd.events()


def test_submit_rejects_misuse() -> None:
    nd = node(max_message_size=1000, max_pending_bytes=1000)
    with pytest.raises(ClientError):
        nd.submit(b"x" * 1001, 0.0)
    with pytest.raises(ClientError):
        nd.submit("text", 0.0)  # type: ignore[arg-type]


def test_backpressure_when_the_window_is_full_and_release_once_stable() -> None:
    cfg = NodeConfig(group_key=KEY, window_size=4, suspect_timeout=10.0)  # one view
    cluster = Cluster(3, seed=1, node_config=cfg)
    cluster.link_filter = lambda src, dst, data: cluster.now > 1.0  # partitioned until t=1
    sender = cluster.nodes[0]
    accepted = 0
    with pytest.raises(BackpressureError):
        for k in range(100):
            sender.submit(b"m%d" % k, cluster.now)
            sender.datagrams_to_send()
            accepted += 1
    assert accepted == 4  # one vertex per poll: the window holds 4 unstable vertices
    events = sender.events()
    assert sum(isinstance(e, BackpressureApplied) for e in events) == 1
    with pytest.raises(BackpressureError):
        sender.submit(b"again", cluster.now)
    assert not any(isinstance(e, BackpressureApplied) for e in sender.events())  # reported once
    assert sender.stats.backpressure_events == 2
    assert sender.stats.window_occupancy == 4
    cluster.advance(3.0)  # heartbeats after t=1 reveal the gap, repairs flow, acks come back
    released = [e for e in cluster.other_events[0] if isinstance(e, BackpressureReleased)]
    assert len(released) == 1
    assert all(len(delivered(cluster, i)) == 4 for i in range(3))
    assert sender.stats.window_occupancy == 0
    sender.submit(b"after", cluster.now)  # accepted again


def test_pending_queue_is_bounded() -> None:
    nd = node(max_message_size=1000, max_pending_bytes=2500, window_size=1)
    nd.submit(b"x" * 1000, 0.0)
    nd.submit(b"x" * 1000, 0.0)
    with pytest.raises(BackpressureError):
        nd.submit(b"x" * 1000, 0.0)  # 3000 queued bytes would exceed 2500
    assert nd.stats.pending_bytes == 2000
    assert len(nd.datagrams_to_send()) == 1  # window of one vertex
    assert nd.stats.pending_bytes == 1000
    with pytest.raises(BackpressureError):
        nd.submit(b"y", 0.0)  # window full


def test_idle_cluster_goes_quiet_except_heartbeats() -> None:
    n = 4
    cluster = Cluster(n, seed=3)
    cluster.submit(0, b"only message", ServiceLevel.AGREED)
    cluster.advance(10.0)
    assert all(delivered(cluster, i) == [b"only message"] for i in range(n))
    sent = kinds_sent(cluster)
    assert sent["data"] == 1
    assert sent["ack_only"] == n - 1  # one per receiver, none in answer to an ack-only
    assert sent["nack"] == sent["repair"] == 0
    hb = cluster.config.heartbeat_interval
    assert n * (10.0 / hb - 2) <= sent["heartbeat"] <= n * (10.0 / hb + 1)


def test_idle_members_beat_together_on_the_grid_and_are_never_silent_longer() -> None:
    """Heartbeats go at multiples of heartbeat_interval (one wake-up takes the peers'
    and sends one's own), and the membership tick shares that grid; idle members beat
    exactly once an interval, and no member is ever silent for more than one and a half
    intervals, whenever its last datagram went out."""
    n = 4
    cluster = Cluster(n, seed=4)
    hb = cluster.config.heartbeat_interval
    sends: dict[int, list[float]] = {i: [] for i in range(n)}

    def record(src: int, dst: int, data: bytes) -> bool:
        if not sends[src] or sends[src][-1] != cluster.now:
            sends[src].append(cluster.now)
        return True

    cluster.link_filter = record
    cluster.advance(2.0)
    cluster.submit(1, b"off the grid", ServiceLevel.AGREED)  # data at an arbitrary time
    cluster.advance(cluster.now + 0.0377)
    cluster.submit(2, b"again", ServiceLevel.AGREED)
    cluster.advance(6.0)
    assert all(delivered(cluster, i) == [b"off the grid", b"again"] for i in range(n))
    for i, times in sends.items():
        late = [t for t in times if t > 2.5]  # past the views' start-up and the data
        assert len(late) >= 30
        assert all(abs(t / hb - round(t / hb)) < 1e-6 for t in late), (i, late[:5])
        gaps = [b - a for a, b in itertools.pairwise(times)]
        assert max(gaps) <= 1.5 * hb + 1e-9, (i, max(gaps))
        assert all(abs(b - a - hb) < 1e-9 for a, b in itertools.pairwise(late)), i


def test_lost_last_message_is_repaired_within_two_heartbeat_intervals() -> None:
    cluster = Cluster(2, seed=5)
    first = []

    def lose_first_data(src: int, dst: int, data: bytes) -> bool:
        dg = cluster.nodes[src].peek(data)
        if dg.kind is Kind.DATA and not first:
            first.append(dg)
            return False
        return True

    cluster.link_filter = lose_first_data
    cluster.advance(0.3)
    t0 = cluster.now
    cluster.submit(0, b"last words", ServiceLevel.CAUSAL)
    hb = cluster.config.heartbeat_interval
    cluster.advance(t0 + 2 * hb)
    assert first and delivered(cluster, 1) == [b"last words"]
    assert cluster.logs[1][0].time - t0 <= 2 * hb
    assert cluster.nodes[1].stats.datagrams_sent["nack"] >= 1
    assert cluster.nodes[0].stats.retransmissions == 1


def test_safe_message_waits_for_stability_and_holds_back_what_follows() -> None:
    cfg = NodeConfig(group_key=KEY, rule="stoto", suspect_timeout=10.0)  # one view
    cluster = Cluster(3, seed=2, node_config=cfg)
    cluster.link_filter = lambda src, dst, data: not (src == 2 and cluster.now < 1.0)
    cluster.submit(0, b"safe", ServiceLevel.SAFE)
    cluster.advance(0.01)
    cluster.submit(0, b"agreed after", ServiceLevel.AGREED)
    cluster.advance(0.5)
    assert delivered(cluster, 0) == []  # node 2's acks never arrived: not stable
    cluster.advance(3.0)
    for i in range(3):
        assert delivered(cluster, i) == [b"safe", b"agreed after"]
        assert [d.position for d in cluster.logs[i]] == [0, 1]
    assert cluster.logs[0][0].time >= 1.0


@pytest.mark.parametrize(
    ("size", "budget"), [(16 * 1024 * 1024, 65_000), (100_000, 1472), (1400, 1472)]
)
def test_large_messages_are_fragmented_and_reassembled(size: int, budget: int) -> None:
    cfg = NodeConfig(group_key=KEY, datagram_budget=budget, window_size=10_000,
                     window_bytes=1 << 30)
    cluster = Cluster(3, seed=4, node_config=cfg)
    big = random.Random(size).randbytes(size)
    cluster.submit(1, big, ServiceLevel.AGREED)
    cluster.submit(1, b"small", ServiceLevel.AGREED)
    cluster.advance(5.0)
    for i in range(3):
        assert delivered(cluster, i) == [big, b"small"]
    assert cluster.nodes[1].stats.vertices_sent >= size // budget


def test_every_datagram_fits_the_budget_and_batches_share_a_vertex() -> None:
    cfg = NodeConfig(group_key=KEY)
    nd = Node(cfg, node_id=0, members=list(range(64)), rng=random.Random(0), now=0.0,
              initial_view=ViewRecord.agreed(list(range(64))))
    for k in range(200):
        nd.submit(b"%04d" % k + b"." * 60, 0.0)
    out = nd.datagrams_to_send()
    assert all(len(d) <= cfg.datagram_budget for d in out)
    assert 200 / len(out) >= 15  # ~20 messages of 64 bytes per 1472-byte datagram
    events = [e for e in nd.events() if isinstance(e, BatchDelivered)]
    assert not events  # agreed: nothing is delivered before the others vote


def test_a_causal_message_waits_for_the_agreed_message_in_its_causal_past() -> None:
    """Node 0 sends agreed A, then causal C (C follows A). At node 1, A cannot be ordered
    before the other members vote, while C is causally released at once: C must wait."""
    hb = CausalHoldback([0, 1, 2])
    hb.ordered_released(0, 1)
    c = Vertex(0, 2, (), ServiceLevel.CAUSAL, 0.0, (b"c",))
    assert hb.offer(c, {0: 2, 1: 0, 2: 0}) is False
    unrelated = Vertex(1, 1, (), ServiceLevel.CAUSAL, 0.0, (b"u",))
    assert hb.offer(unrelated, {0: 0, 1: 1, 2: 0}) is True  # concurrent with A: may go
    follower = Vertex(2, 1, ((0, 2),), ServiceLevel.CAUSAL, 0.0, (b"f",))
    assert hb.offer(follower, {0: 2, 1: 0, 2: 1}) is False  # follows C, hence A
    assert hb.ready() == []
    hb.ordered_delivered(0, 1)
    assert [v.items for v in hb.ready()] == [(b"c",), (b"f",)]
    assert hb.held_count == 0


def test_a_budget_too_small_for_a_full_ack_vector_is_refused_at_start_and_on_reload() -> None:
    # 128 members: an ack vector of 127 entries does not fit a 1472-byte datagram; this
    # used to raise ValueError("no room for a fragment") on the first large ack vector
    def node(n: int, budget: int = 1472) -> Node:
        return Node(NodeConfig(group_key=KEY, datagram_budget=budget), node_id=0,
                    members=list(range(n)), rng=random.Random(0), now=0.0)

    with pytest.raises(ConfigurationError, match="cannot carry the acknowledgements of 128"):
        node(128)
    big = node(128, budget=4000)
    assert big.members == tuple(range(128))
    small = node(8)
    with pytest.raises(ConfigurationError, match="datagram_budget 1472"):
        small.reconfigure(list(range(128)), 0.0)
    assert small.members == tuple(range(8))  # the old list stays
