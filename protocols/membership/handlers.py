"""The view agreement's messages, as a member of the group handles them (``agreement``
says the protocol; ``layer`` coordinates the member's phases around it).

Each handler takes the ``MembershipLayer`` it works for: they read and update its
durable acceptor state, its votes waiting for a cut or for its view's end
(``accept_wait``, ``history_wait``) and, where they move the member on, call back into
it (``MembershipLayer.on_decided``, ``check_waits``, ``become``), so that every change
of phase stays in the layer. Kept apart so that the layer reads as the member's life
(views, flushes, joins, leaves) and this module as the Paxos roles:

- acceptor: ``on_prepare``/``promise`` (freeze and promise), ``on_accept``/``accept``
  (repair up to the cut, then vote), ``vote_after_history`` (vote once our view's end
  is known), ``vote`` (cast a vote durably);
- coordinator: ``on_promise``, ``on_reject``, ``on_accepted`` (its ``Round``);
- learner: ``on_install``, ``note_lagging``/``resend_history`` (tell a promiser the
  decision it missed).
"""

from __future__ import annotations

from typing import Protocol

from ..session import ViewSession
from ..wire.membership import (
    Accept,
    Accepted,
    Ballot,
    Install,
    Member,
    Message,
    Position,
    Prepare,
    Promise,
    Proposal,
    Reject,
    Settings,
    ViewRecord,
)
from .agreement import ACCEPT, PREPARE, Round, may_hold, needs_holder
from .config import MembershipConfig
from .durable import DurableState
from .phase import Closing, Phase


class MembershipLayer(Protocol):
    """What these handlers read, update and call of the ``layer.MembershipLayer`` they
    act on: its public surface for them. Not the class itself: the layer imports this
    module, and an import back (even under ``TYPE_CHECKING``) would hide a cycle. The
    compiled build (mypyc) checks that the layer satisfies it."""

    node_id: int
    me: Member
    cfg: MembershipConfig
    settings: Settings
    durable: DurableState
    view: ViewRecord | None
    session: ViewSession | None
    phase: Phase
    round: Round | None
    history: dict[int, tuple[Ballot, Proposal]]
    accept_wait: tuple[Ballot, Proposal, float, bool] | None
    history_wait: tuple[Ballot, Proposal, float, int] | None
    lagging: tuple[Ballot, dict[int, int]]
    promised_here: Ballot
    promised_at: float | None
    reported_closed: int | None

    @property
    def last_delivered(self) -> Position | None: ...
    def send_message(self, msg: Message) -> None: ...
    def update_durable(self, **changes: object) -> None: ...
    def learn(self, view: ViewRecord | None) -> None: ...
    def become(self, phase: Phase, closing: Closing | None = None) -> None: ...
    def refuse(self, node: int, incarnation: int, reason: str, detail: str,
               now: float) -> None: ...
    def on_decided(self, ballot: Ballot, proposal: Proposal, now: float) -> None: ...
    def check_waits(self, now: float) -> None: ...
    def to_accept(self, now: float) -> None: ...
    def progress_accept(self, now: float) -> None: ...
    def abort_round(self, now: float, why: str) -> None: ...

ACCEPT_VOTE_AFTER = 0.75
"""A member that cannot complete the cut of a proposal a holder voted for votes all the
same after this share of ``flush_timeout``, the coordinator's deadline for votes
(``MembershipLayer._vote_unheld``); a member that does not know how its view ended
votes after it too (``vote_after_history``)."""


def on_prepare(
    layer: MembershipLayer, sender: int, incarnation: int, msg: Prepare, now: float
) -> None:
    """A candidate of the ballot (this incarnation) promises; a member that left has
    nothing to promise. The coordinator keeps its own promise (``MembershipLayer._start_round``)
    and sends it only to be rejected."""
    mine = next((m for m in msg.candidates if m.node == layer.node_id), None)
    if mine is None or mine.incarnation != layer.me.incarnation or layer.phase is Phase.LEFT:
        return
    layer.learn(msg.known)
    answer = promise(layer, msg.ballot, now)
    if isinstance(answer, Reject) or msg.ballot.node != layer.node_id:
        layer.send_message(answer)


