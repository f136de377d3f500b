"""The federation layer in its seeded simulation: every run checked (global acyclicity,
integrity, uniform agreement, termination, participant minimality, joiners,
outcomes, quiescence), the failure-free message delays counted, stalls and their recovery, and
each checker shown to catch what it is for."""

from __future__ import annotations

import json

import pytest
from amcast.protocols.federation import simulation, state
from amcast.protocols.federation.checkers import check_joiners, check_outcomes
from amcast.protocols.federation.node_simulation import (
    node_delays,
    node_sweep,
    random_node_scenario,
    run_node_scenario,
)
from amcast.protocols.federation.simulation import (
    FedScenario,
    Global,
    count_delays,
    random_scenario,
    run_scenario,
    sweep,
)
from amcast.protocols.simulation.network import LinkFaults

from amcast.cli import main


def test_a_hundred_seeds_hold_every_property() -> None:
    result = sweep(range(100))
    assert result["failed"] == [], result["violations"]
    # the faults happened: joiners installed snapshots, datagrams were repaired
    assert result["snapshots installed"] > 20  # type: ignore[operator]
    assert result["retransmissions"] > 1000  # type: ignore[operator]
    assert result["stall reports"] > 0  # type: ignore[operator]
    # the deadline (4 s) fired during unreachable windows: reported, delivered later
    assert result["undelivered reports"] > 0  # type: ignore[operator]


@pytest.mark.slow
def test_a_thousand_seeds_hold_every_property() -> None:
    result = sweep(range(100, 1100))
    assert result["failed"] == [], result["violations"]


def test_failure_free_delivery_takes_two_hops_and_two_safe_orderings() -> None:
    assert count_delays() == {"hops": 2, "safe orderings": 2, "violations": 0}


def test_the_same_seed_runs_the_same() -> None:
    a = run_scenario(random_scenario(5), 5)
    b = run_scenario(random_scenario(5), 5)
    assert a.deliveries == b.deliveries and a.datagrams == b.datagrams


def test_an_unreachable_cluster_stalls_then_delivers() -> None:
    clusters = {"c0": ("c0n0", "c0n1"), "c1": ("c1n0", "c1n1"), "c2": ("c2n0",)}
    globals_ = tuple(Global(0.1 * i, "c0n1", ("c0", "c1") if i % 2 else ("c0", "c2"))
                     for i in range(10))
    sc = FedScenario(clusters, globals_, unreachable=(("c1", 0.0, 6.0),),
                     link=LinkFaults(loss=0.1, delay=0.02), stall_after_s=2.0)
    r = run_scenario(sc, 1)
    assert r.violations == []
    ages = [s.age_s for _, _, s in r.stalls]
    assert ages and min(ages) >= 2.0 and max(ages) >= 4.0
    assert all(s.clusters_waited_for == ("c1",) for _, _, s in r.stalls)
    assert sum(len(v) for v in r.deliveries.values()) == 5 * 4 + 5 * 3


def test_the_sweep_catches_a_broken_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """A cluster that does not raise its clock to gts breaks Skeen's order: the global
    acyclicity oracle sees the cycle."""
    def no_raise(self: state.ClusterState, m: object, p: state.Pending) -> bool:
        if p.final or len(p.ts) < len(p.dst):
            return False
        p.final = True
        return True

    monkeypatch.setattr(state.ClusterState, "_maybe_final", no_raise)
    result = sweep(range(40))
    notes = [v for vs in result["violations"].values() for v in vs]  # type: ignore[attr-defined]
    assert any(v.startswith("acyclicity") for v in notes)


def test_the_sweep_catches_lost_retransmissions(monkeypatch: pytest.MonkeyPatch) -> None:
    """A member that never retransmits leaves messages undelivered under loss:
    termination and quiescence report it."""
    monkeypatch.setattr(simulation.FederationMember, "tick", lambda self, now: [])
    result = sweep(range(5))
    notes = [v for vs in result["violations"].values() for v in vs]  # type: ignore[attr-defined]
    assert result["failed"] and any(v.startswith("termination") for v in notes)


