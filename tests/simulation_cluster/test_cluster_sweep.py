"""Full Nodes over the lossy simulated network: every safety property on many seeds.

The CI sweep: 200 seeds spanning n = 3..8, loss 0..20%, 20% duplication, 20% reordering,
every fifth seed with a slow node (10x delays) and every seventh with an asymmetric bad
link; then shorter sweeps for the other safe ordering rules.
"""

from __future__ import annotations

import random

import pytest
from amcast.protocols.node_config import NodeConfig
from amcast.protocols.simulation.checkers import Delivery, SentMessage, check_all
from amcast.protocols.simulation.cluster import Cluster, run_cluster_simulation, sweep_points
from amcast.protocols.simulation.network import LinkFaults, NetworkConfig
from amcast.protocols.vocabulary import ServiceLevel
from amcast.protocols.wire.codec import Kind


def test_sweep_points_span_the_required_space() -> None:
    points = sweep_points(range(200))
    assert {p.n for p in points} == set(range(3, 9))
    assert min(p.loss for p in points) == 0 and max(p.loss for p in points) == pytest.approx(0.2)
    assert all(p.duplicate == 0.2 and p.reorder == 0.2 for p in points)
    assert sum(p.slow_node for p in points) == 40 and sum(p.asymmetric for p in points) >= 28


@pytest.mark.slow
def test_ci_sweep_200_seeds_all_properties_hold() -> None:
    report = run_cluster_simulation(range(200), messages_per_node=12)
    assert report["ok"], report["notes"]
    assert report["figures"]["copies lost"] > 1000 and report["figures"]["retransmissions"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("rule", ["lex", "stoto", "gtoto"])
def test_other_rules_hold_on_a_shorter_sweep(rule: str) -> None:
    report = run_cluster_simulation(range(1000, 1040), messages_per_node=10, rule=rule)
    assert report["ok"], report["notes"]


def test_saturating_senders_with_small_windows_stay_bounded_and_correct() -> None:
    from amcast.protocols.simulation.cluster import Workload

    cfg = NodeConfig(group_key=b"simulation-group-key", window_size=8, receive_window=16,
                     max_held_vertices=24)
    net = NetworkConfig(default=LinkFaults(loss=0.1, duplicate=0.2, reorder=0.2))
    cluster = Cluster(5, seed=11, node_config=cfg, network=net)
    result = cluster.run(Workload(messages_per_node=60, interval=0.0), max_time=60)
    assert result.ok, {k: v for k, v in result.violations.items() if v}
    for nd in result.nodes.values():
        assert nd.stats.backpressure_events > 0
        assert nd.stats.retransmit_buffer <= 5 * (8 + 2)


def test_one_loss_seen_by_many_causes_few_nacks_and_few_repairs() -> None:
    """Suppression: data lost at 6 of 7 receivers in a group of 8, averaged over seeds."""
    nacks = repairs = 0
    seeds = range(20)
    for seed in seeds:
        cluster = Cluster(8, seed=seed)
        lost: list[int] = []

        def lose(src: int, dst: int, data: bytes, c: Cluster = cluster, lost: list = lost) -> bool:
            dg = c.nodes[src].peek(data)
            if dg.kind is Kind.DATA and dst != 7:
                lost.append(dst)
                return False
            return True

        cluster.link_filter = lose
        cluster.submit(0, b"m", ServiceLevel.AGREED)
        cluster.advance(2.0)
        assert all(len(cluster.logs[i]) == 1 for i in range(8))
        nacks += sum(nd.stats.datagrams_sent["nack"] for nd in cluster.nodes.values())
        repairs += sum(nd.stats.retransmissions for nd in cluster.nodes.values())
    assert nacks / len(seeds) <= 3.0  # of 6 receivers that noticed the gap at once
    assert repairs / len(seeds) <= 2.0  # of 2 holders (origin and node 7)


def _fake(n_nodes: int = 2) -> tuple[list[SentMessage], dict[int, list[Delivery]]]:
    a = SentMessage(0, 0, b"a", ServiceLevel.AGREED, 0)
    b = SentMessage(1, 1, b"b", ServiceLevel.AGREED, 0b1)  # b was sent after a was delivered
    c = SentMessage(2, 1, b"c", ServiceLevel.CAUSAL, 0b11)
    logs = {
        i: [Delivery(0, b"a", ServiceLevel.AGREED, 0, 0.0),
            Delivery(1, b"b", ServiceLevel.AGREED, 1, 0.0),
            Delivery(1, b"c", ServiceLevel.CAUSAL, None, 0.0)]
        for i in range(n_nodes)
    }
    return [a, b, c], logs


def test_checkers_pass_a_correct_run_and_catch_each_violation() -> None:
    sent, logs = _fake()
    assert not any(check_all(sent, logs).values())

    def violated(mutate) -> set[str]:  # type: ignore[no-untyped-def]
        s, lg = _fake()
        mutate(s, lg)
        return {k for k, v in check_all(s, lg).items() if v}

    def swap(s, lg):  # type: ignore[no-untyped-def]
        lg[1][0], lg[1][1] = (
            Delivery(1, b"b", ServiceLevel.AGREED, 0, 0.0),
            Delivery(0, b"a", ServiceLevel.AGREED, 1, 0.0),
        )

    assert violated(swap) == {"total_order", "causal_order"}
    assert violated(lambda s, lg: lg[0].append(lg[0][2])) == {"integrity"}
    assert violated(lambda s, lg: lg[0].pop()) == {"agreement", "validity"}
    tampered = Delivery(1, b"B", ServiceLevel.CAUSAL, None, 0.0)
    assert "integrity" in violated(lambda s, lg: lg[0].__setitem__(2, tampered))
    # a causal message never overtakes an agreed message in its causal past...
    assert violated(lambda s, lg: lg[1].insert(0, lg[1].pop())) == {"causal_order"}
    # ...nor a causal one
    c1 = SentMessage(0, 0, b"c1", ServiceLevel.CAUSAL, 0)
    c2 = SentMessage(1, 1, b"c2", ServiceLevel.CAUSAL, 0b1)
    d1, d2 = (Delivery(m.sender, m.payload, m.service, None, 0.0) for m in (c1, c2))
    found = check_all([c1, c2], {0: [d1, d2], 1: [d2, d1]})
    assert {k for k, v in found.items() if v} == {"causal_order"}


def test_random_runs_are_deterministic_per_seed() -> None:
    from amcast.protocols.simulation.cluster import SweepPoint, Workload, run_point

    point = SweepPoint(seed=77, n=5, loss=0.1, duplicate=0.2, reorder=0.2, slow_node=True)
    a = run_point(point, Workload(messages_per_node=8))
    b = run_point(point, Workload(messages_per_node=8))
    assert a.ok and [d.payload for d in a.logs[2]] == [d.payload for d in b.logs[2]]
    assert a.end_time == b.end_time
    assert random.Random(1).random() == random.Random(1).random()
