"""Membership messages on the wire: records, message types, strict codec.

Section 2 of the ToTo paper assumes "a reliable group membership facility" with virtual
synchrony; ``amcast.protocols.membership`` builds it, and this module is its wire
vocabulary. A membership datagram is ``[5, sender, view, incarnation, type, body]``
(``codec`` reads the header, ``decode_message`` the body):

- ``JOIN``: a live daemon not (or no longer) in a primary view announces itself, with
  its ordering-relevant settings, the latest view it knows and whether it is leaving;
  members also send it when they leave gracefully (``leaving = True``).
- ``PREPARE`` / ``PROMISE`` / ``REJECT``: phase 1 of the view agreement (a ballot, the
  candidate members; each candidate freezes its view and answers with what it knows,
  what it accepted, and the vertices it holds of its view: its *availability*; a
  promiser whose membership state began after a view that lists its id says so: its
  *origin*).
- ``ACCEPT`` / ``ACCEPTED``: phase 2 (the proposal: next view and the cut that closes
  the previous one; a member answers once it holds everything up to the cut; a vote
  may say whether its voter is a *holder*: a member of both views with every vertex up
  to the cut; an ``ACCEPT`` may say that a holder voted already).
- ``INSTALL``: the decision; every member installs the view, every other node learns it.
- ``REFUSE``: a join refused, with a reason (configuration mismatch, duplicate node id,
  not a listed member).

Records are small frozen dataclasses; text (reasons, rule names) travels as ASCII bin.
Every list is bounded by ``WireLimits``; ``decode_message`` raises only ``DecodeError``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from ..errors import DecodeError
from .fields import read_bool, read_int, read_list, read_text
from .limits import (
    MAX_INCARNATION,
    MAX_NODE_ID,
    MAX_SEQ,
    MAX_VIEW_ID,
    WireLimits,
)


class MsgType(IntEnum):
    JOIN = 1
    PREPARE = 2
    PROMISE = 3
    REJECT = 4
    ACCEPT = 5
    ACCEPTED = 6
    INSTALL = 7
    REFUSE = 8


@dataclass(frozen=True, slots=True, order=True)
class Ballot:
    """A round of the view agreement; compared by ``(number, node)``."""

    number: int
    node: int


ZERO_BALLOT = Ballot(0, 0)


@dataclass(frozen=True, slots=True, order=True)
class Member:
    """One incarnation of a daemon: a restarted daemon is a new member."""

    node: int
    incarnation: int


@dataclass(frozen=True, slots=True)
class ViewRecord:
    """A view: its id, members (by node id), the potential members its quorum counts,
    and the id of the view it succeeds (0 for the first); with a swap ordering, the
    view's swap tree (``swap.carry.encode``: each member's parent, then the hybrid's
    virtual root), carried from the previous view's by section 6.2's joins and leaves
    (empty: the shape over the sorted ids; never written then, so the wire of a ToTo
    group is unchanged)."""

    view_id: int
    members: tuple[Member, ...]
    potential: tuple[int, ...]
    prev_id: int
    tree: tuple[int, ...] = ()

    @property
    def nodes(self) -> tuple[int, ...]:
        return tuple(m.node for m in self.members)

    @staticmethod
    def agreed(members: tuple[int, ...] | list[int]) -> ViewRecord:
        """View 1 of every listed member's first incarnation: what nodes started with
        ``Node(initial_view=...)`` agree on out of band (tests, benchmarks)."""
        nodes = tuple(sorted(members))
        return ViewRecord(1, tuple(Member(n, 1) for n in nodes), nodes, 0)

    def member(self, node: int) -> Member | None:
        for m in self.members:
            if m.node == node:
                return m
        return None


@dataclass(frozen=True, slots=True)
class Proposal:
    """The next view, the view it succeeds, and the cut closing that one: for every
    member of ``prev``, the last sequence number of the final causality DAG of ``prev``."""

    view: ViewRecord
    prev: ViewRecord | None
    cut: tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class Settings:
    """Settings that must be equal for daemons to share a view (and the member list,
    which travels along: the coordinator's list becomes the view's)."""

    rule: str
    """The ToTo rule, or a swap ordering with its tree (``swap.engine.settings_text``)."""
    phi: float | None
    expected_votes: int | None
    max_message_size: int
    members: tuple[int, ...]

    def differences(self, other: Settings) -> list[str]:
        """Names and values of the ordering-relevant settings that differ, ``self`` the
        coordinator's and ``other`` the joiner's: the text goes to both sides (``Refuse``),
        so it names whose value is whose, not "here" and "there"."""
        out = []
        for name in ("rule", "phi", "expected_votes", "max_message_size"):
            mine, theirs = getattr(self, name), getattr(other, name)
            if mine != theirs:
                # ``rule`` carries a swap ordering and its tree as "arrow:balanced/2"
                if name == "rule" and ":" in f"{mine}{theirs}":
                    name = "ordering"
                out.append(f"{name}: {mine!r} (coordinator), {theirs!r} (refused daemon)")
        return out


@dataclass(frozen=True, slots=True)
class HeldVertex:
    """A vertex received but not causally released yet: enough to extend the cut."""

    origin: int
    seq: int
    acks: tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class Availability:
    """What a member holds of its view: released seq per sender, plus held vertices."""

    view_id: int
    released: tuple[tuple[int, int], ...]
    held: tuple[HeldVertex, ...]


Position = tuple[int, int]
"""``(view id, position in that view)`` of a delivered ordered message."""


@dataclass(frozen=True, slots=True)
class Join:
    settings: Settings
    known_view_id: int
    leaving: bool
    last_delivered: Position | None


@dataclass(frozen=True, slots=True)
class Prepare:
    ballot: Ballot
    candidates: tuple[Member, ...]
    known: ViewRecord | None


@dataclass(frozen=True, slots=True)
class Promise:
    ballot: Ballot
    known: ViewRecord | None
    installed_id: int
    accepted: tuple[Ballot, Proposal] | None
    availability: Availability | None
    settings: Settings
    last_delivered: Position | None
    accepted_held: bool = True
    """The promiser's vote for ``accepted`` was a holder's (``agreement.needs_holder``), or
    the proposal needs none. ``True`` where a daemon of an older version did not say:
    such a vote may have been a holder's."""
    origin: int = 0
    """The earliest incarnation of its id whose acceptor state the promiser holds: where
    its membership state began, or its current incarnation where the view it knows lists
    its id at one that state never started (``handlers.said_origin``). Its vote counts
    toward deciding a view's successor only where this is at most the incarnation that
    view lists (``agreement.counted_acceptors``). Written where it can matter; 0
    elsewhere, and from daemons of older versions, which never say."""


