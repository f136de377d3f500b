"""Peers' clock offsets from their send times (``amcast.protocols.wire.clock``), through
a Node's real receive path: authenticated and decoded here, not by the simulator."""

from __future__ import annotations

import random

from amcast.protocols.events import DatagramDropped, PeerClockRefused
from amcast.protocols.node import Node
from amcast.protocols.node_config import NodeConfig
from amcast.protocols.wire.auth import Authenticator
from amcast.protocols.wire.clock import HORIZON_MS, PROBE_INTERVAL_MS
from amcast.protocols.wire.codec import Datagram, Kind, encode
from amcast.protocols.wire.keys import Keyring
from amcast.protocols.wire.membership import ViewRecord
from amcast.protocols.wire.replay import OFFSET_PERIOD_MS, ReplayGuard

KEY = b"simulation-group-key"
WALL = 100.0  # the node's wall clock minus its clock ``now``


def node(n: int = 4) -> Node:
    nd = Node(NodeConfig(group_key=KEY), node_id=0, members=list(range(n)),
              rng=random.Random(1), now=0.0, initial_view=ViewRecord.agreed(list(range(n))))
    nd.wall_offset = WALL
    return nd


def beat(sender: int, auth: Authenticator, sent_s: float) -> bytes:
    return encode(Datagram(Kind.HEARTBEAT, sender, 1, 0), auth, int(sent_s * 1000))


def refused_events(nd: Node) -> list[tuple[int, float, float]]:
    return [(e.peer, e.offset_s, e.window_s) for e in nd.events()
            if isinstance(e, PeerClockRefused)]


def test_an_authentic_refused_datagram_names_its_sender_and_a_forged_one_nothing() -> None:
    nd = node()
    peer = Authenticator(Keyring.single(KEY), b"1" * 16)
    forger = Authenticator(Keyring.single(b"not the group key"), b"f" * 16)
    now = 1.0
    nd.receive_datagram(beat(1, forger, WALL + now + 45), now)  # fails the tag
    now += 0.1
    nd.receive_datagram(beat(9, peer, WALL + now + 45), now)  # authentic, not listed
    assert refused_events(nd) == [] and nd.clock_offsets() == {}
    now += 0.1
    nd.receive_datagram(beat(1, peer, WALL + now + 45.0), now)
    assert refused_events(nd) == [(1, 45.0, 30.0)]
    clock = nd.clock_offsets()[1]
    assert clock.refused and clock.offset_s == 45.0
    assert nd.peers()[1]["clock_refused"] is True and nd.peers()[1]["clock_offset_s"] == 45.0
    assert nd.stats.drops == {"future": 3}

    # it goes on: counted each time, raised once
    for _ in range(5):
        now += 0.1
        nd.receive_datagram(beat(1, peer, WALL + now + 45.0), now)
    assert refused_events(nd) == [] and nd.stats.drops["future"] == 8

    # its clock is set right: the first admitted datagram ends the refusal
    now += 0.1
    nd.receive_datagram(beat(1, peer, WALL + now - 0.002), now)
    assert nd.clock_offsets()[1].refused is False
    assert nd.clock_offsets()[1].offset_s == -0.002


def test_at_most_one_refused_datagram_per_probe_interval_is_authenticated() -> None:
    nd = node()
    one = Authenticator(Keyring.single(KEY), b"1" * 16)
    two = Authenticator(Keyring.single(KEY), b"2" * 16)
    now = 1.0
    nd.receive_datagram(beat(1, one, WALL + now - 40), now)
    nd.receive_datagram(beat(2, two, WALL + now - 40), now + PROBE_INTERVAL_MS / 2000)
    assert [peer for peer, _, _ in refused_events(nd)] == [1]
    nd.receive_datagram(beat(2, two, WALL + now - 40), now + PROBE_INTERVAL_MS / 1000)
    assert [peer for peer, _, _ in refused_events(nd)] == [2]
    assert nd.stats.drops == {"stale": 3}
    late = PROBE_INTERVAL_MS / 1000  # the probed copy of node 2 was read this much later
    assert {p: c.offset_s for p, c in nd.clock_offsets().items()} == {1: -40.0, 2: -40 - late}


def test_a_refusal_is_forgotten_after_the_horizon() -> None:
    nd = node()
    peer = Authenticator(Keyring.single(KEY), b"1" * 16)
    nd.receive_datagram(beat(1, peer, WALL + 1.0 + 60), 1.0)
    assert 1 in nd.clock_offsets()
    nd.handle_timer(1.0 + HORIZON_MS / 1000 + 0.5)
    assert nd.clock_offsets() == {}


def test_the_offset_is_the_least_delayed_datagram_of_the_last_period_or_two() -> None:
    guard = ReplayGuard(30.0, 16)
    session = b"s" * 16
    wall = 1_000_000
    for counter, delay in enumerate((3, 1, 2)):  # a peer 500 ms ahead, delays in ms
        state = guard.admit(session, counter, wall + 500, wall + delay, 1, 1)
        wall += 10
    assert state.clock_offset_ms() == 499
    # the next period's samples are worse: the last period's best still counts
    wall += OFFSET_PERIOD_MS + 100
    state = guard.admit(session, 3, wall + 500, wall + 9, 1, 1)
    assert state.clock_offset_ms() == 499
    # a period on, the better of that period's and this one's
    wall += OFFSET_PERIOD_MS + 100
    state = guard.admit(session, 4, wall + 500, wall + 7, 1, 1)
    assert state.clock_offset_ms() == 493
    # a session silent for longer: the new sample alone, not a stale period's best
    wall += 5 * OFFSET_PERIOD_MS
    state = guard.admit(session, 5, wall - 2000, wall + 4, 1, 1)
    assert state.clock_offset_ms() == -2004


def test_an_insecure_node_has_no_offsets() -> None:
    nd = Node(NodeConfig(insecure=True), node_id=0, members=[0, 1], rng=random.Random(1),
              now=0.0, initial_view=ViewRecord.agreed([0, 1]))
    nd.receive_datagram(encode(Datagram(Kind.HEARTBEAT, 1, 1, 0), Authenticator(None, b"i" * 16),
                               0), 1.0)
    assert not [e for e in nd.events() if isinstance(e, DatagramDropped)]
    assert nd.clock_offsets() == {} and nd.peers()[1]["clock_offset_s"] is None