def test_check_joiners_accepts_a_suffix_and_catches_each_violation() -> None:
    ref = [(0, 1), (0, -1), (1, 1), (0, 2), (1, -2), (2, 1)]
    glob = {(0, 1), (1, 1), (0, 2), (2, 1)}
    ok = {0: ref, 5: [(1, -2), (2, 1)], 6: [(0, -1), (0, 2), (2, 1)]}
    assert check_joiners(ok, {5: 0, 6: 0}, glob, {5, 6}) == []
    foreign = {0: ref, 5: [(9, 9)]}
    assert "which member 0 did not" in check_joiners(foreign, {5: 0}, glob, {5})[0]
    swapped = {0: ref, 5: [(2, 1), (0, 2)]}
    assert "another order" in check_joiners(swapped, {5: 0}, glob, {5})[0]
    gap = {0: ref, 5: [(1, 1), (2, 1)]}
    assert "missed (0, 2)" in check_joiners(gap, {5: 0}, glob, {5})[0]
    assert check_joiners(gap, {5: 0}, glob, set()) == []  # crashed again: a prefix is fine


def test_check_outcomes_accepts_delivered_or_reported_and_catches_each_violation(
) -> None:
    dst = {(0, 1): {"a", "b"}, (0, 2): {"a", "b"}, (0, 3): {"b"}}
    delivered = {(0, 1): {"a", "b"}, (0, 3): {"b"}}
    fine = check_outcomes(dst, dst, delivered, {(0, 2): ["unknown"]})
    assert fine == []
    # reported unknown, then delivered: allowed (the outcome was open)
    assert check_outcomes(dst, dst, delivered, {(0, 1): ["unknown"], (0, 2): ["unknown"]}) == []
    lost = check_outcomes(dst, dst, delivered, {})
    assert lost == ["outcomes: (0, 2), submitted at a member that stayed up, neither "
                    "delivered in cluster a nor reported undelivered"]
    part = check_outcomes(dst, dst, {**delivered, (0, 2): {"a"}}, {})
    assert "neither delivered in cluster b" in part[0]
    assert check_outcomes([(0, 1), (0, 3)], dst, delivered, {}) == []  # (0, 2): sender died
    false = check_outcomes(dst, dst, delivered, {(0, 1): ["not_delivered"],
                                                 (0, 2): ["unknown"]})
    assert false == ["outcomes: (0, 1) reported undelivered (not_delivered) but delivered "
                     "in cluster a"]
    twice = check_outcomes(dst, dst, delivered, {(0, 2): ["unknown", "unknown"]})
    assert twice == ["outcomes: (0, 2) reported undelivered 2 times"]


def test_past_the_deadline_a_message_is_reported_unknown_then_delivered() -> None:
    clusters = {"c0": ("c0n0", "c0n1"), "c1": ("c1n0", "c1n1")}
    globals_ = tuple(Global(0.1 * i, "c0n1", ("c0", "c1")) for i in range(5))
    sc = FedScenario(clusters, globals_, unreachable=(("c1", 0.0, 6.0),),
                     link=LinkFaults(loss=0.1, delay=0.02), deadline_s=3.0)
    r = run_scenario(sc, 2)
    assert r.violations == []
    assert len(r.undelivered) == 5 and all(v == ["unknown"] for v in r.undelivered.values())
    assert r.stayed_up == r.global_ids
    assert all(len(r.deliveries[p]) == 5 for p in range(4))  # delivered after all


def test_the_sweep_catches_a_report_that_lies(monkeypatch: pytest.MonkeyPatch) -> None:
    """A sender that says "not delivered" at its deadline, while the message may still
    be delivered (it is, once the cluster is back): the outcomes check reports it."""
    real = simulation.FederationMember.tick

    def lying(self: simulation.FederationMember, now: float) -> list[object]:
        return [simulation.Undelivered(o.msg_id, o.reason, o.waiting_for, o.age_s,
                                       "not_delivered")
                if isinstance(o, simulation.Undelivered) else o for o in real(self, now)]

    monkeypatch.setattr(simulation.FederationMember, "tick", lying)
    result = sweep(range(60))
    notes = [v for vs in result["violations"].values() for v in vs]  # type: ignore[attr-defined]
    assert any("reported undelivered (not_delivered) but delivered" in v for v in notes)


