"""The swap orderings inside the Node (``protocol.ordering`` arrow, combining, hybrid):
simulated clusters of real Nodes with every checker of ``simulation.checkers``, the
membership sweep per mode, the refusal of a member configured otherwise, and the
pieces (the view-close skip, the swap links, the SWAP datagram codec)."""

from __future__ import annotations

import os
import random

import msgpack
import pytest
from amcast.protocols.errors import DecodeError
from amcast.protocols.events import JoinRefused, SwapGap
from amcast.protocols.node_config import NodeConfig
from amcast.protocols.ordering.messages import CausalMessage
from amcast.protocols.reliable.layer import ReliableCounters
from amcast.protocols.session import ViewSession
from amcast.protocols.simulation.cluster import Cluster, Workload
from amcast.protocols.simulation.membership_sweep import (
    membership_point,
    run_membership_sweep,
    seed_outcome,
)
from amcast.protocols.simulation.network import LinkFaults, NetworkConfig
from amcast.protocols.swap.engine import SwapOrdering, settings_text
from amcast.protocols.swap.link import SwapLinks
from amcast.protocols.swap.messages import Ordered
from amcast.protocols.vocabulary import ServiceLevel
from amcast.protocols.wire.auth import Authenticator
from amcast.protocols.wire.codec import SwapDatagram, Vertex, decode_body, encode
from amcast.protocols.wire.limits import WireLimits

KEY = b"simulation-group-key"
MODES = ("arrow", "combining", "hybrid")


def lossy_cluster(n: int, seed: int, **config: object) -> Cluster:
    cfg = NodeConfig(group_key=KEY, **config)  # type: ignore[arg-type]
    net = NetworkConfig(default=LinkFaults(loss=0.1, duplicate=0.05, reorder=0.1))
    return Cluster(n, seed=seed, node_config=cfg, network=net)


def violations(result: object) -> dict[str, list[str]]:
    return {k: v[:3] for k, v in result.violations.items() if v}  # type: ignore[attr-defined]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", ["balanced", "path"])
def test_every_member_delivers_one_order_over_a_lossy_network(mode: str, shape: str) -> None:
    c = lossy_cluster(5, seed=3, ordering=mode, swap_tree=shape)
    r = c.run(Workload(messages_per_node=30), max_time=20.0, settle=1.0)
    assert not violations(r)
    assert all(len(log) == len(r.sent) == 150 for log in r.logs.values())
    swaps = sum(nd.stats.datagrams_sent["swap"] for nd in r.nodes.values())
    assert swaps > 0  # the requests went over the tree (five senders)
    assert all(nd.membership.session.swap is not None for nd in r.nodes.values())


def test_a_lone_arrow_sender_at_the_sink_sends_no_swap_datagram() -> None:
    c = lossy_cluster(4, seed=5, ordering="arrow")
    r = c.run(Workload(messages_per_node=40, senders=1), max_time=20.0, settle=1.0)
    assert not violations(r)
    assert sum(nd.stats.datagrams_sent["swap"] for nd in r.nodes.values()) == 0
    swap = r.nodes[0].membership.session.swap
    assert swap.swaps > 0 and swap.local_swaps == swap.swaps


def test_combining_sends_every_request_through_the_root() -> None:
    c = lossy_cluster(4, seed=5, ordering="combining", swap_tree="star")
    r = c.run(Workload(messages_per_node=20, senders=2), max_time=20.0, settle=1.0)
    assert not violations(r)
    # node 1 is a leaf of the star around node 0: each of its swaps costs a request and
    # a reply; node 0, the root, resolves its own at once
    root, leaf = (r.nodes[i].membership.session.swap for i in (0, 1))
    assert root.local_swaps == root.swaps and leaf.local_swaps == 0 and leaf.swaps > 0


@pytest.mark.parametrize("mode", MODES)
def test_a_member_configured_with_another_ordering_is_refused(mode: str) -> None:
    odd = NodeConfig(group_key=KEY, ordering=mode)
    c = Cluster(4, seed=29, node_config=NodeConfig(group_key=KEY), bootstrap="join",
                network=NetworkConfig(default=LinkFaults(loss=0.02)), node_configs={3: odd})
    c.run(Workload(messages_per_node=10, senders=3), max_time=5)
    refused = [e for e in c.other_events[3] if isinstance(e, JoinRefused) and e.local]
    assert refused and refused[0].reason == "config_mismatch"
    text = settings_text("gltoto", mode, "balanced", 2, 3)
    assert f"ordering: 'gltoto' (coordinator), '{text}' (refused daemon)" in refused[0].detail
    assert c.nodes[3].view is None


