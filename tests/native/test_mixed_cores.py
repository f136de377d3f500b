"""Native and pure nodes in one simulated cluster (``Cluster(cores=...)``).

A node on the native core decodes, seals, opens and guards against replays in Rust
(``amcast_native``), one on the pure core in Python. Since the two behave alike byte for
byte (``test_differential``, ``test_decode_differential``), a run must not depend on
which node runs which: for one seed and configuration, an all-native, an all-pure and a
mixed cluster deliver the same sequences at the same virtual times, install the same
views and drop the same datagrams for the same reasons. The membership sweep passes with
native nodes and with a mix.

Skipped, with the reason, where the extension is not built (``make rust``).
"""

from __future__ import annotations

import hashlib
import json
import os

import pytest
from amcast.protocols.simulation.cluster import Cluster, RunResult, Workload
from amcast.protocols.simulation.membership_sweep import (
    membership_point,
    run_membership_point,
    run_membership_sweep,
)
from amcast.protocols.wire.native import native_module

from amcast.cli import main

pytestmark = pytest.mark.skipif(
    native_module() is None, reason="amcast_native is not built (make rust): only the Python "
    "core runs")

MIXES = {"pure": ("pure",), "native": ("native",), "mixed": ("native", "pure"),
         "mixed the other way": ("pure", "native", "native")}
NATIVE = {"decode": "native", "seal": "native", "order": "native",
          "reliable": "native"}  # the reliable layer follows the core
PURE = {"decode": "pure", "seal": "pure", "order": "pure", "reliable": "pure"}


def fingerprint(result: RunResult) -> str:
    """Every process's deliveries and installed views (with their virtual times) and the
    drops by reason."""
    digest = hashlib.sha256()
    for proc, views in sorted(result.views.items()):
        digest.update(repr((proc, views)).encode())
    for node, log in sorted(result.logs.items()):
        digest.update(repr((node, log)).encode())
    digest.update(repr(sorted(result.drops.items())).encode())
    return digest.hexdigest()


def test_each_node_runs_the_core_it_was_given() -> None:
    cluster = Cluster(5, seed=1, cores=("native", "pure"))
    assert [cluster.nodes[i].core for i in range(5)] == [NATIVE, PURE, NATIVE, PURE, NATIVE]
    result = cluster.run(Workload(messages_per_node=5), max_time=10.0)
    assert result.ok, result.violations
    with pytest.raises(ValueError, match="native or pure"):
        Cluster(3, seed=1, cores=("rust",))


# seeds with every kind of fault the sweeps inject: crashes and restarts, pauses, joins,
# leaves, partitions, a full disk, a deaf member, a clock step, an impostor
POINTS = [
    (0, {}), (1, {"disk_faults": True}), (2, {"deaf_faults": True}),
    (3, {"clock_faults": True}), (4, {"impostor_faults": True}), (5, {}),
]


@pytest.mark.parametrize(("seed", "extra"), POINTS)
def test_all_native_all_pure_and_mixed_runs_are_the_same_run(
        seed: int, extra: dict[str, bool]) -> None:
    point = membership_point(seed, n_range=(3, 6), **extra)
    prints = {}
    for name, cores in MIXES.items():
        result = run_membership_point(point, messages_per_node=15, cores=cores)
        assert result.ok, (name, result.violations)
        assert {n.core["seal"] for n in result.all_nodes} == set(cores)
        assert {n.core["order"] for n in result.all_nodes} == set(cores)
        prints[name] = fingerprint(result)
    assert len(set(prints.values())) == 1, prints


def test_the_fingerprint_tells_runs_apart() -> None:
    point = membership_point(0, n_range=(3, 6))
    result = run_membership_point(point, messages_per_node=15, cores=("native", "pure"))
    before = fingerprint(result)
    node = next(n for n, log in result.logs.items() if log)
    result.logs[node] = result.logs[node][:-1]  # one delivery fewer at one node
    assert fingerprint(result) != before
    other = run_membership_point(membership_point(1, n_range=(3, 6)), messages_per_node=15,
                                 cores=("native", "pure"))
    assert fingerprint(other) != before


@pytest.mark.parametrize("mix", ["native", "mixed"])
def test_the_membership_sweep_passes_with_native_nodes_and_with_a_mix(mix: str) -> None:
    report = run_membership_sweep(range(24), n_range=(3, 6), messages_per_node=15,
                                  cores=MIXES[mix], jobs=min(2, os.cpu_count() or 1))
    assert report["ok"], report["notes"][:10]
    assert report["figures"]["seeds"] == 24


@pytest.mark.slow
@pytest.mark.parametrize("mix", ["native", "mixed"])
def test_the_long_membership_sweep_passes_with_native_nodes_and_with_a_mix(mix: str) -> None:
    # seeds after the fast tier's; one process: pytest-xdist already uses every core
    report = run_membership_sweep(range(24, 124), n_range=(3, 6), messages_per_node=25,
                                  cores=MIXES[mix], jobs=1)
    assert report["ok"], report["notes"][:10]


def test_amcast_simulate_runs_the_membership_sweep_on_a_mix(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--preset", "membership", "--seeds", "2", "--n-max", "4",
                 "--messages", "4", "--core", "mixed", "--quiet", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["title"].endswith("cores native/pure") and report["figures"]["seeds"] == 2
    assert main(["simulate", "--preset", "faults", "--core", "native"]) == 2  # not read there