@dataclass(frozen=True, slots=True)
class Reject:
    ballot: Ballot
    promised: Ballot
    reason: str
    detail: str


@dataclass(frozen=True, slots=True)
class Accept:
    ballot: Ballot
    proposal: Proposal
    holder_voted: bool = False
    """A holder already voted for ``proposal`` (a promise said so, or the coordinator's
    own vote): it may have been decided, so a member that cannot complete its cut votes
    all the same (``MembershipLayer._vote_unheld``). Written only when true, and then as
    a second copy after the plain ``ACCEPT``, which older daemons read (they drop this
    one; ``MembershipLayer._send_accept``)."""


@dataclass(frozen=True, slots=True)
class Accepted:
    ballot: Ballot
    view_id: int
    held: bool | None = None
    """The voter is a *holder* of the proposal's cut (``agreement.needs_holder``).
    ``None``: a daemon of an older version, which does not say (it votes as a member of
    the new view only once it holds the cut)."""


@dataclass(frozen=True, slots=True)
class Install:
    ballot: Ballot
    proposal: Proposal


@dataclass(frozen=True, slots=True)
class Refuse:
    target: Member
    reason: str
    detail: str


Message = Join | Prepare | Promise | Reject | Accept | Accepted | Install | Refuse

MESSAGE_TYPES: dict[type, MsgType] = {
    Join: MsgType.JOIN,
    Prepare: MsgType.PREPARE,
    Promise: MsgType.PROMISE,
    Reject: MsgType.REJECT,
    Accept: MsgType.ACCEPT,
    Accepted: MsgType.ACCEPTED,
    Install: MsgType.INSTALL,
    Refuse: MsgType.REFUSE,
}


# ----------------------------------------------------------------------------- encode


def _ballot(b: Ballot) -> list[int]:
    return [b.number, b.node]