def promise(layer: MembershipLayer, ballot: Ballot, now: float) -> Promise | Reject:
    """Promise ``ballot`` durably and freeze the view (``STEADY`` -> ``FROZEN``): no own
    vertex and nothing released past what we hold, so the cut computed from the promises
    covers all we delivered. The promise carries what the coordinator needs to choose
    a proposal (``agreement.choose_proposal``)."""
    d = layer.durable
    if ballot < d.promised:
        return Reject(ballot, d.promised, "stale_ballot", "")
    if ballot != d.promised:
        layer.update_durable(promised=ballot)
    if ballot > layer.promised_here:
        layer.promised_here = ballot
    if layer.session is not None and not layer.session.finished:
        if layer.promised_at is None:
            layer.promised_at = now
            if layer.phase is Phase.STEADY:
                layer.become(Phase.FROZEN)
        layer.session.freeze()
    availability = None
    if layer.session is not None and layer.view is not None:
        availability = layer.session.reliable.availability(layer.cfg.max_held_report)
    return Promise(ballot, d.known, layer.view.view_id if layer.view else 0, d.accepted,
                   availability, layer.settings, layer.last_delivered, d.accepted_held,
                   said_origin(d))


def said_origin(d: DurableState, known: ViewRecord | None = None) -> int:
    """The origin a promise says (``Promise.origin``), where it can keep the vote from
    counting (``agreement.counted_acceptors``): in the first life of the record; where
    the record began after the latest view it knows, which does not list this id, was
    decided (its origin above that view's id), or that view lists this id at an
    incarnation from before the record began; and where that view lists an incarnation
    in the span of the record's ``lives`` that is none of them (another daemon with this
    id, taken in while this one was away or down): then the current incarnation, after
    the listed one. Elsewhere 0,
    the promise older daemons read. ``known``: the view to judge by (the coordinator's
    own promise, against the latest view the promises know); default the record's."""
    if not d.origin and not d.lives:
        return 0
    if d.origin == d.incarnation:
        return d.origin
    known = d.known if known is None else known
    listed = known.member(d.node_id) if known is not None else None
    if listed is None:  # begun after a view without this id was decided?
        return d.origin if known is not None and d.origin > known.view_id else 0
    if listed.incarnation == d.incarnation:
        return 0
    if listed.incarnation < d.origin:
        return d.origin
    if d.lives and d.lives[0] <= listed.incarnation < d.incarnation \
            and listed.incarnation not in d.lives:
        return d.incarnation
    return 0


def on_promise(
    layer: MembershipLayer, sender: int, incarnation: int, msg: Promise, now: float
) -> None:
    """Coordinator: a promise for our round, from the incarnation we asked; once all
    are in, propose (the deadline proposes with those in, ``_coordinate``)."""
    note_lagging(layer, sender, msg)
    r = layer.round
    if r is None or r.phase != PREPARE or msg.ballot != r.ballot:
        return
    cand = r.candidates.get(sender)
    if cand is None or cand.incarnation != incarnation:
        return
    if layer.settings.differences(msg.settings):
        layer.refuse(sender, incarnation, "config_mismatch",
                      "; ".join(layer.settings.differences(msg.settings)), now)
        return
    layer.learn(msg.known)
    r.promises[sender] = msg
    if not r.waiting_for():
        layer.to_accept(now)


def on_reject(
    layer: MembershipLayer, sender: int, incarnation: int, msg: Reject, now: float
) -> None:
    """Coordinator: our ballot is stale; the next round numbers above the one promised."""
    r = layer.round
    if r is None or msg.ballot != r.ballot:
        return
    layer.update_durable(max_view_id=max(layer.durable.max_view_id, msg.promised.number))
    layer.abort_round(now, f"rejected by {sender}: {msg.reason}")


