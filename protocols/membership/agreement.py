"""The view agreement: which view comes next, and the cut that closes the current one.

Section 2 of the ToTo paper: "implementing reliable group membership and virtual
synchrony requires a solution to the asynchronous agreement problem ... we assume that
one of the solutions is available". We use single-decree Paxos per view: the instance
is "the successor of view W", the acceptors are W's potential members, and the value is
a ``Proposal`` (the next view's members and id, W itself, and the cut closing W).

Coordinator (``Round``), for ballot b:

1. ``PREPARE(b, candidates)``; each candidate that has promised nothing higher freezes
   its view (no new own vertices, nothing released past what it holds) and answers
   ``PROMISE`` with the latest view it knows was decided, the proposal it accepted (if
   any) and what it holds of its view.
2. With promises from a majority of W's potential members (and a new view that itself
   has a majority): if some promiser accepted a proposal succeeding W and a majority
   could have accepted it (its acceptors among the promisers plus everyone not heard
   from), the highest-ballot one is proposed again unchanged (it may have been decided);
   otherwise a new one:
   members = the promisers (minus those leaving), cut = ``cut.compute_cut`` over the
   promisers that installed W, id above every id seen. ``ACCEPT(b, proposal)``.
3. A member accepts (if it promised nothing higher), repairs W up to the cut and then
   answers ``ACCEPTED``; any other acceptor votes at once. A vote says whether its
   acceptor *holds* the cut: a member of both views with every vertex up to the cut
   (its flush delivers them). A restarted daemon, one excluded from the new view or
   one leaving votes without holding it. When a holder voted already (a promise
   reported it), ``ACCEPT`` says so, and a member that cannot complete the cut votes
   all the same, as no holder (``MembershipLayer._vote_unheld``).
4. With acceptances from a majority of W's potential members, and, when the cut is not
   empty, the vote of a holder (in this ballot or, as a promise reports, an earlier
   one): decided, ``INSTALL``.

The holder rule is what lets a member excluded from the new view tell its clients that
its messages inside the cut were delivered (``Node._view_closed``): somebody who
delivers the cut had all of it. Without it a majority of votes from acceptors holding
nothing could decide a cut that no live member can complete (membership sweep seed
310001: the only live member of the new view lacked vertices of a member killed
mid-flush). Phase 2's reproposal rule (``_may_be_chosen``) counts holders the same way,
so a later round keeps every value that could have been decided and drops one that
could not.

Safety comes from Paxos (two majorities of W's potential members meet, so a later
round sees a possibly decided value and keeps it) and from the durable acceptor state
(``durable``, which keeps whether the vote was a holder's). Paxos counts on one
acceptor state per id, so a promiser whose state cannot be the one W's member with its
id had does not count toward either majority (``counted_acceptors``): an incarnation
older than the one W lists (the live daemon, while W holds a second daemon started with
its id), or a record begun after that one (its state file lost, or a second daemon with
that id). Such a promiser may still become a member of the new view. (Membership sweep
seeds 730509 and 711817: a second daemon with the id of a member that was cut off, its
state new, made a majority with one other member; the cut-off member and the third one
later made another, and two views succeeded one.) Liveness comes from each node's
failure detector (the lowest live node coordinates) and randomized back-off when
ballots collide.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..wire.membership import (
    Ballot,
    Member,
    Promise,
    Proposal,
    ViewRecord,
)
from .cut import compute_cut
from .quorum import has_quorum

PREPARE = "prepare"
ACCEPT = "accept"
INSTALL = "install"

TreeFor = Callable[[ViewRecord | None, tuple[int, ...]], tuple[int, ...]]
"""A new view's swap tree from the view it succeeds and its members (``swap.carry``)."""