def _members(members: tuple[Member, ...]) -> list[int]:
    flat: list[int] = []
    for m in members:
        flat.extend((m.node, m.incarnation))
    return flat


def _pairs(pairs: tuple[tuple[int, int], ...]) -> list[int]:
    flat: list[int] = []
    for a, b in pairs:
        flat.extend((a, b))
    return flat


def view_obj(v: ViewRecord | None) -> list[Any] | None:
    if v is None:
        return None
    obj = [v.view_id, _members(v.members), list(v.potential), v.prev_id]
    if v.tree:
        obj.append(list(v.tree))
    return obj


def proposal_obj(p: Proposal) -> list[Any]:
    return [view_obj(p.view), view_obj(p.prev), _pairs(p.cut)]


def _settings(s: Settings) -> list[Any]:
    return [s.rule.encode("ascii"), s.phi, s.expected_votes, s.max_message_size, list(s.members)]


def _position(p: Position | None) -> list[int] | None:
    return None if p is None else [p[0], p[1]]


def encode_message(msg: Message) -> tuple[int, list[Any]]:
    """``(type code, body)`` of a membership message."""
    if isinstance(msg, Join):
        body: list[Any] = [_settings(msg.settings), msg.known_view_id, msg.leaving,
                           _position(msg.last_delivered)]
    elif isinstance(msg, Prepare):
        body = [_ballot(msg.ballot), _members(msg.candidates), view_obj(msg.known)]
    elif isinstance(msg, Promise):
        accepted = None
        if msg.accepted is not None:
            accepted = accepted_obj(msg.accepted, msg.accepted_held)
        avail = None
        if msg.availability is not None:
            a = msg.availability
            avail = [a.view_id, _pairs(a.released),
                     [[h.origin, h.seq, _pairs(h.acks)] for h in a.held]]
        body = [_ballot(msg.ballot), view_obj(msg.known), msg.installed_id, accepted, avail,
                _settings(msg.settings), _position(msg.last_delivered)]
        if msg.origin:  # only where it matters: older daemons drop a promise that says
            body.append(msg.origin)
    elif isinstance(msg, Reject):
        body = [_ballot(msg.ballot), _ballot(msg.promised), msg.reason.encode("ascii"),
                msg.detail.encode("ascii", "replace")[:200]]
    elif isinstance(msg, Accept | Install):
        body = [_ballot(msg.ballot), proposal_obj(msg.proposal)]
        if isinstance(msg, Accept) and msg.holder_voted:
            body.append(True)
    elif isinstance(msg, Accepted):
        body = [_ballot(msg.ballot), msg.view_id]
        if msg.held is not None:
            body.append(msg.held)
    elif isinstance(msg, Refuse):
        body = [_members((msg.target,)), msg.reason.encode("ascii"),
                msg.detail.encode("ascii", "replace")[:200]]
    else:  # pragma: no cover - exhaustive over Message
        raise TypeError(f"not a membership message: {msg!r}")
    return int(MESSAGE_TYPES[type(msg)]), body


# ----------------------------------------------------------------------------- decode


def read_ballot(obj: Any) -> Ballot:
    fields = read_list(obj, "ballot")
    if len(fields) != 2:
        raise DecodeError("bad_field", "ballot arity")
    return Ballot(read_int(fields[0], 0, MAX_VIEW_ID, "ballot number"),
                  read_int(fields[1], 0, MAX_NODE_ID, "ballot node"))


def _read_members(obj: Any, limits: WireLimits, what: str) -> tuple[Member, ...]:
    flat = read_list(obj, what, max_len=2 * limits.max_members)
    if len(flat) % 2:
        raise DecodeError("bad_field", f"{what} length")
    members = tuple(
        Member(read_int(flat[i], 0, MAX_NODE_ID, "member node"),
               read_int(flat[i + 1], 0, MAX_INCARNATION, "incarnation"))
        for i in range(0, len(flat), 2)
    )
    nodes = [m.node for m in members]
    if nodes != sorted(set(nodes)):
        raise DecodeError("bad_field", f"{what} not sorted and distinct")
    return members


def _read_pairs(obj: Any, limits: WireLimits, what: str, hi: int) -> tuple[tuple[int, int], ...]:
    flat = read_list(obj, what, max_len=2 * limits.max_members)
    if len(flat) % 2:
        raise DecodeError("bad_field", f"{what} length")
    return tuple(
        (read_int(flat[i], 0, MAX_NODE_ID, f"{what} node"), read_int(flat[i + 1], 0, hi, what))
        for i in range(0, len(flat), 2)
    )


