"""A repeated heartbeat is only a sign of life (``repeats``, ``MembershipLayer.renew``).

An idle member repeats the same heartbeat every ``heartbeat_interval``; the Node reuses
the decoded object for a byte-identical body and the membership layer, when the view's
session already applied it and nothing else could come of it, only notes the sender's
liveness (and the daemon then skips its pump). The shortcut must be invisible: the
same seeds of the membership sweep (crashes, restarts, pauses, joins, leaves,
partitions, 0-20% loss) run with it and without it give the very same deliveries,
views and drops, and it must actually fire."""

from __future__ import annotations

import random

import pytest
from amcast.protocols.events import JoinRefused
from amcast.protocols.node import Node
from amcast.protocols.node_config import NodeConfig
from amcast.protocols.session import ViewSession
from amcast.protocols.simulation.cluster import Cluster, RunResult
from amcast.protocols.simulation.faults import Fault
from amcast.protocols.simulation.membership_sweep import membership_point, run_membership_point
from amcast.protocols.wire.auth import Authenticator
from amcast.protocols.wire.codec import Datagram, Kind, encode
from amcast.protocols.wire.keys import Keyring
from amcast.protocols.wire.membership import ViewRecord

KEY = b"simulation-group-key"
SEEDS = range(600, 616)


def _outcome(result: RunResult) -> tuple[object, ...]:
    """Everything a client or an operator could observe of a run."""
    return (result.logs, result.views, result.drops, result.violations, result.end_time,
            [(dict(nd.stats.datagrams_sent), dict(nd.stats.datagrams_received))
             for nd in result.all_nodes])


def _skipped(result: RunResult) -> int:
    return sum(node.membership.repeats_skipped for node in result.all_nodes)