@dataclass(slots=True)
class Round:
    """A coordinator's ballot, from prepare to install."""

    ballot: Ballot
    candidates: dict[int, Member]
    started: float
    deadline: float
    reason: str
    phase: str = PREPARE
    promises: dict[int, Promise] = field(default_factory=dict)
    accepted: set[int] = field(default_factory=set)
    holders: set[int] = field(default_factory=set)
    """Acceptors known to have voted for ``proposal`` as holders (``needs_holder``)."""
    proposal: Proposal | None = None
    acceptors: tuple[int, ...] = ()
    """Potential members whose majority decides (the previous view's)."""
    counted: set[int] | None = None
    """Promisers whose votes count toward deciding (``counted_acceptors``; ``None``:
    all of them)."""
    expected: int | None = None
    retry_at: float = 0.0
    heard_in_view: set[int] = field(default_factory=set)

    def decided(self, expected_votes: int | None) -> bool:
        """Phase 2 is over: a majority of ``acceptors`` voted for the proposal and, if its
        cut needs one, a holder did (``needs_holder``)."""
        assert self.proposal is not None
        votes = self.accepted if self.counted is None else self.accepted & self.counted
        return (has_quorum(votes, self.acceptors, expected_votes)
                and (bool(self.holders) or not needs_holder(self.proposal)))

    def waiting_for(self) -> set[int]:
        if self.phase == PREPARE:
            return set(self.candidates) - set(self.promises)
        if self.phase == ACCEPT:
            return set(self.promises) - self.accepted
        assert self.proposal is not None
        return set(self.proposal.view.nodes) - self.heard_in_view


def latest_known(promises: dict[int, Promise], own: ViewRecord | None) -> ViewRecord | None:
    """The latest view any promiser knows was decided."""
    best = own
    for p in promises.values():
        if p.known is not None and (best is None or p.known.view_id > best.view_id):
            best = p.known
    return best


def counted_acceptors(promises: dict[int, Promise], incarnations: dict[int, int],
                      known: ViewRecord | None) -> set[int]:
    """Promisers that count toward deciding the successor of ``known``. Where ``known``
    lists their id: the listed incarnation (``incarnations``), or a later one whose
    record began by then (``Promise.origin``; 0, not said, counts as ever). Where it
    does not: a record begun before ``known`` was decided (an origin at most its id, a
    lower bound of the wall-clock millisecond it was decided at). An earlier
    incarnation than the listed one is another daemon than the one that took part in
    ``known`` (the listed one took its id while it was away), and a record begun after
    the listed incarnation, or after an unlisted id's view was decided, may have lost
    what an earlier life of its id promised or accepted for the successor (every
    potential member is an acceptor; membership sweep seed 860576: a member outside the
    view voted for one successor, lost its state directory, and then voted for
    another). Neither is the acceptor it was."""
    if known is None:
        return set(promises)
    counted = set()
    for node, p in promises.items():
        listed = known.member(node)
        if listed is None:
            if p.origin <= known.view_id:
                counted.add(node)
        elif incarnations[node] >= listed.incarnation and p.origin <= listed.incarnation:
            counted.add(node)
    return counted


def needs_holder(proposal: Proposal) -> bool:
    """Deciding ``proposal`` takes the vote of a *holder*: its cut is not empty (some
    promiser released vertices of the closed view), so somebody who delivers them must
    have had them all. A holder is a member of both views, in the same incarnation
    (``may_hold``), that had every vertex up to the cut when it voted: its flush
    delivers them. Where the new view has no such member, the cut came from members
    leaving gracefully, who deliver it themselves before they go: no holder is asked."""
    return any(seq > 0 for _, seq in proposal.cut) and bool(_holder_nodes(proposal))


def may_hold(proposal: Proposal, member: Member) -> bool:
    """Only a member of both views (same incarnation) can be a holder. A vote that does
    not say (``Accepted.held`` is ``None``, older daemons) is taken for a holder's when it
    comes from one: such a member votes only once it holds the cut."""
    return (proposal.prev is not None and member in proposal.view.members
            and member in proposal.prev.members)


def _holder_nodes(proposal: Proposal) -> set[int]:
    return {m.node for m in proposal.view.members if may_hold(proposal, m)}