def test_the_tree_settings_are_part_of_the_agreement() -> None:
    assert settings_text("lex", "toto", "star", 5, 1) == "lex"
    assert settings_text("lex", "arrow", "star", 5, 1) == "arrow:star/5"
    assert settings_text("lex", "hybrid", "balanced", 2, 3) == "hybrid:balanced/2/3"
    odd = NodeConfig(group_key=KEY, ordering="arrow", swap_fanout=3)
    c = Cluster(3, seed=7, node_config=NodeConfig(group_key=KEY, ordering="arrow"),
                bootstrap="join", node_configs={2: odd})
    c.run(Workload(messages_per_node=5, senders=2), max_time=4)
    refused = [e for e in c.other_events[2] if isinstance(e, JoinRefused) and e.local]
    assert refused and "'arrow:balanced/2' (coordinator), 'arrow:balanced/3'" in refused[0].detail


@pytest.mark.parametrize("mode", MODES)
def test_membership_sweep_a_few_seeds(mode: str) -> None:
    report = run_membership_sweep(range(6), n_range=(3, 6), messages_per_node=15,
                                  ordering=mode)
    assert report["ok"], report["notes"][:6]
    assert report["figures"]["distinct views"] > 6
    assert mode in report["title"]


def test_a_crashed_sender_leaves_the_same_hole_at_every_survivor() -> None:
    # membership_point(3, n_range=(3, 5)): 5 nodes; node 3 crashes at t = 0.5 s after
    # swaps of its own became others' predecessors without their vertices going out
    point = membership_point(3, n_range=(3, 5))
    assert point.n == 5 and point.plan[0].kind == "crash" and point.plan[0].nodes == (3,)
    cfg = NodeConfig(group_key=KEY, ordering="arrow")
    net = NetworkConfig(default=LinkFaults(loss=point.loss, duplicate=0.05, reorder=0.1))
    c = Cluster(point.n, seed=3, node_config=cfg, network=net, bootstrap="join")
    for fault in point.plan:
        c.schedule(fault)
    end = max(f.at + f.duration for f in point.plan)
    r = c.run(Workload(messages_per_node=15, interval=0.05), max_time=end + 30.0, settle=1.0)
    assert not violations(r)  # total order, agreement, causal order... with the hole
    gaps = {n: [e for e in evs if isinstance(e, SwapGap)] for n, evs in c.other_events.items()}
    holes = {tuple(g) for n, g in gaps.items() if n != 3}
    assert len(holes) == 1 and next(iter(holes))  # one hole, the same at every survivor