def read_view(obj: Any, limits: WireLimits) -> ViewRecord | None:
    if obj is None:
        return None
    fields = read_list(obj, "view record")
    if len(fields) not in (4, 5):
        raise DecodeError("bad_field", "view record arity")
    view_id = read_int(fields[0], 1, MAX_VIEW_ID, "view id")
    members = _read_members(fields[1], limits, "view members")
    if not members:
        raise DecodeError("bad_field", "a view has members")
    potential = tuple(read_int(x, 0, MAX_NODE_ID, "potential member")
                      for x in read_list(fields[2], "potential", max_len=limits.max_members))
    if list(potential) != sorted(set(potential)) or not potential:
        raise DecodeError("bad_field", "potential members not sorted and distinct")
    prev_id = read_int(fields[3], 0, view_id - 1, "previous view id")
    tree: tuple[int, ...] = ()
    if len(fields) == 5:
        nodes = {m.node for m in members}
        raw = read_list(fields[4], "swap tree", max_len=2 * limits.max_members)
        for x in raw:
            if read_int(x, 0, MAX_NODE_ID, "swap tree") not in nodes:
                raise DecodeError("bad_field", "tree: not a member")
        if len(raw) <= len(members):
            raise DecodeError("bad_field", "tree: too short")
        tree = tuple(raw)  # its shape is checked where it is used (``swap.carry.decode``)
    return ViewRecord(view_id, members, potential, prev_id, tree)


def read_proposal(obj: Any, limits: WireLimits) -> Proposal:
    fields = read_list(obj, "proposal")
    if len(fields) != 3:
        raise DecodeError("bad_field", "proposal arity")
    view = read_view(fields[0], limits)
    if view is None:
        raise DecodeError("bad_field", "proposal without a view")
    prev = read_view(fields[1], limits)
    if prev is not None and prev.view_id != view.prev_id:
        raise DecodeError("bad_field", "proposal prev does not match")
    cut = _read_pairs(fields[2], limits, "cut", MAX_SEQ)
    if prev is not None and tuple(node for node, _ in cut) != prev.nodes:
        raise DecodeError("bad_field", "cut does not cover the previous view's members")
    if prev is None and cut:
        raise DecodeError("bad_field", "cut without a previous view")
    return Proposal(view, prev, cut)


def accepted_obj(accepted: tuple[Ballot, Proposal], held: bool) -> list[Any]:
    """A vote as promises and the durable state carry it: ``[ballot, proposal]`` for a
    holder's vote or one that needs no holder (the form older daemons write and read),
    ``[ballot, proposal, false]`` otherwise."""
    obj: list[Any] = [_ballot(accepted[0]), proposal_obj(accepted[1])]
    if not held:
        obj.append(False)
    return obj


def read_accepted(obj: Any, limits: WireLimits) -> tuple[tuple[Ballot, Proposal] | None, bool]:
    """``accepted_obj`` read back, or ``None``: ``(vote, held)``."""
    if obj is None:
        return None, True
    fields = read_list(obj, "accepted")
    if len(fields) not in (2, 3):
        raise DecodeError("bad_field", "accepted arity")
    held = read_bool(fields[2], "accepted held") if len(fields) == 3 else True
    return (read_ballot(fields[0]), read_proposal(fields[1], limits)), held


def _read_settings(obj: Any, limits: WireLimits) -> Settings:
    fields = read_list(obj, "settings")
    if len(fields) != 5:
        raise DecodeError("bad_field", "settings arity")
    rule = read_text(fields[0], "rule")
    phi = fields[1]
    if phi is not None and (type(phi) is not float or not 0.0 <= phi <= 1e6):
        raise DecodeError("bad_field", "phi")
    expected = None if fields[2] is None else read_int(fields[2], 1, MAX_NODE_ID, "votes")
    size = read_int(fields[3], 1, 2**40, "max_message_size")
    members = tuple(read_int(x, 0, MAX_NODE_ID, "member")
                    for x in read_list(fields[4], "members", max_len=limits.max_members))
    return Settings(rule, phi, expected, size, members)


