"""The engine-level simulator: deterministic, safe for every safe rule over many seeds
and topologies, and the section 7 effects it is meant to show."""

from __future__ import annotations

import json

import pytest
from amcast.protocols.ordering import UNSAFE_RULES, OrderingRule
from amcast.protocols.ordering.messages import DeliveryRule
from amcast.protocols.simulation.causal_broadcast import Topology, Workload, simulate
from amcast.protocols.simulation.ordering_replay import early_gain, replay

from amcast.cli import main

SAFE = [r for r in OrderingRule if r not in UNSAFE_RULES]
TOPOLOGIES = {
    "bus": Topology(base=0.0005, jitter=0.001),
    "slow-bus": Topology(base=0.002, jitter=0.004),
    "two-lans": Topology(base=0.0005, jitter=0.0005, lans=2, gateway=0.01),
    "slow-node": Topology(base=0.0005, jitter=0.001, slow=(1,)),
}


def test_same_seed_same_trace_other_seed_other_trace() -> None:
    w = Workload(n=5, rate=40, duration=0.5)
    a, b, c = simulate(w, Topology(), 7), simulate(w, Topology(), 7), simulate(w, Topology(), 8)
    assert a.releases == b.releases
    assert a.releases != c.releases


def test_every_processor_releases_every_message_in_a_causal_order() -> None:
    trace = simulate(Workload(n=6, rate=80, duration=0.5), Topology(jitter=0.004), 3)
    total = trace.data_messages + trace.ack_only_messages
    for releases in trace.releases:
        assert len(releases) == total
        seen: dict[int, int] = {}
        for _, m in releases:
            assert seen.get(m.sender, 0) == m.seq - 1
            assert all(seen.get(q, 0) >= x for q, x in m.acks)
            seen[m.sender] = m.seq


@pytest.mark.parametrize("topology", list(TOPOLOGIES), ids=str)
@pytest.mark.parametrize("seed", range(8))
def test_safe_rules_are_safe_and_deliver_everything(topology: str, seed: int) -> None:
    n = 3 + seed % 6  # 3 .. 8
    trace = simulate(Workload(n=n, rate=60, duration=0.6), TOPOLOGIES[topology], seed)
    for rule in SAFE:
        for phi in {None, 1.5 if rule in (OrderingRule.GTOTO, OrderingRule.GLTOTO) else None}:
            result = replay(trace, rule, phi)
            assert result.violations == [], (rule, phi, result.violations[:3])
            assert result.undelivered == 0, (rule, phi)
            assert result.deliveries == n * trace.data_messages


def test_the_simulator_exposes_the_unsafe_toto_rule() -> None:
    found = 0
    for seed in range(3):
        trace = simulate(Workload(n=8, rate=50, duration=3), Topology(0.002, 0.004), seed)
        found += len(replay(trace, OrderingRule.TOTO).violations)
    assert found > 0


def test_wide_dag_gl_toto_beats_toto() -> None:
    topology = Topology(base=0.00025, jitter=0.00025, lans=2, gateway=0.02)
    trace = simulate(Workload(n=8, rate=50, duration=3), topology, 1)
    toto = replay(trace, OrderingRule.TOTO)
    gl = replay(trace, OrderingRule.GLTOTO, 2)
    assert gl.share(DeliveryRule.DEFAULT) < toto.share(DeliveryRule.DEFAULT) / 2
    assert gl.latency_quantile(0.5) < toto.latency_quantile(0.5)
    assert gl.avg_ntail < toto.avg_ntail


def test_stoto_delivers_early_what_toto_does_not_when_the_dag_widens() -> None:
    trace = simulate(Workload(n=8, rate=50, duration=3), Topology(0.003, 0.003), 1)
    stoto, toto = replay(trace, OrderingRule.STOTO), replay(trace, OrderingRule.TOTO)
    assert early_gain(stoto, toto) > 0.02


def test_simulate_command_prints_json(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "simulate",
            "--preset",
            "custom",
            "--n",
            "4",
            "--duration",
            "0.3",
            "--json",
            "--rules",
            "stoto,gltoto:1.5,lex",
        ]
    )
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    rows = report["tables"][0]["rows"]
    assert [r[0] for r in rows] == ["stoto", "gltoto", "lex"]
    assert all(r[-1] == "ok" for r in rows)


def test_bench_engine_command_runs_small(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "bench",
            "engine",
            "--sizes",
            "4,8",
            "--rules",
            "gltoto",
            "--messages",
            "300",
            "--repeat",
            "1",
            "--core",
            "pure",
            "--json",
        ]
    )
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert len(report["tables"][0]["rows"]) == 2
    assert "gltoto: insertions/s at n=8 (target >= 50,000)" in report["figures"]


def test_simulate_faults_preset_sweeps_seeds_and_checks_every_property(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["simulate", "--preset", "faults", "--seeds", "12", "--seed", "700",
                 "--messages", "6", "--json"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["figures"]["seeds"] == 12 and report["figures"]["seeds failed"] == 0
    assert report["figures"]["copies lost"] > 0


def test_simulate_faults_preset_exits_1_when_a_seed_violates_a_property(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import amcast.protocols.simulation.cluster as cluster

    real = cluster.run_point

    def broken(*args, **kwargs):  # type: ignore[no-untyped-def]
        result = real(*args, **kwargs)
        result.violations["total_order"] = ["planted: nodes 0 and 1 differ at position 3"]
        return result

    monkeypatch.setattr(cluster, "run_point", broken)
    code = main(["simulate", "--preset", "faults", "--seeds", "2", "--messages", "3", "--json"])
    assert code == 1
    assert "planted" in capsys.readouterr().out


def test_simulate_faults_preset_rejects_a_bad_size_range() -> None:
    assert main(["simulate", "--preset", "faults", "--n-min", "5", "--n-max", "4"]) == 2


def test_a_slow_processor_that_does_not_exist_is_refused(
        capsys: pytest.CaptureFixture[str]) -> None:
    """It was ignored: the run went on with no slow processor."""
    assert main(["simulate", "--preset", "custom", "--n", "4", "--slow", "4"]) == 2
    assert capsys.readouterr().err.strip() == (
        "amcast: error: --slow 4: the processors are 0..3 (--n 4)")
