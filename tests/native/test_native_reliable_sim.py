"""Simulated clusters with the native reliable layer are the same runs as with the Python
one.

With ``AMCAST_RELIABLE=native`` every node on the native core runs
``amcast_native.ReliableLayer`` in each view (``reliable.native``); since it returns
what the Python layer returns and draws the same numbers from the node's rng
(``test_native_reliable``), a run of the membership sweep (crashes and restarts,
pauses, joins, leaves, partitions, loss, duplication and reordering) must deliver the
same sequences at the same virtual times, install the same views and drop the same
datagrams for the same reasons, for every seed, whichever layer the nodes run.

Skipped, with the reason, where the extension is not built (``make rust``).
"""

from __future__ import annotations

import pytest
from amcast.protocols.reliable.native import RELIABLE_ENV
from amcast.protocols.simulation.membership_sweep import membership_point, run_membership_point

from .test_mixed_cores import fingerprint

amcast_native = pytest.importorskip("amcast_native", reason="amcast_native is not built "
                                    "(make rust): only the Python layer runs")
pytestmark = pytest.mark.skipif(not hasattr(amcast_native, "ReliableLayer"),
                                reason="amcast_native is built without its reliable layer")

EXTRAS = [{}, {"disk_faults": True}, {"deaf_faults": True}, {"clock_faults": True},
          {"impostor_faults": True}]


def run(seed: int, reliable: str, monkeypatch: pytest.MonkeyPatch,
        cores: tuple[str, ...] = ("native",)) -> str:
    monkeypatch.setenv(RELIABLE_ENV, reliable)
    point = membership_point(seed, n_range=(3, 6), max_loss=0.2, **EXTRAS[seed % len(EXTRAS)])
    result = run_membership_point(point, messages_per_node=12, cores=cores)
    assert result.ok, (seed, reliable, result.violations)
    expected = {"native" if reliable == "native" and c == "native" else "pure" for c in cores}
    assert {n.core["reliable"] for n in result.all_nodes} == expected
    return fingerprint(result)


@pytest.mark.parametrize("block", range(5))
def test_membership_runs_are_the_same_with_the_native_reliable_layer(
        block: int, monkeypatch: pytest.MonkeyPatch) -> None:
    for seed in range(block * 10, block * 10 + 10):
        assert run(seed, "native", monkeypatch) == run(seed, "pure", monkeypatch), seed


def test_a_mix_of_native_and_python_layers_is_the_same_run(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for seed in (50, 51, 52):
        mixed = run(seed, "native", monkeypatch, cores=("native", "pure"))
        assert mixed == run(seed, "pure", monkeypatch, cores=("native", "pure")), seed
