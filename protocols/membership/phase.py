"""The phases of a member's life in the membership layer, and the moves between them.

One value (``Phase``) says where a member stands with respect to its view, so that the
layer asks it instead of reading a combination of optional fields; ``TRANSITIONS`` lists
every move the layer makes, and ``MembershipLayer.become`` is the only place that
changes the phase (it checks the move against this table). The table is the one the
layer's code had, made explicit: nothing here adds a move or forbids one it made.

What is *not* a phase, and why:

- A vote waiting for the cut (``accept_wait``) or for our view's end
  (``history_wait``) belongs to a ballot, not to the member: it can be pending while the
  member is frozen, closing its view or outside any primary view, and either can be
  pending with the other (two ballots). They stay data beside the phase.
- Leaving gracefully (``MembershipLayer.leaving``) is an intent that holds across
  phases: a leaver promises, votes and may even be taken into a view like any member
  until a view without it is decided (``LEAVING``).
- When the member froze for a ballot (``promised_at``) outlives ``FROZEN``: a frozen
  member that goes on to close its view keeps it (the flush's duration counts from it,
  and a flush stuck for long is given up by it), and a member outside any primary view
  may promise too.
- The coordinator's ``Round`` has phases of its own (``agreement``: prepare, accept,
  install); a member may run one in any phase but ``LEFT``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ..wire.membership import Ballot, Proposal


class Phase(enum.Enum):
    JOINING = "joining"
    """No view installed yet: the member announces itself (``JOIN``) until a primary
    view takes it in."""
    STEADY = "steady"
    """In a primary view, ordering: the only phase that makes own vertices."""
    FROZEN = "frozen"
    """In a primary view it froze for a ballot (a promise): no own vertex, nothing
    released past what it holds, until the next view is installed."""
    INSTALLING = "installing"
    """A view succeeding ours, with us in it, was decided: our view is closed at the
    decided cut, and the member repairs up to it before it installs the successor
    (``Closing``)."""
    LEAVING = "leaving"
    """A graceful leaver that a view without it was decided for: it closes its last view
    at the decided cut, as its members do, before it goes (``Closing``)."""
    ABANDONED = "abandoned"
    """It gave its view up (no quorum, excluded, paused, a stuck flush): it delivers
    nothing more of it and announces itself again. The view's session still repairs,
    since the member may yet be flushed into the successor (``REJOINING``)."""
    REJOINING = "rejoining"
    """Out of its view, it learned that a successor with it was decided that closes the
    abandoned view: as ``INSTALLING``, but still outside a primary view meanwhile (it goes
    on announcing itself, and giving the view up again is a no-op)."""
    LEFT = "left"
    """Left gracefully and out of the view: the end (the node stops)."""


PRIMARY = frozenset({Phase.STEADY, Phase.FROZEN, Phase.INSTALLING, Phase.LEAVING})
"""In a primary view it has not given up: it delivers ordered messages (or its flush)."""
CLOSING = frozenset({Phase.INSTALLING, Phase.REJOINING, Phase.LEAVING})
"""Completing a view at a decided cut (``MembershipLayer.closing`` is set)."""
INSTALL_PENDING = frozenset({Phase.INSTALLING, Phase.REJOINING})
"""Completing a view to install the decided successor."""
ANNOUNCING = frozenset({Phase.JOINING, Phase.ABANDONED, Phase.REJOINING})
"""Outside any primary view, not gone: it sends ``JOIN`` every heartbeat interval."""

_INSTALLED = {Phase.STEADY, Phase.FROZEN}
"""Where an installation leads: frozen when a later ballot was promised meanwhile."""

TRANSITIONS: dict[Phase, frozenset[Phase]] = {
    Phase.JOINING: frozenset(_INSTALLED),
    Phase.STEADY: frozenset(_INSTALLED | {Phase.INSTALLING, Phase.LEAVING, Phase.ABANDONED,
                                          Phase.LEFT}),
    Phase.FROZEN: frozenset(_INSTALLED | {Phase.INSTALLING, Phase.LEAVING, Phase.ABANDONED,
                                          Phase.LEFT}),
    # a second decision closing the same view (a repeat of the first) or a leave decided
    # meanwhile replace the closing; a later view decided meanwhile is installed at once
    Phase.INSTALLING: frozenset(_INSTALLED | {Phase.INSTALLING, Phase.LEAVING,
                                              Phase.ABANDONED, Phase.LEFT}),
    Phase.LEAVING: frozenset(_INSTALLED | {Phase.INSTALLING, Phase.ABANDONED, Phase.LEFT}),
    Phase.ABANDONED: frozenset(_INSTALLED | {Phase.REJOINING}),
    Phase.REJOINING: frozenset(_INSTALLED | {Phase.REJOINING, Phase.ABANDONED}),
    Phase.LEFT: frozenset(),
}
"""Every move the layer makes, by the phase it leaves:

- ``JOINING`` -> ``STEADY``/``FROZEN``: a view with us is decided (``_install``).
- ``STEADY`` -> ``FROZEN``: a promise (``_promise``).
- ``STEADY``/``FROZEN`` -> ``INSTALLING``: the successor with us is decided
  (``on_decided``); -> ``LEAVING``: a leaver's successor without it (``_excluded_by``);
  -> ``ABANDONED``: no quorum, excluded, paused, a stuck flush (``_lose_view``);
  -> ``LEFT``: a leaver excluded where it cannot close the view at the cut.
- ``INSTALLING``/``REJOINING`` -> ``STEADY``/``FROZEN``: the cut is held
  (``check_waits``) or a later view is decided; -> ``ABANDONED``: the cut cannot be
  completed here within ``4 * flush_timeout``.
- ``LEAVING`` -> ``LEFT``: the cut is held and the flush done (``_finish_leaving``), or
  it cannot be within ``4 * flush_timeout``.
- ``ABANDONED`` -> ``REJOINING``: the successor with us that closes the abandoned view is
  decided; -> ``STEADY``/``FROZEN``: any later view with us is.
- Any phase of ``PRIMARY`` -> ``STEADY``/``FROZEN``: a later view with us is decided
  that does not succeed ours (we missed a decision: installed with no flush).
- ``LEFT``: none.
"""


@dataclass(frozen=True, slots=True)
class Closing:
    """The decision a ``CLOSING`` member completes its view at."""

    proposal: Proposal
    since: float
    """When the decision came (the member gives up after ``4 * flush_timeout``)."""
    ballot: Ballot | None = None
    """The ballot that decided it, installing (``None``: leaving)."""


class TransitionError(RuntimeError):
    """A move ``TRANSITIONS`` does not list: a bug in the layer."""
