"""A full disk in the simulator: the daemon's rule that nothing is sent while a state
record it was handed is not on disk (``Daemon._persist_state``), under every property.

``disk_full`` (``faults.Fault``) makes a node's disk refuse its records for a while; the
node keeps running, receiving and stepping, and the cluster drops what it would send as
the daemon does. ``amcast simulate --preset membership --disk-faults`` sweeps it on top
of each seed's plan, often with a restart of that node during it (from the older record
its disk kept). The rule the daemon had before (a refused record was dropped, and the
next steps sent without it) is kept here as a counterexample: it breaks agreement.
"""

from __future__ import annotations

import os

import pytest
from amcast.protocols.membership.durable import DurableState
from amcast.protocols.simulation import membership_sweep
from amcast.protocols.simulation.cluster import Cluster, Workload
from amcast.protocols.simulation.faults import Fault
from amcast.protocols.simulation.membership_sweep import (
    membership_point,
    run_membership_point,
    run_membership_sweep,
)

from amcast.cli import main

SEEDS = range(40)


class ForgetsRefusedRecords(Cluster):
    """amcastd before this rule: a record the disk refused was dropped with the datagrams
    of its step, and the following steps sent without it ever being written."""

    def _persist(self, i: int) -> bool:
        if self.disk_full.get(i):
            del self.unwritten[i]
            return False
        self.disk[i] = self.unwritten.pop(i)
        return True


class NotesRefusals(Cluster):
    """Records when each node's disk first refused a record it was handed."""

    first_refusal: dict[int, float]

    def _persist(self, i: int) -> bool:
        written = super()._persist(i)
        if not written:
            self.first_refusal.setdefault(i, self.now)
        return written


def test_a_node_sends_nothing_while_its_record_is_refused_and_rejoins_after() -> None:
    cluster = NotesRefusals(4, seed=5)
    cluster.first_refusal = {}
    left_node_3: list[float] = []
    cluster.link_filter = lambda src, dst, data: (
        left_node_3.append(cluster.now) if src == 3 else None) is None
    cluster.schedule(Fault(1.0, "disk_full", (3,), 3.0))
    cluster.schedule(Fault(1.2, "crash", (0,)))  # a view change: node 3 has a ballot to keep
    result = cluster.run(Workload(messages_per_node=20, interval=0.05), max_time=30.0,
                         settle=1.0)
    assert result.ok, {k: v[:2] for k, v in result.violations.items() if v}
    assert result.drops["state_unwritable"] > 0
    refused_at = cluster.first_refusal[3]
    assert 1.2 < refused_at < 4.0  # the view change handed node 3 a ballot to keep
    sent_meanwhile = [t for t in left_node_3 if refused_at <= t < 4.0]
    assert sent_meanwhile == [], "node 3 sent while its disk refused its record"
    assert any(t >= 4.0 for t in left_node_3)  # and sent again once the disk took it
    assert cluster.unwritten == {}
    durable = DurableState.decode(cluster.disk[3], 3)
    final = cluster.nodes[3].view
    assert final is not None and durable.max_view_id >= final.view_id
    assert {m.node for m in final.members} == {1, 2, 3}


@pytest.mark.slow
def test_the_old_rule_breaks_agreement_where_the_daemons_rule_holds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Seed 3: node 3's disk is full from 0.38 s for 1.69 s and it restarts at 1.33 s.
    Under the old rule its life started at 0.50 s sent with an incarnation whose record
    never reached the disk; the restart read the older record and took the same
    incarnation again, and the others took the new life for the old one: view 5 is
    delivered differently. With incarnations from the wall clock (the daemon's floor) 300
    seeds of the old rule found nothing: the clock hides this unless it steps back."""
    point = membership_point(3, disk_faults=True)
    assert [f.kind for f in point.plan].count("disk_full") == 1
    assert run_membership_point(point).ok
    monkeypatch.setattr(membership_sweep, "Cluster", ForgetsRefusedRecords)
    broken = run_membership_point(point)
    assert broken.violations["agreement"], broken.violations


@pytest.mark.slow
def test_ci_membership_sweep_with_a_full_disk_every_property_holds() -> None:
    jobs = min(2, os.cpu_count() or 1)
    report = run_membership_sweep(SEEDS, n_range=(3, 6), messages_per_node=25, jobs=jobs,
                                  disk_faults=True)
    assert report["ok"], report["notes"][:10]
    figures = report["figures"]
    assert figures["faults: disk_full"] == len(SEEDS)
    assert figures["datagrams held back for an unwritten state record"] > 0
    assert "a full disk at one node per seed" in report["title"]


def test_disk_faults_draw_from_their_own_stream() -> None:
    """The rest of a seed's plan is the same with and without ``--disk-faults``: the
    published seed ranges of the plain sweep still reproduce."""
    for seed in range(30):
        plain = membership_point(seed)
        disk = membership_point(seed, disk_faults=True)
        assert disk.plan[: len(plain.plan)] == plain.plan
        added = disk.plan[len(plain.plan):]
        assert added[0].kind == "disk_full" and all(
            f.nodes == added[0].nodes for f in added)
    restarts = sum(len(membership_point(s, disk_faults=True).plan)
                   - len(membership_point(s).plan) - 1 for s in range(200))
    assert 60 <= restarts <= 140  # about half the disk faults have a restart during them


def test_the_cli_takes_disk_faults_for_the_membership_preset_only(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["simulate", "--preset", "membership", "--seeds", "2", "--disk-faults",
                 "--json", "--n-max", "4", "--messages", "4"]) == 0
    assert "a full disk at one node per seed" in capsys.readouterr().out
    assert main(["simulate", "--preset", "faults", "--seeds", "1", "--disk-faults"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--disk-faults" in err[0]
