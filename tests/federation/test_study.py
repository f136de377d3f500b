"""The multi-group study in a tiny version: the federation's local messages stay in their
cluster, its per-node work is below broadcast-and-filter's, its global messages take
their hops and orderings, every run passes every checker, and the study reports a
message that an addressee never delivered."""

from __future__ import annotations

import json

import pytest
from amcast.protocols.federation.study import (
    BROADCAST,
    FEDERATION,
    Row,
    StudyConfig,
    _row,
    _Run,
    as_json,
    schedule,
    study,
    table,
)

TINY = StudyConfig(ks=(1, 4), shares=(0, 50), rate=10.0, load_s=0.5, drain_s=0.5, seed=3)


@pytest.fixture(scope="module")
def rows() -> dict[tuple[str, int, int], Row]:
    return {(r.system, r.clusters, r.global_pct): r for r in study(TINY)}


def test_every_run_passes_every_checker(rows: dict[tuple[str, int, int], Row]) -> None:
    assert sorted(rows) == sorted((s, k, g) for s in (FEDERATION, BROADCAST)
                                  for k, g in ((1, 0), (4, 0), (4, 50)))
    for key, row in rows.items():
        assert row.violations == [], key
        assert row.work.messages > 0


def test_local_messages_send_no_datagram_between_clusters(
        rows: dict[tuple[str, int, int], Row]) -> None:
    assert rows[(FEDERATION, 4, 0)].work.cross_cluster_datagrams == 0
    assert rows[(FEDERATION, 4, 50)].work.cross_cluster_datagrams > 0


def test_federation_orders_less_per_node_than_broadcast_and_filter(
        rows: dict[tuple[str, int, int], Row]) -> None:
    fed, bf = rows[(FEDERATION, 4, 0)].work, rows[(BROADCAST, 4, 0)].work
    assert fed.ordered_per_node_per_msg == pytest.approx(0.25)  # its own cluster's share
    assert bf.ordered_per_node_per_msg == pytest.approx(1.0)  # everything
    assert fed.datagrams_per_node_per_msg < bf.datagrams_per_node_per_msg
    assert fed.capacity_msgs_s > bf.capacity_msgs_s
    # one cluster: the two systems are the same run
    one = rows[(FEDERATION, 1, 0)]
    assert one.local == rows[(BROADCAST, 1, 0)].local
    assert fed.capacity_msgs_s > 2 * one.work.capacity_msgs_s


def test_global_messages_take_two_hops_and_two_orderings(
        rows: dict[tuple[str, int, int], Row]) -> None:
    fed = rows[(FEDERATION, 4, 50)]
    assert fed.global_.count > 0 and fed.local.count > 0
    assert fed.global_.p50_delays is not None and fed.local.p50_delays is not None
    # two hops and two safe orderings, each at least one message delay
    assert fed.global_.p50_delays >= 4
    assert fed.global_.p50_delays > fed.local.p50_delays
    # broadcast-and-filter orders global and local messages alike
    assert rows[(BROADCAST, 4, 50)].global_.count == fed.global_.count


def test_schedule_is_the_same_load_at_every_share() -> None:
    low, high = schedule(4, 10, TINY), schedule(4, 50, TINY)
    assert [(s.time, s.cluster, s.node) for s in low] == \
        [(s.time, s.cluster, s.node) for s in high]
    low_globals = {i for i, s in enumerate(low) if len(s.dst) > 1}
    high_globals = {i for i, s in enumerate(high) if len(s.dst) > 1}
    assert low_globals < high_globals
    assert all(low[i].dst == high[i].dst for i in low_globals)
    assert all(len(s.dst) == 2 and s.cluster in s.dst for s in high if len(s.dst) > 1)
    assert all(len(s.dst) == 1 for s in schedule(1, 100, TINY))


def test_an_undelivered_message_is_reported() -> None:
    sends = schedule(2, 50, TINY)[:2]
    n = TINY.nodes_per_cluster
    every = {d * n + i: s.time + 0.01 for s in sends for d in s.dst for i in range(n)}
    delivered = {idx: dict(every) for idx in range(len(sends))}
    idle = _Run({}, 0, 0, 0, [])
    ok = _row(FEDERATION, 2, 50, sends, _Run(delivered, 4, 40, 0, []), idle, TINY)
    assert ok.violations == []
    victim = sends[0].dst[0] * n + 1
    del delivered[0][victim]
    bad = _row(FEDERATION, 2, 50, sends, _Run(delivered, 4, 40, 0, []), idle, TINY)
    assert bad.violations == [f"message 0 not delivered at nodes [{victim}]"]


def test_json_and_table(rows: dict[tuple[str, int, int], Row]) -> None:
    data = json.loads(json.dumps(as_json(TINY, list(rows.values()))))
    assert {r["system"] for r in data["rows"]} == {FEDERATION, BROADCAST}
    assert "global" in data["rows"][0] and "global_" not in data["rows"][0]
    assert table(list(rows.values())).count("\n") == len(rows) + 1