def on_accept(
    layer: MembershipLayer, sender: int, incarnation: int, msg: Accept, now: float
) -> None:
    """Acceptor: the decisions lagging promisers missed go first, then the vote."""
    resend_history(layer, msg.ballot)
    accept(layer, msg.ballot, msg.proposal, now, msg.holder_voted)


def resend_history(layer: MembershipLayer, ballot: Ballot) -> None:
    """With each ``ACCEPT`` of ``ballot`` (the coordinator's, before it; a member's,
    on receipt): again the decisions its lagging promisers missed (``note_lagging``),
    in case a copy was lost."""
    noted, lagging = layer.lagging
    if noted == ballot:
        for view_id in sorted(set(lagging.values())):
            entry = layer.history.get(view_id)
            if entry is not None:
                layer.send_message(Install(*entry))


def note_lagging(layer: MembershipLayer, sender: int, msg: Promise) -> None:
    """A promiser (the coordinator too: it sends its own promise when it lags) last
    installed a view whose end we know and it does not: send it the decision now
    and with every ``ACCEPT`` of the ballot (``resend_history``), so it learns the
    cut of its view before it installs the next one (``vote_after_history``). With
    it, it tells its clients exactly which of its own messages the primary component
    delivered and which not (``Node._view_closed``); without it, all of them would
    be of unknown outcome. Every member that knows does so: the coordinator may be
    the one that lags."""
    entry = layer.history.get(msg.installed_id)
    if entry is None:
        return
    ballot, lagging = layer.lagging
    if ballot != msg.ballot:
        if msg.ballot < ballot:
            return
        lagging = {}
        layer.lagging = (msg.ballot, lagging)
    if lagging.get(sender) != msg.installed_id:
        lagging[sender] = msg.installed_id
        layer.send_message(Install(*entry))


def accept(layer: MembershipLayer, ballot: Ballot, proposal: Proposal, now: float,
           holder_voted: bool = False) -> None:
    """Vote for ``proposal`` unless a later ballot was promised: a member that closes
    its view with it repairs up to the cut first (``accept_wait``, voting from
    ``MembershipLayer.check_waits`` as a holder); one taken in from another view votes
    once it knows how its view ended (``vote_after_history``); anyone else at once."""
    d = layer.durable
    if ballot < d.promised:
        layer.send_message(Reject(ballot, d.promised, "stale_ballot", ""))
        return
    layer.learn(proposal.prev)
    layer.update_durable(promised=ballot,
                          max_view_id=max(d.max_view_id, proposal.view.view_id))
    member = proposal.view.member(layer.node_id)
    closing = (member is not None and member.incarnation == layer.me.incarnation
               and layer.session is not None and proposal.prev is not None
               and layer.session.view_id == proposal.prev.view_id)
    if closing:
        assert layer.session is not None
        if layer.session.reliable.exceeds(dict(proposal.cut)):
            # a vote, not a holder's; we will not install it (``on_decided``)
            vote(layer, ballot, proposal, held=False)
            return
        layer.session.close_at(dict(proposal.cut), now)
        waiting = layer.accept_wait
        if waiting is not None and waiting[:2] == (ballot, proposal):
            # the coordinator repeats its ACCEPT, or sends its flagged copy: the wait
            # goes on, and a holder's vote once heard of stays heard of
            since, holder_voted = waiting[2], holder_voted or waiting[3]
        else:
            since = now
        layer.accept_wait = (ballot, proposal, since, holder_voted)
        layer.check_waits(now)
    elif member is not None and member.incarnation == layer.me.incarnation:
        vote_after_history(layer, ballot, proposal, now)
    else:
        vote(layer, ballot, proposal, held=False)


def ending_unknown(layer: MembershipLayer) -> int | None:
    """Our view, when we have not learned how it ended (we are taken into a view
    that does not succeed it: we missed the decision that closed it)."""
    session = layer.session
    if session is None or session.finished:
        return None
    view_id = session.view_id
    if view_id in layer.history or layer.reported_closed == view_id:
        return None
    return view_id


