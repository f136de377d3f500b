"""Simulated clusters with the native reliable layer are the same runs as with the Python
one.

With ``AMCAST_RELIABLE=native`` every node on the native core runs
``amcast_native.ReliableLayer`` in each view (``reliable.native``); since it returns
what the Python layer returns and draws the same numbers from the node's rng
(``test_native_reliable``), a run of the membership sweep (crashes and restarts,
pauses, joins, leaves, partitions, loss, duplication and reordering) must deliver the
same sequences at the same virtual times, install the same views and drop the same
datagrams for the same reasons, for every seed, whichever layer the nodes run.

Where a view's reliable layer and engine are both native, the session releases through
one native call per datagram (``session.FUSED_RELEASE``: ``receive_release``,
``release``) instead of its per-vertex loop; that too must be the same run, down to
every node's counters and rng: the fused runs are compared with the loop's on the
native layer (and, through the tests above, with the Python layer).

Skipped, with the reason, where the extension is not built (``make rust``).
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from amcast.protocols import session as session_module
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
        cores: tuple[str, ...] = ("native",), deep: bool = False) -> str:
    monkeypatch.setenv(RELIABLE_ENV, reliable)
    point = membership_point(seed, n_range=(3, 6), max_loss=0.2, **EXTRAS[seed % len(EXTRAS)])
    result = run_membership_point(point, messages_per_node=12, cores=cores)
    assert result.ok, (seed, reliable, result.violations)
    expected = {"native" if reliable == "native" and c == "native" else "pure" for c in cores}
    assert {n.core["reliable"] for n in result.all_nodes} == expected
    if not deep:
        return fingerprint(result)
    # and every node's counters (datagrams and bytes sent and received by kind, drops,
    # repairs, releases, ...), what its rng is left at, and when the run ended
    digest = hashlib.sha256(fingerprint(result).encode())
    digest.update(repr(result.end_time).encode())
    for node in result.all_nodes:
        digest.update(repr((node.node_id, node.stats, node._rng.getstate())).encode())
    return digest.hexdigest()


def counting_fused(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the sessions' fused releases: [receive_release results applied]."""
    calls = [0]
    apply = session_module.ViewSession._apply

    def counted(self: Any, step: Any) -> None:
        calls[0] += 1
        apply(self, step)

    monkeypatch.setattr(session_module.ViewSession, "_apply", counted)
    return calls


def loop_run(seed: int, monkeypatch: pytest.MonkeyPatch) -> str:
    """The native layer's run of ``seed`` through the session's per-vertex loop."""
    with monkeypatch.context() as m:
        m.setattr(session_module, "FUSED_RELEASE", False)
        calls = counting_fused(m)
        out = run(seed, "native", m, deep=True)
        assert calls[0] == 0
    return out


@pytest.mark.parametrize("block", range(10))
def test_fused_native_releases_are_the_per_vertex_loop(
        block: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """100 seeds of the membership sweep (churn: crashes, restarts, joins, leaves,
    partitions; loss up to 20%, duplication, reordering; the faults of ``EXTRAS``)."""
    for seed in range(100 + block * 10, 100 + block * 10 + 10):
        with monkeypatch.context() as m:
            calls = counting_fused(m)
            fused = run(seed, "native", m, deep=True)
            assert calls[0] > 0, seed  # the fused path ran
        assert fused == loop_run(seed, monkeypatch), seed


def test_the_comparison_sees_a_fused_path_that_differs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A planted difference the runs stay correct with (the fused receive's releases
    see their time a millisecond late: ack deadlines move) is told apart."""
    receive = session_module.ViewSession.receive

    def late(self: Any, dg: Any, now: float) -> bool:
        if self._fused is None:
            return receive(self, dg, now)
        self._now = now
        step = self._fused.receive_release(dg, now + 1e-3, self.engine)
        if step is not None:
            self._apply(step)
            return False
        if dg.acks:
            self._deliver_ready(flush=False)
            return bool(dg.kind is session_module._HEARTBEAT and not dg.nacks)
        return False

    seeds = range(100, 103)
    honest = [run(seed, "native", monkeypatch, deep=True) for seed in seeds]
    with monkeypatch.context() as m:
        m.setattr(session_module.ViewSession, "receive", late)
        planted = [run(seed, "native", m, deep=True) for seed in seeds]
    assert all(a != b for a, b in zip(honest, planted, strict=True))


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