def reported_holders(proposal: Proposal, promises: dict[int, Promise]) -> set[int]:
    """Promisers whose vote for ``proposal`` was a holder's (an acceptor's durable record
    says so across its restarts)."""
    nodes = _holder_nodes(proposal)
    return {node for node, p in promises.items()
            if node in nodes and p.accepted is not None and p.accepted[1] == proposal
            and p.accepted_held}


def unheard_holders(proposal: Proposal, promises: dict[int, Promise],
                    acceptors: tuple[int, ...]) -> set[int]:
    """Members of both views (same incarnation) among ``acceptors`` that did not promise:
    any of them may have voted for ``proposal`` as a holder, deciding it."""
    return _holder_nodes(proposal) & (set(acceptors) - set(promises))


def _may_be_chosen(proposal: Proposal, promises: dict[int, Promise],
                   acceptors: tuple[int, ...], expected_votes: int | None,
                   counted: set[int]) -> bool:
    """Could ``proposal`` have been decided? A majority of ``acceptors`` could have
    accepted it (those that promised and report it, plus every acceptor we did not hear
    from, or heard only from a promiser that does not count: ``counted``) and, if it
    needs one, a holder could have voted for it (one reports it, or a member of both
    views was not heard from). (If a value was chosen, every later proposal carries it,
    so its acceptors in our quorum report it, whatever ballot they last accepted; only
    the highest-ballot value can be the chosen one.)"""
    unheard = set(acceptors) - counted
    support = {node for node, p in promises.items()
               if node in counted and p.accepted is not None and p.accepted[1] == proposal}
    if not has_quorum(support | unheard, acceptors, expected_votes):
        return False
    if not needs_holder(proposal):
        return True
    return bool(reported_holders(proposal, promises)
                or unheard_holders(proposal, promises, acceptors))


def choose_proposal(
    *,
    promises: dict[int, Promise],
    own_known: ViewRecord | None,
    leaving: set[int],
    incarnations: dict[int, int],
    potential: tuple[int, ...],
    expected_votes: int | None,
    min_view_id: int,
    tree_for: TreeFor | None = None,
) -> tuple[Proposal | None, str]:
    """Phase 2's value, or ``(None, why)`` when these promises cannot decide anything.
    ``tree_for(known, members)`` gives a new view's swap tree (``ViewRecord.tree``) from
    the view it succeeds."""
    known = latest_known(promises, own_known)
    acceptors = known.potential if known is not None else potential
    if not has_quorum(promises, acceptors, expected_votes):
        return None, "no_quorum_of_promises"
    counted = counted_acceptors(promises, incarnations, known)
    if not has_quorum(counted, acceptors, expected_votes):
        return None, "no_quorum_of_counted_promises"
    prev_id = known.view_id if known is not None else 0
    best: tuple[Ballot, Proposal] | None = None
    for p in promises.values():
        if p.accepted is None:
            continue
        ballot, proposal = p.accepted
        if proposal.view.prev_id == prev_id and (best is None or ballot > best[0]):
            best = (ballot, proposal)
    if best is not None and _may_be_chosen(best[1], promises, acceptors, expected_votes,
                                           counted):
        return best[1], "reproposed"
    members = tuple(
        Member(node, incarnations[node]) for node in sorted(promises) if node not in leaving
    )
    if not has_quorum((m.node for m in members), potential, expected_votes):
        return None, "no_quorum_for_the_new_view"
    highest = max(
        [min_view_id, prev_id]
        + [p.known.view_id for p in promises.values() if p.known is not None]
        + [p.accepted[1].view.view_id for p in promises.values() if p.accepted is not None]
    )
    cut: tuple[tuple[int, int], ...] = ()
    if known is not None:
        reports = [
            p.availability for p in promises.values()
            if p.installed_id == known.view_id and p.availability is not None
            and p.availability.view_id == known.view_id
        ]
        cut = tuple(sorted(compute_cut(known.nodes, reports).items()))
    tree = () if tree_for is None else tree_for(known, tuple(m.node for m in members))
    view = ViewRecord(highest + 1, members, potential, prev_id, tree)
    return Proposal(view, known, cut), "new"