def vote_after_history(
    layer: MembershipLayer, ballot: Ballot, proposal: Proposal, now: float
) -> None:
    """Vote for a view that does not succeed ours once we know how ours ended: those
    who know send the decision (``note_lagging``, ``resend_history``). Installed
    before that, with a gap, our view's end would stay unknown, and every own message
    of it not delivered here would be reported in doubt, delivered by the others or
    not. If nobody sends it within ``ACCEPT_VOTE_AFTER`` of the flush timeout (no
    member holds it any more), we vote all the same."""
    unknown = ending_unknown(layer)
    waiting = layer.history_wait
    if unknown is None or (proposal.prev is not None
                           and proposal.prev.view_id == unknown):
        layer.history_wait = None
        vote(layer, ballot, proposal, held=False)
        return
    since = waiting[2] if waiting is not None and waiting[:2] == (ballot, proposal) else now
    layer.history_wait = (ballot, proposal, since, unknown)
    check_history_wait(layer, now)


def check_history_wait(layer: MembershipLayer, now: float) -> None:
    """The held vote goes once our view's end is known, or after ``ACCEPT_VOTE_AFTER``."""
    waiting = layer.history_wait
    if waiting is None:
        return
    ballot, proposal, since, _ = waiting
    if (ending_unknown(layer) is None
            or now - since >= ACCEPT_VOTE_AFTER * layer.cfg.flush_timeout):
        layer.history_wait = None
        vote(layer, ballot, proposal, held=False)
        if layer.round is not None and layer.round.ballot == ballot:
            layer.progress_accept(now)


def vote(layer: MembershipLayer, ballot: Ballot, proposal: Proposal, *, held: bool) -> None:
    """Vote for ``proposal`` (``held``: as a holder of its cut, ``needs_holder``): the
    vote is recorded durably when it is cast, since only cast votes can make it
    decided. Once this node held a proposal's cut, its later votes for that same
    proposal say so too (the record is what later rounds judge it by)."""
    d = layer.durable
    if d.promised > ballot:
        return  # promised a later ballot meanwhile: this vote may not be cast any more
    needed = needs_holder(proposal)  # no holder asked: every vote counts as one
    held = held or not needed or (d.accepted is not None and d.accepted[1] == proposal
                                  and d.accepted_held)
    layer.update_durable(accepted=(ballot, proposal), accepted_held=held)
    if ballot.node == layer.node_id:
        r = layer.round
        if r is not None and r.ballot == ballot and r.phase == ACCEPT:
            r.accepted.add(layer.node_id)
            if held and may_hold(proposal, layer.me):
                r.holders.add(layer.node_id)
    else:  # said only where it matters and differs from what is presumed (older
        # daemons drop a vote that says)
        said = held if needed and held != may_hold(proposal, layer.me) else None
        layer.send_message(Accepted(ballot, proposal.view.view_id, said))


def on_accepted(
    layer: MembershipLayer, sender: int, incarnation: int, msg: Accepted, now: float
) -> None:
    """Coordinator: a promiser's vote for our proposal (and whether it holds the cut)."""
    r = layer.round
    if r is None or r.phase != ACCEPT or msg.ballot != r.ballot:
        return
    assert r.proposal is not None
    if sender in r.promises:
        r.accepted.add(sender)
        # a vote that does not say (older daemons) counts when ``may_hold`` does
        if msg.held is not False and may_hold(r.proposal, Member(sender, incarnation)):
            r.holders.add(sender)
    layer.progress_accept(now)


def on_install(
    layer: MembershipLayer, sender: int, incarnation: int, msg: Install, now: float
) -> None:
    """Learner: a decision (the layer moves the phase on, ``MembershipLayer.on_decided``)."""
    layer.on_decided(msg.ballot, msg.proposal, now)