def test_the_sweep_catches_multicasts_dropped_at_an_order_gap(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A daemon whose new member does not adopt the old one's multicasts (a cut-off
    member rejoins) loses them silently: the outcomes check reports it."""
    monkeypatch.setattr(simulation.FederationMember, "adopt", lambda self, old, now: None)
    cfg = simulation.FedSweepConfig(cutoff=1.0, crash=0.0, sender_crash=0.0, max_loss=0.3)
    found = []
    for seed in range(200):
        sc = random_scenario(seed, cfg)
        if not sc.cutoffs:
            continue
        node, t0, _t1 = sc.cutoffs[0]
        # the cut-off member sends while cut off: its Submit never reaches its order
        sc = FedScenario(sc.clusters, (*sc.globals_, Global(t0 + 0.01, node,
                                                           tuple(sorted(sc.clusters)))),
                         sc.locals_, {}, {}, sc.cutoffs, (), sc.link, end=sc.end)
        found += [v for v in run_scenario(sc, seed).violations if v.startswith("outcomes")]
        if found:
            break
    assert found and "nor reported undelivered" in found[0]


def test_the_cli_runs_the_federation_sweep(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--preset", "multigroup", "--protocol", "federation",
                 "--seeds", "4", "--seed", "7", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["seeds"] == 4 and report["failed"] == []
    assert report["figures"]["failure-free delays"] == ("2 inter-cluster hops + 2 safe "
                                                        "orderings")


def test_the_cli_exits_1_on_a_violation(capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    real = simulation.check_run

    def planted(*args, **kwargs):  # type: ignore[no-untyped-def]
        return [*real(*args, **kwargs), "acyclicity: planted"]

    monkeypatch.setattr(simulation, "check_run", planted)
    assert main(["simulate", "--preset", "multigroup", "--protocol", "federation",
                 "--seeds", "2", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert len(report["failed"]) == 2 and "planted" in report["notes"][0]


def test_over_real_nodes_a_restarted_member_rejoins_with_the_state() -> None:
    """Seed 5: cluster c1's node 2 restarts; its new incarnation gets the federation
    state through c1's order (real Nodes: wire, membership, ToTo, safe delivery), and
    every check of both the clusters and the federation holds."""
    sc = random_node_scenario(5)
    assert [f.kind for fs in sc.faults.values() for f in fs] == ["restart"]
    r, cluster_checks = run_node_scenario(sc, 5)
    assert r.violations == [] and cluster_checks == {"c0": {}, "c1": {}, "c2": {}}
    assert r.member_counters["snapshots_installed"] == 1
    assert len(r.global_ids) == 14 and sum(len(v) for v in r.deliveries.values()) > 100


@pytest.mark.slow
def test_over_real_nodes_twenty_seeds_hold_every_property() -> None:
    result = node_sweep(range(20))
    assert result["failed"] == [], result["violations"]


def test_the_quiescence_check_catches_retransmissions_that_never_stop(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(simulation.FederationMember, "_on_ack", lambda self, h, ack: None)
    r = run_scenario(random_scenario(3), 3)
    assert r.violations and all(v.startswith("quiescence") for v in r.violations)


def test_over_real_nodes_failure_free_delivery_takes_two_hops_and_two_safe_orderings(
) -> None:
    """Inter-cluster hops of 1 s, clusters of 3 Nodes whose safe delivery takes about
    2 ms alone: the worst global latency is 2 hops and about two safe orderings."""
    found = node_delays()
    assert found["hops"] == 2 and found["violations"] == 0
    assert 0.003 < found["orderings_s"] < 0.008