def _read_position(obj: Any) -> Position | None:
    if obj is None:
        return None
    fields = read_list(obj, "position")
    if len(fields) != 2:
        raise DecodeError("bad_field", "position arity")
    return (read_int(fields[0], 1, MAX_VIEW_ID, "position view"),
            read_int(fields[1], 0, MAX_SEQ, "position"))


def _read_availability(obj: Any, limits: WireLimits) -> Availability | None:
    if obj is None:
        return None
    fields = read_list(obj, "availability")
    if len(fields) != 3:
        raise DecodeError("bad_field", "availability arity")
    view_id = read_int(fields[0], 1, MAX_VIEW_ID, "availability view")
    released = _read_pairs(fields[1], limits, "released", MAX_SEQ)
    held = []
    for raw in read_list(fields[2], "held", max_len=limits.max_held_report):
        h = read_list(raw, "held vertex")
        if len(h) != 3:
            raise DecodeError("bad_field", "held vertex arity")
        held.append(HeldVertex(read_int(h[0], 0, MAX_NODE_ID, "held origin"),
                               read_int(h[1], 1, MAX_SEQ, "held seq"),
                               _read_pairs(h[2], limits, "held acks", MAX_SEQ)))
    return Availability(view_id, released, tuple(held))


def decode_message(code: Any, obj: Any, limits: WireLimits) -> Message:
    """Decode the body of a membership datagram; raise ``DecodeError`` on any defect."""
    if type(code) is not int or code not in MsgType._value2member_map_:
        raise DecodeError("bad_field", "membership message type")
    kind = MsgType(code)
    body = read_list(obj, "membership body")
    arity = {MsgType.JOIN: 4, MsgType.PREPARE: 3, MsgType.PROMISE: 7, MsgType.REJECT: 4,
             MsgType.ACCEPT: 3, MsgType.ACCEPTED: 3, MsgType.INSTALL: 2, MsgType.REFUSE: 3}
    # older daemons omit an ACCEPT's or ACCEPTED's last field; a PROMISE's origin is
    # written only where it matters
    optional_last = kind in (MsgType.ACCEPT, MsgType.ACCEPTED)
    optional_more = kind is MsgType.PROMISE
    if (len(body) != arity[kind] and not (optional_last and len(body) == arity[kind] - 1)
            and not (optional_more and len(body) == arity[kind] + 1)):
        raise DecodeError("bad_field", f"{kind.name.lower()} arity")
    if kind is MsgType.JOIN:
        return Join(_read_settings(body[0], limits),
                    read_int(body[1], 0, MAX_VIEW_ID, "known view"),
                    read_bool(body[2], "leaving"), _read_position(body[3]))
    if kind is MsgType.PREPARE:
        candidates = _read_members(body[1], limits, "candidates")
        return Prepare(read_ballot(body[0]), candidates, read_view(body[2], limits))
    if kind is MsgType.PROMISE:
        accepted, held = read_accepted(body[3], limits)
        return Promise(read_ballot(body[0]), read_view(body[1], limits),
                       read_int(body[2], 0, MAX_VIEW_ID, "installed view"), accepted,
                       _read_availability(body[4], limits), _read_settings(body[5], limits),
                       _read_position(body[6]), held,
                       read_int(body[7], 1, MAX_INCARNATION, "origin") if len(body) == 8 else 0)
    if kind is MsgType.REJECT:
        return Reject(read_ballot(body[0]), read_ballot(body[1]),
                      read_text(body[2], "reason"), read_text(body[3], "detail"))
    if kind is MsgType.ACCEPT:
        holder_voted = read_bool(body[2], "holder voted") if len(body) == 3 else False
        return Accept(read_ballot(body[0]), read_proposal(body[1], limits), holder_voted)
    if kind is MsgType.ACCEPTED:
        held_flag = read_bool(body[2], "held") if len(body) == 3 else None
        return Accepted(read_ballot(body[0]), read_int(body[1], 1, MAX_VIEW_ID, "view id"),
                        held_flag)
    if kind is MsgType.INSTALL:
        return Install(read_ballot(body[0]), read_proposal(body[1], limits))
    targets = _read_members(body[0], limits, "refused member")
    if len(targets) != 1:
        raise DecodeError("bad_field", "refuse names one member")
    return Refuse(targets[0], read_text(body[1], "reason"), read_text(body[2], "detail"))
