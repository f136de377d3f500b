"""What a daemon must remember across a restart: incarnation, ballots, the latest view.

View ids never repeat, not even across a restart of the whole cluster (docs/architecture.md,
layer 4), and an acceptor that promised or accepted must not forget it (or two
coordinators could decide different successors of one view, Paxos' acceptor rule).
This record is small and changes only at view changes; the Node hands it out
(``Node.state_to_persist``) and the caller writes it durably (atomically, fsynced)
before sending what the Node produced in the same step.

``incarnation`` distinguishes a restarted daemon from its previous life: at start it is
``max(previous + 1, floor)``, where the caller's floor is the wall clock in
milliseconds, so a daemon whose state file was lost still starts with a fresh, larger
incarnation (and proposes view ids above it). ``origin`` is the incarnation the record
began with (``first``): a daemon whose state began after a view that listed its id has
lost what an earlier life of that id may have promised in it (or is a second daemon
with that id), so its vote does not count toward deciding that view's successor
(``agreement.counted_acceptors``). ``lives`` are the incarnations the record started
with lately (the last ``MAX_LIVES``): a view that lists this id at an incarnation in
their span that is none of them listed another daemon (``handlers.said_origin``). The
encoding is msgpack with a version field (a record of an older release, without
``origin`` and ``lives``, reads as origin 0 and no lives: it counts as ever); ``decode``
refuses anything else with ``ConfigurationError``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import pairwise
from typing import Any

import msgpack

from ..errors import ConfigurationError, DecodeError
from ..wire.fields import read_int
from ..wire.limits import MAX_INCARNATION, MAX_NODE_ID, MAX_VIEW_ID, WireLimits
from ..wire.membership import (
    ZERO_BALLOT,
    Ballot,
    Proposal,
    ViewRecord,
    accepted_obj,
    read_accepted,
    read_ballot,
    read_view,
    view_obj,
)

FORMAT = 1
MAX_LIVES = 32
"""Incarnations a record remembers having started with (``DurableState.lives``)."""


@dataclass(frozen=True, slots=True)
class DurableState:
    node_id: int
    incarnation: int = 0
    promised: Ballot = ZERO_BALLOT
    accepted: tuple[Ballot, Proposal] | None = None
    accepted_held: bool = True
    """The vote for ``accepted`` was cast holding its cut (``Promise.accepted_held``)."""
    known: ViewRecord | None = None
    """The latest view this node installed or learned was decided."""
    max_view_id: int = 0
    """The highest view id this node has seen proposed or installed."""
    origin: int = 0
    """The incarnation this record began with (``first``); 0: not recorded (a record
    of an older release, or agreed out of band with an initial view)."""
    lives: tuple[int, ...] = ()
    """The incarnations this record started with, the current one last, at most
    ``MAX_LIVES`` (the earliest dropped first); empty in a record of an older release."""

    @staticmethod
    def first(node_id: int, floor: int) -> DurableState:
        """The record of a daemon that starts with none: its first incarnation is the
        record's origin."""
        incarnation = min(max(1, floor), MAX_INCARNATION)
        return DurableState(node_id, incarnation, origin=incarnation, lives=(incarnation,))

    def restarted(self, floor: int) -> DurableState:
        """The state of the next incarnation."""
        incarnation = min(max(self.incarnation + 1, floor), MAX_INCARNATION)
        if self.lives and self.lives[-1] >= incarnation:  # (at the largest incarnation)
            return replace(self, incarnation=incarnation)
        return replace(self, incarnation=incarnation,
                       lives=(*self.lives, incarnation)[-MAX_LIVES:])

    def encode(self) -> bytes:
        accepted = None
        if self.accepted is not None:
            accepted = accepted_obj(self.accepted, self.accepted_held)
        obj = [FORMAT, self.node_id, self.incarnation, [self.promised.number, self.promised.node],
               accepted, view_obj(self.known), self.max_view_id]
        if self.origin or self.lives:
            obj += [self.origin, list(self.lives)]
        return msgpack.packb(obj, use_bin_type=True)

    @staticmethod
    def decode(data: bytes, node_id: int) -> DurableState:
        """Read a persisted record; ``ConfigurationError`` if it is not ours or is damaged."""
        try:
            obj: Any = msgpack.unpackb(data, raw=True, strict_map_key=True, max_str_len=0)
            if type(obj) is not list or len(obj) not in (7, 9) or obj[0] != FORMAT:
                raise DecodeError("bad_state", "format")
            limits = WireLimits()
            accepted, held = read_accepted(obj[4], limits)
            state = DurableState(
                node_id=read_int(obj[1], 0, MAX_NODE_ID, "node id"),
                incarnation=read_int(obj[2], 0, MAX_INCARNATION, "incarnation"),
                promised=read_ballot(obj[3]), accepted=accepted, accepted_held=held,
                known=read_view(obj[5], limits),
                max_view_id=read_int(obj[6], 0, MAX_VIEW_ID, "max view id"),
                **(_read_lives(obj[7], obj[8]) if len(obj) == 9 else {}),
            )
        except (DecodeError, ValueError, TypeError, IndexError) as exc:
            raise ConfigurationError(f"the membership state file is damaged ({exc})") from None
        except Exception as exc:  # msgpack raises several types on garbage
            raise ConfigurationError(
                f"the membership state file is damaged ({type(exc).__name__})"
            ) from None
        if state.node_id != node_id:
            raise ConfigurationError(
                f"the membership state file belongs to node {state.node_id}, not {node_id}"
            )
        return state


def _read_lives(origin: Any, lives: Any) -> dict[str, Any]:
    """``origin`` and ``lives`` of a record: increasing incarnations, none before the
    origin (0: not recorded)."""
    first = read_int(origin, 0, MAX_INCARNATION, "origin")
    if type(lives) is not list or not 0 < len(lives) <= MAX_LIVES:
        raise DecodeError("bad_state", "lives")
    read = tuple(read_int(x, 1, MAX_INCARNATION, "life") for x in lives)
    if any(a >= b for a, b in pairwise(read)) or read[0] < first:
        raise DecodeError("bad_state", "lives out of order")
    return {"origin": first, "lives": read}
