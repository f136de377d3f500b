"""The coordinator decides a view whose cut is not empty only with a holder's vote.

A holder (``agreement.needs_holder``) is a member of both views that had every vertex
up to the cut when it voted: its flush delivers them. Membership sweep seed 310001
had a view decided by the votes of a killed member's restart and of an excluded member,
neither holding the cut; its only live member could never complete it. These tests put
a coordinator (node 0 of a settled three-node cluster) in phase 2 of such a proposal and
feed it votes as they arrive on the wire: what a vote says, what an older daemon's vote
that says nothing is taken for, and whose word counts.
"""

from __future__ import annotations

from amcast.protocols.membership import handlers
from amcast.protocols.membership.agreement import ACCEPT, INSTALL, Round
from amcast.protocols.membership.layer import MembershipLayer
from amcast.protocols.node_config import NodeConfig
from amcast.protocols.simulation.cluster import Cluster
from amcast.protocols.simulation.network import NetworkConfig
from amcast.protocols.wire.membership import (
    Accept,
    Accepted,
    Ballot,
    Proposal,
    ViewRecord,
    encode_message,
)

KEY = b"simulation-group-key"


def coordinator_in_phase_two() -> tuple[Cluster, MembershipLayer, Proposal]:
    """Node 0 of a settled cluster, proposing view {0, 1} to close the current view with a
    cut past what it holds itself (so its own vote cannot come yet)."""
    c = Cluster(3, seed=5, node_config=NodeConfig(group_key=KEY), network=NetworkConfig(),
                bootstrap="join")
    c.advance(0.5)
    layer = c.nodes[0].membership
    view = layer.view
    assert view is not None and view.nodes == (0, 1, 2)
    m0, m1 = view.members[0], view.members[1]
    successor = ViewRecord(view.view_id + 10, (m0, m1), view.potential, view.view_id)
    proposal = Proposal(successor, view, ((0, 50), (1, 50), (2, 50)))
    ballot = Ballot(view.view_id + 9, 0)
    promises = {1: None, 2: None}  # only the keys matter in phase 2: who promised
    layer.round = Round(ballot, {}, c.now, c.now + 10.0, "test", phase=ACCEPT,
                        promises=promises, proposal=proposal,  # type: ignore[arg-type]
                        acceptors=view.potential)
    return c, layer, proposal


def vote(c: Cluster, layer: MembershipLayer, node: int, incarnation: int,
         held: bool | None) -> None:
    r = layer.round
    assert r is not None and r.proposal is not None
    handlers.on_accepted(layer, node, incarnation,
                         Accepted(r.ballot, r.proposal.view.view_id, held), c.now)


def test_a_majority_of_votes_holding_nothing_decides_nothing() -> None:
    c, layer, proposal = coordinator_in_phase_two()
    restarted = proposal.view.members[1].incarnation + 1
    vote(c, layer, 1, restarted, None)  # node 1's next life: it holds nothing of the view
    vote(c, layer, 2, proposal.prev.members[2].incarnation, False)  # excluded
    r = layer.round
    assert r is not None and r.accepted == {1, 2} and r.holders == set()
    assert r.phase == ACCEPT, "two votes of three, but no holder among them"
    # whatever a later life of node 1 claims, it holds nothing of the closed view
    vote(c, layer, 1, restarted, True)
    assert r.holders == set() and r.phase == ACCEPT


def test_a_member_of_both_views_that_does_not_say_is_taken_for_a_holder() -> None:
    c, layer, proposal = coordinator_in_phase_two()
    vote(c, layer, 2, proposal.prev.members[2].incarnation, False)
    vote(c, layer, 1, proposal.view.members[1].incarnation, None)  # an older daemon
    r = layer.round
    assert r is not None and r.holders == {1}
    assert r.phase == INSTALL


def test_a_member_of_both_views_that_says_it_does_not_hold_the_cut_is_no_holder() -> None:
    c, layer, proposal = coordinator_in_phase_two()
    vote(c, layer, 1, proposal.view.members[1].incarnation, False)  # released past it
    vote(c, layer, 2, proposal.prev.members[2].incarnation, None)  # excluded, says nothing
    r = layer.round
    assert r is not None and r.holders == set() and r.phase == ACCEPT


def test_only_a_member_of_both_views_is_a_holder() -> None:
    c, layer, proposal = coordinator_in_phase_two()
    vote(c, layer, 2, proposal.prev.members[2].incarnation, True)  # not in the new view
    vote(c, layer, 1, proposal.view.members[1].incarnation + 1, None)  # a restart
    r = layer.round
    assert r is not None and r.holders == set() and r.phase == ACCEPT
    vote(c, layer, 1, proposal.view.members[1].incarnation, True)
    assert r.holders == {1} and r.phase == INSTALL


def test_a_coordinator_repeats_accept_in_the_older_form_first_and_then_says_a_holder_voted(
) -> None:
    # A single flagged ACCEPT was dropped by every daemon of the version before the flag,
    # which then never voted: with such members left, a view change run by a coordinator
    # of this version repeated for ever (tests/e2e/test_upgrade.py, new-coordinator).
    c, layer, proposal = coordinator_in_phase_two()
    vote(c, layer, 1, proposal.view.members[1].incarnation, None)  # a holder; no quorum yet
    r = layer.round
    assert r is not None and r.holders == {1} and r.phase == ACCEPT
    layer.take_datagrams()
    layer.evaluate(r.retry_at)
    sent = [dg.message for dg in layer.take_datagrams() if isinstance(dg.message, Accept)]
    assert sent == [Accept(r.ballot, proposal), Accept(r.ballot, proposal, True)]
    assert [len(encode_message(m)[1]) for m in sent] == [2, 3]  # an older daemon reads 2
