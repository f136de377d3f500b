"""The membership layer's phases: the table of moves, and the moves a view change and a
graceful leave make (``amcast.protocols.membership.phase``)."""

from __future__ import annotations

import pytest
from amcast.protocols.membership.layer import MembershipLayer
from amcast.protocols.membership.phase import (
    CLOSING,
    PRIMARY,
    TRANSITIONS,
    Closing,
    Phase,
    TransitionError,
)
from amcast.protocols.node_config import NodeConfig
from amcast.protocols.simulation.cluster import Cluster, Workload
from amcast.protocols.simulation.faults import Fault
from amcast.protocols.simulation.network import LinkFaults, NetworkConfig

CFG = NodeConfig(group_key=b"simulation-group-key")


def test_every_phase_has_its_moves_and_left_is_the_end() -> None:
    assert set(TRANSITIONS) == set(Phase)
    assert TRANSITIONS[Phase.LEFT] == frozenset()
    # every phase but the end can reach an installed view again
    for phase in set(Phase) - {Phase.LEFT}:
        assert {Phase.STEADY, Phase.FROZEN} & TRANSITIONS[phase], phase
    # nothing enters the first phase again, nor leaves a primary view for REJOINING
    assert all(Phase.JOINING not in moves for moves in TRANSITIONS.values())
    assert all(Phase.REJOINING not in TRANSITIONS[p] for p in PRIMARY)


def test_a_move_the_table_does_not_list_is_refused() -> None:
    c = Cluster(3, seed=1, node_config=CFG, network=NetworkConfig(), bootstrap="join")
    c.advance(0.5)
    layer = c.nodes[0].membership
    assert layer.phase is Phase.STEADY and layer.closing is None
    with pytest.raises(TransitionError):
        layer.become(Phase.JOINING)
    with pytest.raises(TransitionError):
        layer.become(Phase.REJOINING, Closing(None, 0.0))  # type: ignore[arg-type]
    assert layer.phase is Phase.STEADY


def test_view_changes_and_a_graceful_leave_go_through_their_phases(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    moves: set[tuple[Phase, Phase]] = set()
    become = MembershipLayer.become

    def recording(self: MembershipLayer, phase: Phase, closing: Closing | None = None) -> None:
        before = self.phase
        become(self, phase, closing)
        moves.add((before, phase))
        assert (self.closing is not None) == (phase in CLOSING)
        # FROZEN is exactly a promise in a view it orders in
        if phase in (Phase.STEADY, Phase.FROZEN):
            assert (self.promised_at is not None) == (phase is Phase.FROZEN)

    monkeypatch.setattr(MembershipLayer, "become", recording)
    c = Cluster(4, seed=13, node_config=CFG, bootstrap="join",
                network=NetworkConfig(default=LinkFaults(loss=0.02)))
    c.schedule(Fault(1.0, "leave", (2,), 5.0))
    result = c.run(Workload(messages_per_node=20, interval=0.05), max_time=30)
    assert result.ok, result.violations
    assert {(Phase.JOINING, Phase.STEADY), (Phase.STEADY, Phase.FROZEN),
            (Phase.FROZEN, Phase.INSTALLING), (Phase.INSTALLING, Phase.STEADY),
            (Phase.LEAVING, Phase.LEFT)} <= moves, moves
    assert any(after is Phase.LEAVING for _, after in moves), moves