@pytest.mark.parametrize("seed", SEEDS)
def test_the_shortcut_changes_nothing_under_faults(seed: int,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    point = membership_point(seed, n_range=(3, 7))
    with_it = run_membership_point(point, messages_per_node=15)
    skipped = _skipped(with_it)
    monkeypatch.setattr(ViewSession, "repeat_is_noop", lambda self, sender: False)
    without = run_membership_point(point, messages_per_node=15)
    assert _skipped(without) == 0
    assert skipped > 0
    assert _outcome(with_it) == _outcome(without)
    assert with_it.ok


def _node(n: int = 3) -> Node:
    cfg = NodeConfig(group_key=KEY)
    nd = Node(cfg, node_id=0, members=list(range(n)), rng=random.Random(1), now=0.0,
              initial_view=ViewRecord.agreed(list(range(n))))
    nd.wall_offset = 100.0
    return nd


def _beat(peer: Authenticator, hb_seq: int, now: float) -> bytes:
    """A heartbeat of node 1 in view 1, sealed afresh (a new counter) each time."""
    dg = Datagram(Kind.HEARTBEAT, 1, 1, hb_seq, (), (), ((0, 0), (1, hb_seq), (2, 0)))
    return encode(dg, peer, int((now + 100.0) * 1000))


def test_an_idle_peers_repeated_heartbeat_only_renews_its_liveness() -> None:
    nd = _node()
    peer = Authenticator(Keyring.single(KEY), bytes(16))
    assert nd.receive_datagram(_beat(peer, 0, 0.10), 0.10) is False  # applied in full
    nd.datagrams_to_send()
    nd.events()
    timer = nd.next_timer()
    for i in range(2, 6):
        now = i / 10
        assert nd.receive_datagram(_beat(peer, 0, now), now) is True
        assert nd.membership.detector.last_heard[1] == now
        assert not nd.events() and not nd.datagrams_to_send() and nd.next_timer() == timer
    assert nd.membership.repeats_skipped == 4
    assert nd.stats.datagrams_received["heartbeat"] == 5
    # the same heartbeat once more, replayed byte for byte: refused as before
    data = _beat(peer, 0, 0.6)
    assert nd.receive_datagram(data, 0.6) is True
    assert nd.receive_datagram(data, 0.6) is False
    assert nd.stats.drops == {"replayed": 1}


def test_a_repeated_heartbeat_that_reveals_a_gap_keeps_asking_for_it() -> None:
    """Node 1 says it sent 2 vertices that never arrived: every repeat of that heartbeat
    goes the full way (the reliable layer's nack bookkeeping sees each one)."""
    nd = _node()
    peer = Authenticator(Keyring.single(KEY), bytes(16))
    for i in range(1, 6):
        now = i / 10
        assert nd.receive_datagram(_beat(peer, 2, now), now) is False
        nd.handle_timer(now) if (nd.next_timer() or now) <= now else None
        nd.datagrams_to_send()
        nd.events()
    assert nd.membership.repeats_skipped == 0
    assert nd.stats.datagrams_sent["nack"] >= 1


def test_only_a_heartbeat_the_current_session_applied_is_skipped(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every skip is of a heartbeat (the very object) that the member's current view's
    session applied before; across a view change (a crash) the new session starts with
    none, and skipping resumes once it applied each member's heartbeat."""
    applied: set[tuple[int, int]] = set()
    receive = ViewSession.receive

    def recording_receive(self: ViewSession, dg: Datagram, now: float) -> bool:
        applied.add((id(self), id(dg)))
        return receive(self, dg, now)

    to_membership = Node._to_membership
    skips: list[tuple[int, int]] = []

    def checked(self: Node, dg: Datagram, repeat: bool, now: float) -> bool:
        ok = to_membership(self, dg, repeat, now)
        if ok:
            session = self.membership.session
            assert session is not None and (id(session), id(dg)) in applied
            skips.append((self.node_id, session.view_id))
        return ok

    monkeypatch.setattr(ViewSession, "receive", recording_receive)
    monkeypatch.setattr(Node, "_to_membership", checked)
    cluster = Cluster(4, seed=9)
    cluster.advance(2.0)
    first_view = cluster.nodes[0].membership.session.view_id
    cluster.apply(Fault(cluster.now, "crash", (3,)))
    cluster.advance(cluster.now + 3.0)
    later = cluster.nodes[0].membership.session
    assert later.view_id > first_view and later.members == (0, 1, 2)
    assert {view for _, view in skips} == {first_view, later.view_id}
    assert {node for node, view in skips if view == later.view_id} == {0, 1, 2}


def test_an_idle_incumbent_still_exposes_a_second_daemon_with_its_id() -> None:
    """While the cluster idles, the incumbent's repeated heartbeats are the only sign of
    it; one that arrives while a second incarnation of the same id asks to join goes
    the full way, so the duplicate is refused as with traffic."""
    c = Cluster(3, seed=31, bootstrap="join", impostors={100: 1}, wall_clock=1000.0)
    c.advance(1.0)
    assert all(c.nodes[i].membership.repeats_skipped > 0 for i in range(3))
    c.apply(Fault(c.now, "start", (100,)))
    c.advance(c.now + 2.0)
    refused = [e for i in range(3) for e in c.other_events[i]
               if isinstance(e, JoinRefused) and e.reason == "duplicate_node_id"]
    assert refused and c.nodes[100].view is None
    assert all(c.nodes[i].membership.view.nodes == (0, 1, 2) for i in range(3))


def test_an_empty_body_is_not_taken_for_a_heartbeat_the_caller_decoded() -> None:
    """The simulator hands over a heartbeat already decoded (``decoded=``, with its
    body). An authentic datagram with an empty body, handed over raw afterwards, is
    malformed, as it is for a daemon: it used to match a missing body (kept as ``b""``)
    and pass as that heartbeat (found by the ``sealed`` fuzz target,
    ``fuzz/regressions/sealed/empty-body-after-decoded-heartbeat``)."""
    nd = _node()
    peer = Authenticator(Keyring.single(KEY), bytes(16))
    beat = _beat(peer, 0, 0.1)
    nd.receive_datagram(beat, 0.1, decoded=nd.unseal(beat))
    assert nd.stats.datagrams_received["heartbeat"] == 1
    empty = peer.seal(b"", int((0.2 + 100.0) * 1000))
    assert nd.receive_datagram(empty, 0.2) is False
    assert nd.stats.drops == {"malformed": 1}
    assert nd.stats.datagrams_received["heartbeat"] == 1
