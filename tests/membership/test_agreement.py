"""Phase 2's value (``choose_proposal``) and the primary-component arithmetic (``quorum``).

A new proposal takes the promisers minus the leavers, an id above every id seen, the cut
from the promisers that installed the latest known view, and that view as ``prev``. An
accepted proposal that a majority could have accepted is proposed again unchanged (it may
have been decided); the highest ballot's is the only candidate. A proposal with a cut that
is not empty could have been decided only with the vote of a member of the closed view
that held the cut. Promises must come from a
majority of the known view's potential members; the new view needs a majority of the
coordinator's potential members.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from amcast.protocols.membership.agreement import (
    ACCEPT,
    INSTALL,
    PREPARE,
    Round,
    choose_proposal,
    counted_acceptors,
    latest_known,
    may_hold,
    needs_holder,
    reported_holders,
)
from amcast.protocols.membership.durable import DurableState
from amcast.protocols.membership.handlers import said_origin
from amcast.protocols.membership.quorum import has_quorum, needed
from amcast.protocols.wire.membership import (
    Availability,
    Ballot,
    HeldVertex,
    Member,
    Promise,
    Proposal,
    Settings,
    ViewRecord,
)

POTENTIAL = (1, 2, 3, 4, 5)
SETTINGS = Settings("gltoto", None, None, 1 << 20, POTENTIAL)
INCARNATIONS = {1: 11, 2: 12, 3: 13, 4: 14, 5: 15, 6: 16}
V4 = ViewRecord(4, tuple(Member(n, 1) for n in POTENTIAL), POTENTIAL, 3)
V5 = ViewRecord(5, tuple(Member(n, 1) for n in (1, 2, 3, 4)), POTENTIAL, 4)


def promise(known: ViewRecord | None, installed: int = 0,
            accepted: tuple[Ballot, Proposal] | None = None,
            availability: Availability | None = None, *, held: bool = True,
            origin: int = 0) -> Promise:
    if installed == 0 and known is not None:
        installed = known.view_id
    return Promise(Ballot(20, 1), known, installed, accepted, availability, SETTINGS, None,
                   held, origin)


def choose(promises: dict[int, Promise], *, own_known: ViewRecord | None = V5,
           leaving: set[int] | None = None, potential: tuple[int, ...] = POTENTIAL,
           expected_votes: int | None = None, min_view_id: int = 0,
           incarnations: dict[int, int] | None = None,
           ) -> tuple[Proposal | None, str]:
    return choose_proposal(
        promises=promises, own_known=own_known, leaving=leaving or set(),
        incarnations=incarnations or INCARNATIONS, potential=potential,
        expected_votes=expected_votes,
        min_view_id=min_view_id,
    )


def avail(view_id: int, released: dict[int, int], *held: HeldVertex) -> Availability:
    return Availability(view_id, tuple(sorted(released.items())), held)


def successor(view_id: int, nodes: tuple[int, ...], prev: ViewRecord,
              cut: dict[int, int] | None = None) -> Proposal:
    members = tuple(Member(n, INCARNATIONS[n]) for n in nodes)
    cut = cut or dict.fromkeys(prev.nodes, 0)
    return Proposal(ViewRecord(view_id, members, POTENTIAL, prev.view_id), prev,
                    tuple(sorted(cut.items())))


# ----------------------------------------------------------------------------- quorum


def test_quorum_is_a_strict_majority_of_the_potential_members_or_expected_votes() -> None:
    assert [needed(tuple(range(n))) for n in range(1, 7)] == [1, 2, 2, 3, 3, 4]
    assert needed((1, 2, 3), expected_votes=7) == 4
    assert needed((1, 2, 3, 4, 5), expected_votes=1) == 3  # it can only raise the bar
    assert has_quorum({1, 2, 3}, POTENTIAL)
    assert not has_quorum({1, 2}, POTENTIAL)
    assert not has_quorum([1, 1, 2, 2], POTENTIAL), "a node votes once"
    assert not has_quorum({1, 2, 8, 9}, POTENTIAL), "only potential members vote"
    assert not has_quorum({1, 2, 3}, POTENTIAL, expected_votes=7)
    assert has_quorum({1, 2, 3, 4}, POTENTIAL, expected_votes=7)
    assert not has_quorum({1, 2}, (1, 2, 3, 4, 5), expected_votes=3)  # never below the list
    assert has_quorum({1}, (1,)) and not has_quorum(set(), (1,))


# ----------------------------------------------------------------------------- choose


def test_without_a_quorum_of_promises_nothing_is_proposed() -> None:
    proposal, why = choose({1: promise(V5), 2: promise(V5)})
    assert proposal is None and why == "no_quorum_of_promises"
    # promisers that are not potential members of the known view do not count
    proposal, why = choose({1: promise(V5), 2: promise(V5), 6: promise(None), 7: promise(None)})
    assert proposal is None and why == "no_quorum_of_promises"
    # expected votes raise the bar
    proposal, why = choose({n: promise(V5) for n in (1, 2, 3)}, expected_votes=7)
    assert proposal is None and why == "no_quorum_of_promises"


def test_a_promiser_that_is_not_the_acceptor_the_known_view_listed_does_not_count() -> None:
    """V5 lists nodes 1 to 4 at incarnation 1. A promiser whose state began after that
    (origin 13: its file was lost, or it is a second daemon with node 3's id) or an
    earlier incarnation than the listed one does not count toward the majority; it may
    still be a member of the new view. A record begun by then, an id V5 does not list
    and a promise that does not say (origin 0) count."""
    three = {1: promise(V5), 2: promise(V5), 3: promise(V5, origin=13)}
    assert counted_acceptors(three, INCARNATIONS, V5) == {1, 2}
    assert choose(three) == (None, "no_quorum_of_counted_promises")
    earlier = {**INCARNATIONS, 3: 0}
    assert counted_acceptors({n: promise(V5) for n in (1, 2, 3)}, earlier, V5) == {1, 2}
    assert choose({n: promise(V5) for n in (1, 2, 3)}, incarnations=earlier) == (
        None, "no_quorum_of_counted_promises")
    proposal, why = choose({**three, 4: promise(V5)})
    assert why == "new" and proposal is not None and Member(3, 13) in proposal.view.members
    assert counted_acceptors({3: promise(V5, origin=1), 5: promise(V5, origin=4)},
                             INCARNATIONS, V5) == {3, 5}
    # an id V5 does not list, its record begun after V5 was decided (origin above its
    # id): an earlier life of it may have voted for V5's successor
    assert counted_acceptors({5: promise(V5, origin=6)}, INCARNATIONS, V5) == set()
    assert counted_acceptors(three, INCARNATIONS, None) == {1, 2, 3}  # a first view


def test_a_promise_says_its_origin_only_where_it_can_keep_the_vote_from_counting() -> None:
    """``said_origin``: in the first life of a state file; where the file began after
    the view it knows was decided (its origin above the view's id) or that view lists
    this id from before the file began (the origin); where that view lists an
    incarnation within the file's lives that is none of them, another daemon with this
    id (the current incarnation, after the listed one); else 0, the promise older
    daemons read."""
    def listing(incarnation: int, view_id: int = 1_000) -> ViewRecord:
        return ViewRecord(view_id, (Member(1, 1), Member(3, incarnation)), POTENTIAL, 5)
    first = DurableState.first(3, 500)
    assert said_origin(first) == 500
    assert said_origin(first.restarted(600)) == 0  # a restart of a file begun at 500
    assert said_origin(replace(first.restarted(600), known=listing(1))) == 500  # before it
    assert said_origin(replace(first.restarted(600), known=V5)) == 500  # before it too
    unlisted = ViewRecord(1_000, (Member(1, 1),), POTENTIAL, 5)
    assert said_origin(replace(first.restarted(600), known=unlisted)) == 0
    assert said_origin(replace(first.restarted(600), known=replace(unlisted, view_id=400))) \
        == 500  # begun after a view without this id was decided
    lives = first.restarted(600).restarted(700)  # lives 500, 600, 700
    assert said_origin(replace(lives, known=listing(700))) == 0  # this life
    assert said_origin(replace(lives, known=listing(600))) == 0  # an earlier one
    assert said_origin(replace(lives, known=listing(650))) == 700  # another daemon's
    assert said_origin(replace(lives, known=listing(800))) == 0  # later: not counted anyway
    assert said_origin(replace(lives, known=listing(700, view_id=400))) == 0  # listed
    assert said_origin(DurableState(3, incarnation=7, known=V5)) == 0  # an older file
    older = DurableState(3, incarnation=7, known=listing(6)).restarted(9)  # lives (9,)
    assert said_origin(older) == 0  # before its lives: not known, counted as ever
    assert said_origin(replace(older.restarted(12), known=listing(10))) == 12


def test_a_promiser_that_does_not_count_is_one_not_heard_from_for_reproposals() -> None:
    """Its state may have lost a vote: an accepted proposal that the acceptor with its
    id may have voted for is proposed again."""
    accepted = successor(7, (1, 2, 3, 4), V5, {1: 9, 2: 9, 3: 9, 4: 9})
    promises = {1: promise(V5, accepted=(Ballot(15, 2), accepted)), 2: promise(V5),
                3: promise(V5), 4: promise(V5)}
    assert choose(promises)[1] == "new"  # support: node 1 and node 5: 2 of 5
    promises[4] = promise(V5, origin=14)  # support: nodes 1, 4 and 5
    assert choose(promises) == (accepted, "reproposed")


def test_a_new_proposal() -> None:
    old = successor(9, (1, 2), V4)  # accepted once for an older instance: only its id counts
    promises = {
        1: promise(V5, availability=avail(5, {1: 4, 2: 2, 3: 0, 4: 1},
                                          HeldVertex(3, 1, ((1, 4),)))),
        2: promise(V5, availability=avail(5, {1: 3, 2: 6, 3: 0, 4: 1})),
        # knows V5 was decided but never installed it: its availability is V4's, ignored
        3: promise(V5, installed=4, accepted=(Ballot(3, 3), old),
                   availability=avail(4, {1: 50, 2: 50, 3: 50, 4: 50, 5: 50})),
        4: promise(V5, availability=None),
        6: promise(None),  # a joiner
    }
    proposal, why = choose(promises, own_known=V4, leaving={4}, min_view_id=7)
    assert why == "new"
    assert proposal is not None
    assert proposal.prev == V5
    assert proposal.view.prev_id == 5
    assert proposal.view.view_id == 10  # above the accepted 9, min_view_id 7 and known 5
    assert proposal.view.members == (Member(1, 11), Member(2, 12), Member(3, 13), Member(6, 16))
    assert proposal.view.potential == POTENTIAL
    assert proposal.cut == ((1, 4), (2, 6), (3, 1), (4, 1))


def test_new_view_id_is_above_every_known_view_and_min_view_id() -> None:
    promises = {n: promise(V5) for n in (1, 2, 3)}
    later = ViewRecord(8, V5.members, POTENTIAL, 5)
    assert choose(promises)[0].view.view_id == 6  # type: ignore[union-attr]
    assert choose(promises, min_view_id=12)[0].view.view_id == 13  # type: ignore[union-attr]
    promises[2] = promise(later)  # a promiser knows view 8 was decided: prev is view 8
    proposal, _ = choose(promises)
    assert proposal is not None and proposal.prev == later and proposal.view.view_id == 9
    # the cut covers view 8's members; promisers that installed view 5 only do not feed it
    assert proposal.cut == tuple((n, 0) for n in later.nodes)


def test_the_first_view() -> None:
    promises = {n: promise(None) for n in (1, 2, 3)}
    proposal, why = choose(promises, own_known=None, min_view_id=41)
    assert why == "new" and proposal is not None
    assert proposal.prev is None and proposal.cut == ()
    assert proposal.view.view_id == 42 and proposal.view.prev_id == 0
    assert proposal.view.nodes == (1, 2, 3)


def test_an_accepted_proposal_a_majority_could_have_accepted_is_proposed_again() -> None:
    accepted = successor(7, (1, 2, 3, 4), V5, {1: 9, 2: 9, 3: 9, 4: 9})
    promises = {
        1: promise(V5, accepted=(Ballot(15, 2), accepted)),
        2: promise(V5),
        3: promise(V5),
    }
    # support: node 1 reports it, nodes 4 and 5 were not heard from: 3 of 5
    proposal, why = choose(promises, leaving={1}, min_view_id=30)
    assert why == "reproposed"
    assert proposal is accepted  # unchanged: members, id and cut


def test_an_accepted_proposal_that_could_not_have_been_chosen_is_ignored() -> None:
    accepted = successor(7, (1, 2, 3, 4), V5, {1: 9, 2: 9, 3: 9, 4: 9})
    promises = {
        1: promise(V5, accepted=(Ballot(15, 2), accepted)),
        2: promise(V5),
        3: promise(V5),
        4: promise(V5),
    }
    # support: node 1, plus node 5 not heard from: 2 of 5
    proposal, why = choose(promises)
    assert why == "new" and proposal is not None and proposal != accepted
    assert proposal.view.view_id == 8  # still above the id it saw
    assert proposal.view.nodes == (1, 2, 3, 4)


def test_an_accepted_proposal_for_another_instance_is_not_reproposed() -> None:
    stale = successor(5, (1, 2, 3), V4)  # succeeds view 4; the latest known view is 5
    promises = {n: promise(V5, accepted=(Ballot(15, 2), stale)) for n in (1, 2, 3)}
    proposal, why = choose(promises)
    assert why == "new" and proposal is not None and proposal.prev == V5
    assert proposal.view.view_id == 6


def test_the_highest_ballot_wins() -> None:
    low = successor(7, (1, 2, 3), V5)
    high = successor(7, (1, 2, 3, 4), V5)
    promises = {
        1: promise(V5, accepted=(Ballot(14, 1), low)),
        2: promise(V5, accepted=(Ballot(15, 2), high)),
        3: promise(V5, accepted=(Ballot(14, 1), low)),
    }
    proposal, why = choose(promises)
    assert (proposal, why) == (high, "reproposed")
    # the same promises listed in another order
    proposal, why = choose(dict(reversed(promises.items())))
    assert (proposal, why) == (high, "reproposed")


def test_a_lower_ballot_is_not_chosen_when_the_highest_cannot_have_been() -> None:
    low = successor(7, (1, 2, 3), V5)
    high = successor(8, (1, 2, 3, 4), V5)
    promises = {
        1: promise(V5, accepted=(Ballot(14, 1), low)),
        2: promise(V5, accepted=(Ballot(15, 2), high)),
        3: promise(V5, accepted=(Ballot(14, 1), low)),
        4: promise(V5, accepted=(Ballot(14, 1), low)),
    }
    # high: support {2, 5} (not a majority). Low could have been chosen at ballot 14 only
    # if every later proposal carried it, and ballot 15 proposed high: so it was not.
    proposal, why = choose(promises)
    assert why == "new" and proposal not in (low, high)
    assert proposal is not None and proposal.view.view_id == 9


# A successor of V5 with a cut that is not empty: deciding it takes the vote of a
# *holder*, a member of V5 and view 7 that had every vertex up to the cut (a daemon killed
# mid-flush may have taken vertices of the cut with it; its restart and members
# excluded from the new view vote without holding it: membership sweep seed 310001).
CUT = Proposal(ViewRecord(7, (Member(1, 1), Member(2, 1)), POTENTIAL, 5), V5,
               ((1, 9), (2, 9), (3, 9), (4, 9)))


def test_a_cut_that_is_not_empty_needs_a_holder_and_only_members_of_the_view_hold() -> None:
    assert needs_holder(CUT)
    assert not needs_holder(successor(7, (1, 2), V5))  # a cut of zeros: nothing to hold
    # nobody carries V5 on (restarts only): the cut came from leavers, who deliver it
    assert not needs_holder(successor(7, (1, 2), V5, {1: 9, 2: 9, 3: 9, 4: 9}))
    assert not needs_holder(Proposal(ViewRecord(1, (Member(1, 1),), POTENTIAL, 0), None, ()))
    assert may_hold(CUT, Member(1, 1)) and may_hold(CUT, Member(2, 1))
    assert not may_hold(CUT, Member(3, 1))  # excluded from view 7 (or leaving): no flush
    assert not may_hold(CUT, Member(1, 2))  # a later incarnation holds nothing of V5
    assert not may_hold(CUT, Member(5, 1))  # not a member of V5
    vote = (Ballot(15, 1), CUT)
    promises = {1: promise(V5, accepted=vote, held=False), 2: promise(V5, accepted=vote),
                3: promise(V5, accepted=vote)}  # node 3 is no member of view 7: not its word
    assert reported_holders(CUT, promises) == {2}
    promises[2] = promise(V5, accepted=(Ballot(15, 1), successor(7, (1, 2), V5)))
    assert reported_holders(CUT, promises) == set()


def test_a_proposal_only_acceptors_not_holding_its_cut_voted_for_is_not_proposed_again(
) -> None:
    vote = (Ballot(15, 1), CUT)
    promises = {1: promise(V5), 2: promise(V5), 3: promise(V5, accepted=vote, held=False),
                4: promise(V5, accepted=vote, held=False)}
    # a majority could have voted for it (3, 4, and 5 unheard), but no holder did: it
    # cannot have been decided
    proposal, why = choose(promises)
    assert why == "new" and proposal is not None and proposal != CUT
    assert proposal.view.nodes == (1, 2, 3, 4) and proposal.view.view_id == 8
    # an old daemon's promise does not say whether its vote held the cut: read as held
    promises[2] = promise(V5, accepted=vote)
    assert choose(promises) == (CUT, "reproposed")
    # a member of V5 not in view 7, unheard and for good (crashed), changes nothing
    promises = {1: promise(V5), 2: promise(V5), 3: promise(V5, accepted=vote, held=False)}
    assert choose(promises)[1] == "new"


def test_a_majority_of_votes_decides_only_with_a_holders_among_them() -> None:
    r = Round(Ballot(20, 1), {n: Member(n, 1) for n in (1, 3, 4)}, 0.0, 1.0, "test",
              phase=ACCEPT, proposal=CUT, acceptors=POTENTIAL)
    r.accepted = {1, 3, 4}  # a majority of five, none holding the cut
    assert not r.decided(None)
    r.holders = {1}
    assert r.decided(None)
    r.accepted = {1, 3}
    assert not r.decided(None)  # a holder, but no majority
    empty = Round(Ballot(20, 1), {}, 0.0, 1.0, "test", phase=ACCEPT,
                  proposal=successor(7, (1, 2, 3), V5), acceptors=POTENTIAL, accepted={1, 3, 4})
    assert empty.decided(None)  # a cut of zeros needs no holder
    assert not empty.decided(7)  # expected votes still raise the bar
    empty.counted = {1, 3}  # node 4's vote does not count (``counted_acceptors``)
    assert not empty.decided(None)


def test_a_proposal_a_holder_did_or_may_have_voted_for_is_proposed_again() -> None:
    vote = (Ballot(15, 1), CUT)
    promises = {1: promise(V5), 2: promise(V5, accepted=vote),
                3: promise(V5, accepted=vote, held=False)}
    assert choose(promises) == (CUT, "reproposed")
    # node 2, a member of both views, was not heard from: it may have voted as a holder
    promises = {1: promise(V5), 3: promise(V5, accepted=vote, held=False),
                4: promise(V5, accepted=vote, held=False)}
    assert choose(promises) == (CUT, "reproposed")
    # a holder's vote alone is no majority
    promises = {1: promise(V5, accepted=vote), 2: promise(V5), 3: promise(V5), 4: promise(V5)}
    assert choose(promises)[1] == "new"


def test_the_new_view_needs_a_majority_of_the_coordinators_potential_members() -> None:
    promises = {n: promise(V5) for n in (1, 2, 3)}
    proposal, why = choose(promises, leaving={3})
    assert proposal is None and why == "no_quorum_for_the_new_view"
    # a quorum of the known view's potential members (1, 2, 3) promised, but the
    # coordinator's list grew to seven: members 1 and 2 are no majority of it
    small = ViewRecord(5, tuple(Member(n, 1) for n in (1, 2, 3)), (1, 2, 3), 4)
    promises = {1: promise(small), 2: promise(small)}
    proposal, why = choose(promises, own_known=small, potential=(1, 2, 3, 4, 5, 6, 7))
    assert proposal is None and why == "no_quorum_for_the_new_view"
    proposal, why = choose(promises, own_known=small, potential=(1, 2, 3))
    assert why == "new" and proposal is not None and proposal.view.potential == (1, 2, 3)
    # expected votes apply to the new view too
    promises = {n: promise(V5) for n in (1, 2, 3, 4)}
    proposal, why = choose(promises, leaving={4}, expected_votes=6)
    assert proposal is None and why == "no_quorum_for_the_new_view"


def test_latest_known_and_round_bookkeeping() -> None:
    later = ViewRecord(8, V5.members, POTENTIAL, 5)
    assert latest_known({}, None) is None
    assert latest_known({1: promise(None)}, V4) == V4
    assert latest_known({1: promise(V5), 2: promise(later), 3: promise(None)}, V4) == later
    r = Round(Ballot(3, 1), {n: Member(n, 1) for n in (1, 2, 3)}, 0.0, 1.0, "test")
    assert r.phase == PREPARE and r.waiting_for() == {1, 2, 3}
    r.promises = {1: promise(V5), 2: promise(V5)}
    assert r.waiting_for() == {3}
    r.phase = ACCEPT
    r.accepted = {1}
    assert r.waiting_for() == {2}
    r.phase = INSTALL
    r.proposal = successor(6, (1, 2), V5)
    r.heard_in_view = {1}
    assert r.waiting_for() == {2}


@pytest.mark.parametrize("leaving", [set(), {2}, {4}])
def test_the_proposal_is_independent_of_the_order_of_promises(leaving: set[int]) -> None:
    promises = {
        3: promise(V5, availability=avail(5, {1: 1, 2: 2, 3: 3, 4: 4})),
        4: promise(V5),
        1: promise(V5, availability=avail(5, {1: 4, 2: 1, 3: 0, 4: 0},
                                          HeldVertex(4, 5, ((1, 4),)))),
        2: promise(V5, availability=avail(5, {1: 0, 2: 7, 3: 0, 4: 0})),
    }
    a = choose(promises, leaving=leaving)
    b = choose(dict(sorted(promises.items())), leaving=leaving)
    assert a == b
    assert a[0] is not None and a[0].cut == ((1, 4), (2, 7), (3, 3), (4, 5))
    assert a[0].view.nodes == tuple(sorted({1, 2, 3, 4} - leaving))