def test_without_the_swap_start_gates_causal_order_breaks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The planted violation of the hold-back gate (``SwapOrdering.header``'s
    ``unheld``; the arrow sends swaps in a row, so no FIFO wait is left to drop): a swap
    started while a causal vertex waits for its ordered past can be ordered before that
    past; the membership sweep's seed 13 (arrow) then delivers messages before their
    causes."""
    assert not seed_outcome(13, n_range=(3, 8), messages_per_node=36,
                            ordering="arrow").violations
    gated = SwapOrdering.header

    def ungated(self: SwapOrdering, now: float, queued: int,
                unheld: bool) -> tuple[int, Ordered] | None:
        return gated(self, now, queued, True)

    monkeypatch.setattr(SwapOrdering, "header", ungated)
    broken = seed_outcome(13, n_range=(3, 8), messages_per_node=36, ordering="arrow")
    assert any(": causal_order: " in v for v in broken.violations), broken.violations


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_membership_sweep_30_seeds_per_mode(mode: str) -> None:
    jobs = min(2, os.cpu_count() or 1)
    report = run_membership_sweep(range(100, 130), n_range=(3, 6), messages_per_node=25,
                                  ordering=mode, jobs=jobs)
    assert report["ok"], report["notes"][:6]


# ---------------------------------------------------------------- the pieces


def ordering(node: int = 0) -> SwapOrdering:
    return SwapOrdering(1, (0, 1, 2), node, ordering="arrow", shape="balanced", fanout=2,
                        root_group=1, window=0.0, rto=0.05, drop=lambda r, d: None)


def vertex(origin: int, seq: int, k: int, pred: tuple[int, int] | None) -> Vertex:
    swap = ordering(origin)
    swap._ready = (k, Ordered(pred, (origin, k)))
    items = swap.frame((f"m{origin}.{k}".encode(),))
    return Vertex(origin, seq, (), ServiceLevel.AGREED, 0.0, items)


def test_close_skips_to_the_lowest_head_after_a_gap_the_same_everywhere() -> None:
    # (1, 1) was swapped in but its vertex never went out: (2, 1) follows it, and (0, 2)
    # follows (2, 1); (0, 1) is the first. Two members receive in different orders.
    vs = [vertex(0, 1, 1, None), vertex(2, 1, 1, (1, 1)), vertex(0, 2, 2, (2, 1))]
    orders = []
    for arrival in (vs, vs[::-1]):
        swap = ordering()
        out = []
        for v in arrival:
            out += swap.insert(CausalMessage(v.origin, v.seq, (), v))
        out += swap.close()
        orders.append([(d.sender, d.seq) for d in out])
        assert swap.gap_before == {(2, 1)}  # the first message after the hole
        assert swap.pending == 0
    assert orders[0] == orders[1] == [(0, 1), (2, 1), (0, 2)]


def test_a_view_close_gap_is_reported_to_the_application() -> None:
    s = ViewSession(1, (0, 1, 2), node_id=0, config=NodeConfig(group_key=KEY, ordering="arrow"),
                    rng=random.Random(1), now=0.0, drop=lambda r, d="": None,
                    counters=ReliableCounters())
    v = vertex(2, 1, 1, (1, 1))
    s._holdback.ordered_released(2, 1)
    for d in s.engine.insert(CausalMessage(2, 1, (), v)):
        raise AssertionError(d)
    for d in s.engine.close():
        s._ordered.append((d.payload, d, None))
    s._deliver_ready(flush=True)
    assert [type(e).__name__ for e in s.events] == ["SwapGap", "BatchDelivered"]
    assert s.events[0] == SwapGap(1, 0)


def test_swap_links_deliver_in_order_once_and_resend_until_acknowledged() -> None:
    a = SwapLinks(0, 1, rto=0.05, drop=lambda r, d: None)
    b = SwapLinks(1, 1, rto=0.05, drop=lambda r, d: None)
    for i in range(3):
        a.send(1, (2, i, 0, 0), now=0.0)
    d1, d2, d3 = a.take()
    assert b.receive(d2) == [] and b.receive(d3) == []  # d1 lost: the others wait
    assert b.receive(d1) == [(0, (2, 0, 0, 0)), (0, (2, 1, 0, 0)), (0, (2, 2, 0, 0))]
    assert b.receive(d2) == []  # a duplicate is acknowledged, not handed on
    (ack,) = b.take()
    assert ack.seq == 0 and ack.ack == 3
    assert a.next_deadline() == pytest.approx(0.05)
    a.tick(0.05)
    assert [d.seq for d in a.take()] == [1, 2, 3]  # no ack yet: all resent
    a.receive(ack)
    assert a.next_deadline() is None


def test_swap_datagrams_round_trip_and_malformed_ones_are_refused() -> None:
    auth = Authenticator(None, b"0" * 16)
    limits = WireLimits()
    for dg in (SwapDatagram(3, 7, 1, 5, 2, (1, 3, 3, 9, 0, 0, 2)), SwapDatagram(3, 7, 1, 0, 4, ())):
        assert decode_body(auth.open(encode(dg, auth, 0), 0), limits) == dg
    for bad in ([6, 3, 7, 1, [1], [0]], [6, 3, 7, 1, [0, 0], [1]], [6, 3, 7, 1, [1, 0], []],
                [6, 3, 7, 1, [1, 0], list(range(9))], [6, 3, 7, 1, [1, 0], [-1]]):
        with pytest.raises(DecodeError):
            decode_body(msgpack.packb(bad), limits)
