"""Two ways a cluster stopped forming views, found by the membership sweep (seeds 310888
and 310954 of 2026-11-26, on the code of that morning; later timing changes hid them
from those seeds, so these tests put one node in each situation directly).

- A node outside any view waits for a primary view it hears to take it in. A member
  that gave its view up still sends datagrams of that view while it announces itself
  (JOIN): taking those for a primary view, the lowest node never coordinated, and the
  member waited for it to (``MembershipLayer._in_primary``).
- A member that can never complete a proposal's cut (its other holder is gone) never
  voted, so a proposal that may have been decided was proposed again forever. When a
  holder voted for it already, it now votes, as no holder, after ``ACCEPT_VOTE_AFTER``
  of the flush timeout (``MembershipLayer._vote_unheld``).
"""

from __future__ import annotations

from amcast.protocols.membership import handlers
from amcast.protocols.membership.handlers import ACCEPT_VOTE_AFTER
from amcast.protocols.membership.layer import MembershipLayer
from amcast.protocols.node_config import NodeConfig
from amcast.protocols.simulation.cluster import Cluster
from amcast.protocols.simulation.network import NetworkConfig
from amcast.protocols.wire.codec import Datagram, Kind, MembershipDatagram
from amcast.protocols.wire.membership import (
    Accept,
    Accepted,
    Ballot,
    Join,
    Proposal,
    ViewRecord,
)

KEY = b"simulation-group-key"
CFG = NodeConfig(group_key=KEY)


def isolated_node() -> tuple[Cluster, MembershipLayer]:
    """Node 0 of three that never heard each other: no view, nobody else alive."""
    c = Cluster(3, seed=7, node_config=CFG, network=NetworkConfig(), bootstrap="join")
    c.blocked_links |= {(a, b) for a in range(3) for b in range(3) if a != b}
    c.advance(0.3)
    layer = c.nodes[0].membership
    assert layer.view is None
    return c, layer


def heartbeat(sender: int, view: int) -> Datagram:
    return Datagram(Kind.HEARTBEAT, sender, view, 4, (), (), ((sender, 4),))


def test_a_view_whose_member_announces_itself_is_not_a_primary_view_to_wait_for() -> None:
    c, layer = isolated_node()
    now = c.now
    join = Join(layer.settings, 5, False, None)
    layer.on_membership(MembershipDatagram(1, 5, 3, join), now)  # gave view 5 up
    layer.on_datagram(heartbeat(1, 5), now)  # its abandoned session still sends
    alive = layer.alive_members(now)
    assert set(alive) == {0, 1}
    assert layer.coordinator(alive, now) == 0, "nobody else will propose a view"


def test_a_view_newer_than_its_senders_join_is_a_primary_view_to_wait_for() -> None:
    c, layer = isolated_node()
    now = c.now
    layer.on_membership(MembershipDatagram(1, 5, 3, Join(layer.settings, 5, False, None)), now)
    layer.on_datagram(heartbeat(1, 7), now)  # taken into view 7 since
    assert layer.coordinator(layer.alive_members(now), now) is None
    c2, other = isolated_node()
    other.on_datagram(heartbeat(2, 5), c2.now)  # a member that never announced itself
    assert other.coordinator(other.alive_members(c2.now), c2.now) is None


def settled_member() -> tuple[Cluster, MembershipLayer, Proposal, Ballot]:
    """Node 1 of a settled cluster, and a proposal closing its view with a cut it can
    never complete (the vertices lie beyond anything sent)."""
    c = Cluster(3, seed=5, node_config=CFG, network=NetworkConfig(), bootstrap="join")
    c.advance(0.5)
    layer = c.nodes[1].membership
    view = layer.view
    assert view is not None and view.nodes == (0, 1, 2)
    successor = ViewRecord(view.view_id + 10, view.members[:2], view.potential, view.view_id)
    proposal = Proposal(successor, view, ((0, 10**6), (1, 0), (2, 0)))
    layer.take_datagrams()
    return c, layer, proposal, Ballot(view.view_id + 9, 0)


def test_a_member_that_cannot_complete_the_cut_votes_as_no_holder_in_time() -> None:
    c, layer, proposal, ballot = settled_member()
    start, coordinator = c.now, layer.view.members[0].incarnation  # type: ignore[union-attr]
    handlers.on_accept(layer, 0, coordinator, Accept(ballot, proposal, holder_voted=True), start)
    assert layer.accept_wait is not None and layer.durable.accepted is None
    due = start + ACCEPT_VOTE_AFTER * CFG.flush_timeout
    assert layer.next_timer(start) <= due
    handlers.on_accept(layer, 0, coordinator, Accept(ballot, proposal, True), due - 0.01)
    layer.evaluate(due - 0.001)  # the coordinator's repeated ACCEPT did not restart it
    assert layer.accept_wait is not None and layer.durable.accepted is None
    layer.evaluate(due)
    assert layer.accept_wait is None
    assert layer.durable.accepted == (ballot, proposal) and not layer.durable.accepted_held
    votes = [dg.message for dg in layer.take_datagrams() if isinstance(dg.message, Accepted)]
    assert votes == [Accepted(ballot, proposal.view.view_id, False)]  # says it: not presumed


def test_without_a_holders_vote_a_member_that_cannot_complete_the_cut_waits() -> None:
    # Voting here would make the proposal look as if it may have been decided (seed
    # 310914: a member crashed for good after its promise fed the cut), and every later
    # round would propose it again, never to be decided.
    c, layer, proposal, ballot = settled_member()
    start, coordinator = c.now, layer.view.members[0].incarnation  # type: ignore[union-attr]
    handlers.on_accept(layer, 0, coordinator, Accept(ballot, proposal), start)
    layer.evaluate(start + 2 * CFG.flush_timeout)  # well past ACCEPT_VOTE_AFTER
    assert layer.accept_wait is not None and layer.durable.accepted is None
    assert not any(isinstance(dg.message, Accepted) for dg in layer.take_datagrams())


def test_the_flag_of_a_holders_vote_is_kept_whichever_copy_of_accept_comes_first() -> None:
    # The coordinator sends ACCEPT plain (older daemons read that one) and then flagged;
    # a later plain copy (a repeat, or the two reordered) must not clear the flag.
    c, layer, proposal, ballot = settled_member()
    start, coordinator = c.now, layer.view.members[0].incarnation  # type: ignore[union-attr]
    handlers.on_accept(layer, 0, coordinator, Accept(ballot, proposal, True), start)
    handlers.on_accept(layer, 0, coordinator, Accept(ballot, proposal), start + 0.001)
    due = start + ACCEPT_VOTE_AFTER * CFG.flush_timeout
    layer.evaluate(due)
    assert layer.accept_wait is None
    assert layer.durable.accepted == (ballot, proposal) and not layer.durable.accepted_held
