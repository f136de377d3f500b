"""Membership datagrams on the wire: round trips, bounds, and fuzzing (only ``DecodeError``).

Every membership message type goes through ``encode(MembershipDatagram(...), auth, wall_ms)`` and
``decode`` unchanged, with and without a key; HEARTBEAT datagrams carry their acks.
Structural defects a peer could send (too many members, unsorted members, a cut that does
not cover the previous view, a proposal whose ``prev`` is not the view it succeeds, a view
succeeding itself) are refused, and any bytes at all decode or raise ``DecodeError``.
"""

from __future__ import annotations

from dataclasses import replace

import msgpack
import pytest
from amcast.protocols.errors import DecodeError
from amcast.protocols.wire.auth import Authenticator
from amcast.protocols.wire.codec import (
    Datagram,
    Kind,
    MembershipDatagram,
    encode,
)
from amcast.protocols.wire.limits import (
    MAX_INCARNATION,
    MAX_NODE_ID,
    MAX_SEQ,
    MAX_TEXT_BYTES,
    MAX_VIEW_ID,
    WireLimits,
)
from amcast.protocols.wire.membership import (
    Accept,
    Accepted,
    Availability,
    Ballot,
    HeldVertex,
    Install,
    Join,
    Member,
    Message,
    MsgType,
    Prepare,
    Promise,
    Proposal,
    Refuse,
    Reject,
    Settings,
    ViewRecord,
    encode_message,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.wire.sealing import WALL_MS, authenticator, decode

KEYED = authenticator(b"m" * 32)
INSECURE = authenticator(None)
AUTHS = (KEYED, INSECURE)
LIMITS = WireLimits(max_members=16, max_held_report=8)
FUZZ = settings(max_examples=1000, derandomize=True, database=None, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])

# ----------------------------------------------------------------------------- samples

V4 = ViewRecord(4, (Member(1, 7), Member(2, 3), Member(5, 1)), (1, 2, 3, 5), 3)
V6 = ViewRecord(6, (Member(1, 7), Member(2, 4)), (1, 2, 3, 5), 4)
PROPOSAL = Proposal(V6, V4, ((1, 12), (2, 0), (5, 2**40)))
FIRST = Proposal(ViewRecord.agreed([1, 2, 3]), None, ())
SETTINGS = Settings("gltoto", 1.5, 5, 1 << 20, (1, 2, 3, 5))
AVAIL = Availability(4, ((1, 12), (2, 0), (5, 3)),
                     (HeldVertex(2, 2, ((1, 13),)), HeldVertex(5, 5, ())))

SAMPLES: list[Message] = [
    Join(SETTINGS, 4, False, (4, 17)),
    Join(Settings("lex", None, None, 1, ()), 0, True, None),
    Prepare(Ballot(9, 1), (Member(1, 7), Member(2, 4), Member(3, 2)), V4),
    Prepare(Ballot(1, 3), (Member(3, 1),), None),
    Promise(Ballot(9, 1), V4, 4, None, None, SETTINGS, None),
    Promise(Ballot(9, 1), V4, 4, (Ballot(8, 2), PROPOSAL), None, SETTINGS, (4, 0)),
    Promise(Ballot(9, 1), V4, 4, None, AVAIL, SETTINGS, (4, 99)),
    Promise(Ballot(9, 1), V4, 3, (Ballot(8, 2), PROPOSAL), AVAIL, SETTINGS, (3, 5)),
    Promise(Ballot(1, 1), None, 0, (Ballot(1, 1), FIRST), None, SETTINGS, None),
    Promise(Ballot(9, 1), V4, 4, (Ballot(8, 2), PROPOSAL), None, SETTINGS, (4, 0), False),
    Promise(Ballot(9, 1), V4, 4, None, None, SETTINGS, None, True, 1_700_000_000_001),
    Reject(Ballot(9, 1), Ballot(11, 2), "stale_ballot", "promised 11.2"),
    Reject(Ballot(0, 0), Ballot(0, 0), "", ""),
    Accept(Ballot(9, 1), PROPOSAL),
    Accept(Ballot(1, 1), FIRST),
    Accept(Ballot(9, 1), PROPOSAL, holder_voted=True),
    Accepted(Ballot(9, 1), 6),
    Accepted(Ballot(9, 1), 6, True),
    Accepted(Ballot(9, 1), 6, False),
    Install(Ballot(9, 1), PROPOSAL),
    Install(Ballot(2**40, MAX_NODE_ID), FIRST),
    Refuse(Member(4, 2), "settings_mismatch",
           "rule: 'gltoto' (coordinator), 'lex' (refused daemon)"),
]


def round_trip(dg: Datagram | MembershipDatagram, auth: Authenticator) -> object:
    return decode(encode(dg, auth, WALL_MS), auth, LIMITS)


@pytest.mark.parametrize("message", SAMPLES, ids=lambda m: type(m).__name__)
def test_every_membership_message_round_trips(message: Message) -> None:
    for auth in AUTHS:
        for view, incarnation in ((0, 0), (4, 7), (MAX_VIEW_ID, MAX_INCARNATION)):
            dg = MembershipDatagram(3, view, incarnation, message)
            back = round_trip(dg, auth)
            assert back == dg
            assert isinstance(back, MembershipDatagram)
            assert back.kind is Kind.MEMBERSHIP


def test_every_message_type_is_covered_by_the_samples() -> None:
    assert {encode_message(m)[0] for m in SAMPLES} == {int(t) for t in MsgType}


def test_votes_of_older_daemons_that_do_not_say_whether_they_held_the_cut() -> None:
    """An ``ACCEPTED`` of two fields does not say (the coordinator counts it as a
    holder's if it comes from a member of both views, as older daemons vote only once
    they hold the cut); a promise's ``[ballot, proposal]`` vote may have been a holder's
    (a later round keeps such a proposal)."""
    def sealed(kind: MsgType, body: list) -> bytes:
        return KEYED.seal(msgpack.packb([5, 1, 0, 1, int(kind), body], use_bin_type=True),
                          WALL_MS)

    back = decode(sealed(MsgType.ACCEPTED, [[9, 1], 6]), KEYED, LIMITS)
    assert isinstance(back, MembershipDatagram)
    assert back.message == Accepted(Ballot(9, 1), 6) and back.message.held is None
    _, body = encode_message(
        Promise(Ballot(9, 1), V4, 4, (Ballot(8, 2), PROPOSAL), None, SETTINGS, None, False))
    assert len(body[3]) == 3
    body[3] = body[3][:2]
    back = decode(sealed(MsgType.PROMISE, body), KEYED, LIMITS)
    assert isinstance(back, MembershipDatagram) and isinstance(back.message, Promise)
    assert back.message.accepted == (Ballot(8, 2), PROPOSAL) and back.message.accepted_held
    # what older daemons write is what ours write unless a vote was not a holder's
    _, held_body = encode_message(
        Promise(Ballot(9, 1), V4, 4, (Ballot(8, 2), PROPOSAL), None, SETTINGS, None, True))
    assert len(held_body[3]) == 2 and len(body[3]) == 2
    assert len(encode_message(Accepted(Ballot(9, 1), 6))[1]) == 2
    body[3] = [*body[3], False]
    for bad in ([*body[3][:2], 1], [*body[3], False], body[3][:1]):
        with pytest.raises(DecodeError, match=r"held|arity"):
            decode(sealed(MsgType.PROMISE, [*body[:3], bad, *body[4:]]), KEYED, LIMITS)
    with pytest.raises(DecodeError, match="held"):
        decode(sealed(MsgType.ACCEPTED, [[9, 1], 6, 1]), KEYED, LIMITS)
    # an ACCEPT says a holder voted only when one did: otherwise it is what older send
    _, accept = encode_message(Accept(Ballot(9, 1), PROPOSAL))
    assert len(accept) == 2
    with pytest.raises(DecodeError, match="holder voted"):
        decode(sealed(MsgType.ACCEPT, [*accept, 1]), KEYED, LIMITS)


def test_a_promise_says_its_origin_only_where_it_matters() -> None:
    """Older daemons read a PROMISE of seven fields and drop one of eight: the origin is
    written only when it is not 0, and an explicit 0 or a ninth field is refused."""
    def sealed(body: list[object]) -> bytes:
        return KEYED.seal(msgpack.packb([5, 1, 0, 1, int(MsgType.PROMISE), body],
                                        use_bin_type=True), WALL_MS)

    plain = Promise(Ballot(9, 1), V4, 4, None, None, SETTINGS, None)
    _, body = encode_message(plain)
    assert len(body) == 7
    _, said = encode_message(replace(plain, origin=77))
    assert len(said) == 8 and said[7] == 77
    back = decode(sealed(said), KEYED, LIMITS)
    assert isinstance(back, MembershipDatagram) and back.message == replace(plain, origin=77)
    for bad in ([*body, 0], [*body, -1], [*body, b"7"], [*said, 1]):
        with pytest.raises(DecodeError, match=r"origin|arity"):
            decode(sealed(bad), KEYED, LIMITS)


def test_long_or_non_ascii_details_are_clipped_and_replaced_on_encode() -> None:
    dg = MembershipDatagram(1, 2, 3, Reject(Ballot(1, 1), Ballot(2, 2), "why", "é" + "x" * 300))
    back = round_trip(dg, KEYED)
    assert isinstance(back, MembershipDatagram) and isinstance(back.message, Reject)
    assert back.message.detail == "?" + "x" * 199


def test_heartbeats_carry_their_acks() -> None:
    cases = [
        Datagram(Kind.HEARTBEAT, 2, 5, 9, (), (), ((0, 4), (1, 0), (2, 9))),
        Datagram(Kind.HEARTBEAT, 2, 5, 9, ((1, 1, 3),), (), ((1, MAX_SEQ),)),
        Datagram(Kind.HEARTBEAT, 0, 0, 0),
    ]
    for dg in cases:
        for auth in AUTHS:
            assert round_trip(dg, auth) == dg


def test_heartbeat_ack_bounds() -> None:
    too_many = [x for i in range(17) for x in (i, 1)]
    for acks, what in (([1], "odd"), (too_many, "more than max_members"),
                       ([1, -1], "negative seq"), ([1, MAX_SEQ + 1], "seq too large"),
                       ([MAX_NODE_ID + 1, 1], "node too large"), ([1, True], "bool")):
        data = KEYED.seal(msgpack.packb([4, 1, 0, 0, [], acks]), WALL_MS)
        with pytest.raises(DecodeError) as exc:
            decode(data, KEYED, LIMITS)
        assert exc.value.reason == "bad_field", what


# ----------------------------------------------------------------------------- bounds


def refused(message: Message, limits: WireLimits = LIMITS) -> DecodeError:
    """Encode ``message`` (the dataclasses do not validate) and expect the decoder to
    refuse it."""
    data = encode(MembershipDatagram(1, 0, 1, message), KEYED, WALL_MS)
    with pytest.raises(DecodeError) as exc:
        decode(data, KEYED, limits)
    assert exc.value.reason == "bad_field"
    return exc.value


def view(view_id: int, nodes: list[int], prev_id: int, potential: tuple[int, ...] | None = None,
         ) -> ViewRecord:
    members = tuple(Member(n, 1) for n in nodes)
    potential = tuple(sorted(set(nodes))) if potential is None else potential
    return ViewRecord(view_id, members, potential, prev_id)


def test_too_many_members_are_refused() -> None:
    nodes = list(range(17))
    assert len(nodes) > LIMITS.max_members
    refused(Prepare(Ballot(1, 1), tuple(Member(n, 1) for n in nodes), None))
    refused(Install(Ballot(1, 1), Proposal(view(2, nodes, 0, (0,)), None, ())))
    refused(Install(Ballot(1, 1), Proposal(view(2, [0], 0, tuple(nodes)), None, ())))
    refused(Join(Settings("lex", None, None, 1, tuple(nodes)), 0, False, None))
    sixteen = list(range(16))
    ok = Install(Ballot(1, 1), Proposal(view(2, sixteen, 0), None, ()))
    assert round_trip(MembershipDatagram(1, 0, 1, ok), KEYED).message == ok


def test_unsorted_or_repeated_members_are_refused() -> None:
    backwards = (Member(2, 1), Member(1, 1))
    twice = (Member(1, 1), Member(1, 2))
    for members in (backwards, twice):
        refused(Prepare(Ballot(1, 1), members, None))
        refused(Install(Ballot(1, 1), Proposal(ViewRecord(2, members, (1, 2), 0), None, ())))
    refused(Install(Ballot(1, 1), Proposal(view(2, [1, 2], 0, (2, 1)), None, ())))
    refused(Install(Ballot(1, 1), Proposal(view(2, [1, 2], 0, (1, 1, 2)), None, ())))
    refused(Install(Ballot(1, 1), Proposal(ViewRecord(2, (), (1,), 0), None, ())))  # empty
    refused(Install(Ballot(1, 1), Proposal(view(2, [1], 0, ()), None, ())))  # no potential


def test_a_refuse_names_exactly_one_member() -> None:
    body = [[1, 1, 2, 1], b"reason", b""]
    data = KEYED.seal(msgpack.packb([5, 1, 0, 1, int(MsgType.REFUSE), body]), WALL_MS)
    with pytest.raises(DecodeError, match="one member"):
        decode(data, KEYED, LIMITS)


def test_cut_must_cover_exactly_the_previous_views_members() -> None:
    prev = view(4, [1, 2, 3], 3)
    nxt = view(5, [1, 2], 4)
    good = Proposal(nxt, prev, ((1, 5), (2, 0), (3, 9)))
    assert round_trip(MembershipDatagram(1, 4, 1, Accept(Ballot(5, 1), good)), KEYED).message \
        == Accept(Ballot(5, 1), good)
    for cut in (((1, 5), (2, 0)),  # a member missing
                ((1, 5), (2, 0), (3, 9), (4, 1)),  # a stranger
                ((2, 0), (1, 5), (3, 9)),  # not in member order
                ((1, 5), (2, 0), (3, MAX_SEQ + 1))):  # seq out of range
        refused(Accept(Ballot(5, 1), Proposal(nxt, prev, cut)))
    refused(Install(Ballot(5, 1), Proposal(nxt, None, ((1, 5),))))  # a cut without prev
    # odd flat cut list (bad arity of a pair)
    body = [[5, 1], [[5, [1, 1, 2, 1], [1, 2], 4], [4, [1, 1, 2, 1, 3, 1], [1, 2, 3], 3],
                     [1, 5, 2]]]
    data = KEYED.seal(msgpack.packb([5, 1, 0, 1, int(MsgType.ACCEPT), body]), WALL_MS)
    with pytest.raises(DecodeError, match="cut length"):
        decode(data, KEYED, LIMITS)


def test_prev_must_be_the_view_the_proposal_succeeds() -> None:
    prev = view(4, [1, 2, 3], 3)
    cut = ((1, 1), (2, 1), (3, 1))
    error = refused(Install(Ballot(5, 1), Proposal(view(6, [1, 2], 5), prev, cut)))
    assert "prev" in error.detail


@pytest.mark.parametrize(("view_id", "prev_id"), [(5, 5), (5, 6), (1, 1), (0, 0)])
def test_a_view_cannot_succeed_itself_or_a_later_view(view_id: int, prev_id: int) -> None:
    refused(Install(Ballot(5, 1), Proposal(view(view_id, [1, 2], prev_id), None, ())))
    refused(Prepare(Ballot(5, 1), (Member(1, 1),), view(view_id, [1, 2], prev_id)))


def test_other_field_bounds() -> None:
    settings_of = Settings
    bad: list[Message] = [
        Join(settings_of("x" * (MAX_TEXT_BYTES + 1), None, None, 1, ()), 0, False, None),
        Join(settings_of("lex", float("nan"), None, 1, ()), 0, False, None),
        Join(settings_of("lex", -1.0, None, 1, ()), 0, False, None),
        Join(settings_of("lex", None, 0, 1, ()), 0, False, None),
        Join(settings_of("lex", None, None, 0, ()), 0, False, None),
        Join(SETTINGS, -1, False, None),
        Join(SETTINGS, 0, False, (0, 1)),  # a position's view id is at least 1
        Accepted(Ballot(1, 1), 0),
        Promise(Ballot(1, 1), None, 0, None, Availability(0, (), ()), SETTINGS, None),
        Promise(Ballot(1, 1), None, 0, None,
                Availability(1, (), (HeldVertex(1, 0, ()),)), SETTINGS, None),
        Promise(Ballot(1, 1), None, 0, None,
                Availability(1, (), tuple(HeldVertex(1, s, ()) for s in range(1, 10))),
                SETTINGS, None),  # more held vertices than max_held_report
        Reject(Ballot(1, 1), Ballot(-1, 1), "r", ""),
        Reject(Ballot(1, 1), Ballot(1, MAX_NODE_ID + 1), "r", ""),
        Refuse(Member(1, MAX_INCARNATION + 1), "r", ""),
    ]
    for message in bad:
        refused(message)
    # a phi that is an int, a leaving flag that is an int
    for body in ([[b"lex", 1, None, 1, []], 0, False, None],
                 [[b"lex", None, None, 1, []], 0, 1, None]):
        data = KEYED.seal(msgpack.packb([5, 1, 0, 1, int(MsgType.JOIN), body]), WALL_MS)
        with pytest.raises(DecodeError):
            decode(data, KEYED, LIMITS)
    # a reason that is a msgpack str, a non-ascii reason
    for reason in ("r", b"\xff"):
        body = [[1, 1], [1, 1], reason, b""]
        data = KEYED.seal(msgpack.packb([5, 1, 0, 1, int(MsgType.REJECT), body],
                                        use_bin_type=True), WALL_MS)
        with pytest.raises(DecodeError):
            decode(data, KEYED, LIMITS)


@pytest.mark.parametrize("code", [0, 9, -1, True, 1.0, b"\x01", None])
def test_unknown_message_type_and_wrong_arity(code: object) -> None:
    data = KEYED.seal(msgpack.packb([5, 1, 0, 1, code, []], use_bin_type=True), WALL_MS)
    with pytest.raises(DecodeError):
        decode(data, KEYED, LIMITS)
    for t in MsgType:
        for extra in ([], [None] * 9):
            data = KEYED.seal(msgpack.packb([5, 1, 0, 1, int(t), extra]), WALL_MS)
            with pytest.raises(DecodeError, match="arity"):
                decode(data, KEYED, LIMITS)


def test_membership_header_bounds() -> None:
    body = encode_message(Accepted(Ballot(1, 1), 2))
    for header in ([5, -1, 0, 1], [5, MAX_NODE_ID + 1, 0, 1], [5, 1, -1, 1],
                   [5, 1, MAX_VIEW_ID + 1, 1], [5, 1, 0, -1], [5, 1, 0, MAX_INCARNATION + 1],
                   [5, 1, 0, False]):
        data = KEYED.seal(msgpack.packb([*header, *body]), WALL_MS)
        with pytest.raises(DecodeError):
            decode(data, KEYED, LIMITS)


# ----------------------------------------------------------------------------- strategies

node = st.one_of(st.integers(0, 20), st.just(MAX_NODE_ID))
seq0 = st.one_of(st.integers(0, 2**20), st.just(MAX_SEQ))
vid = st.one_of(st.integers(1, 2**20), st.just(MAX_VIEW_ID))
ballot = st.builds(Ballot, st.integers(0, 2**40), node)
member_list = st.lists(st.tuples(node, st.integers(0, MAX_INCARNATION)), min_size=1,
                       max_size=6, unique_by=lambda t: t[0]).map(
    lambda ms: tuple(Member(n, i) for n, i in sorted(ms)))
text = st.text(st.characters(min_codepoint=0, max_codepoint=127), max_size=40)
position = st.none() | st.tuples(vid, seq0)
pairs = st.lists(st.tuples(node, seq0), max_size=6).map(tuple)


@st.composite
def view_records(draw: st.DrawFn, view_id: int | None = None) -> ViewRecord:
    v = draw(vid) if view_id is None else view_id
    members = draw(member_list)
    potential = tuple(sorted(draw(st.sets(node, min_size=1, max_size=6))))
    prev = draw(st.integers(0, v - 1))
    return ViewRecord(v, members, potential, prev)


@st.composite
def proposals(draw: st.DrawFn) -> Proposal:
    nxt = draw(view_records())
    if nxt.prev_id == 0 or draw(st.booleans()):
        return Proposal(nxt, None, ())
    prev = draw(view_records(view_id=nxt.prev_id))
    cut = tuple((n, draw(seq0)) for n in prev.nodes)
    return Proposal(nxt, prev, cut)


settings_st = st.builds(
    Settings, text, st.none() | st.floats(0.0, 1e6), st.none() | st.integers(1, MAX_NODE_ID),
    st.integers(1, 2**40), st.lists(node, max_size=6).map(tuple))
availability = st.builds(
    Availability, vid, pairs,
    st.lists(st.builds(HeldVertex, node, st.integers(1, MAX_SEQ), pairs), max_size=4).map(tuple))
opt_view = st.none() | view_records()
accepted = st.none() | st.tuples(ballot, proposals())
message = st.one_of(
    st.builds(Join, settings_st, st.integers(0, MAX_VIEW_ID), st.booleans(), position),
    st.builds(Prepare, ballot, member_list, opt_view),
    st.builds(Promise, ballot, opt_view, st.integers(0, MAX_VIEW_ID), accepted,
              st.none() | availability, settings_st, position, st.booleans(),
              ).map(lambda p: p if p.accepted is not None else replace(p, accepted_held=True)),
    st.builds(Reject, ballot, ballot, text, text),
    st.builds(Accept, ballot, proposals(), st.booleans()),
    st.builds(Accepted, ballot, vid, st.none() | st.booleans()),
    st.builds(Install, ballot, proposals()),
    st.builds(Refuse, member_list.map(lambda ms: ms[0]), text, text),
)
membership_dg = st.builds(MembershipDatagram, node, st.integers(0, MAX_VIEW_ID),
                          st.integers(0, MAX_INCARNATION), message)
heartbeat_dg = st.builds(
    Datagram, st.just(Kind.HEARTBEAT), node, st.integers(0, MAX_VIEW_ID), seq0,
    st.lists(st.tuples(node, st.just(1), st.integers(1, 9)), max_size=3).map(tuple),
    st.just(()), pairs)
any_dg = membership_dg | heartbeat_dg


def decodes_or_fails_cleanly(data: bytes, auth: Authenticator) -> None:
    try:
        result = decode(data, auth, LIMITS)
    except DecodeError as exc:
        assert exc.reason
        return
    assert isinstance(result, Datagram | MembershipDatagram)


# ----------------------------------------------------------------------------- properties


@FUZZ
@given(any_dg)
def test_generated_datagrams_round_trip(dg: Datagram | MembershipDatagram) -> None:
    for auth in AUTHS:
        assert round_trip(dg, auth) == dg


@FUZZ
@given(st.binary(max_size=512), st.integers(0, 8))
def test_random_bytes_in_a_membership_body(data: bytes, code: int) -> None:
    decodes_or_fails_cleanly(data, KEYED)
    decodes_or_fails_cleanly(data, INSECURE)
    header = msgpack.packb([5, 1, 0, 1, code, None])[:-1]  # array header and fields, no body
    decodes_or_fails_cleanly(INSECURE.seal(header + data, WALL_MS), INSECURE)


documents = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.floats(),
              st.binary(max_size=16), st.text(max_size=4)),
    lambda children: st.lists(children, max_size=8)
    | st.dictionaries(st.integers(0, 2**32), children, max_size=3),
    max_leaves=40,
)


@pytest.mark.slow
@FUZZ
@given(st.integers(0, 9), documents)
def test_arbitrary_msgpack_documents_as_membership_body(code: int, body: object) -> None:
    raw = msgpack.packb([5, 1, 0, 1, code, body], use_bin_type=True)
    decodes_or_fails_cleanly(KEYED.seal(raw, WALL_MS), KEYED)
    decodes_or_fails_cleanly(INSECURE.seal(raw, WALL_MS), INSECURE)


@st.composite
def mutated(draw: st.DrawFn, doc: object) -> object:
    """``doc`` (a msgpack document) with one leaf or list replaced by an arbitrary one."""
    if isinstance(doc, list) and doc and draw(st.integers(0, 3)):
        i = draw(st.integers(0, len(doc) - 1))
        return [*doc[:i], draw(mutated(doc[i])), *doc[i + 1:]]
    return draw(documents)


@pytest.mark.slow
@FUZZ
@given(membership_dg, st.data())
def test_structurally_mutated_membership_datagrams(dg: MembershipDatagram,
                                                  data: st.DataObject) -> None:
    code, body = encode_message(dg.message)
    doc = [5, dg.sender, dg.view, dg.incarnation, code, body]
    raw = msgpack.packb(data.draw(mutated(doc)), use_bin_type=True)
    decodes_or_fails_cleanly(INSECURE.seal(raw, WALL_MS), INSECURE)


@pytest.mark.slow
@FUZZ
@given(any_dg, st.data())
def test_byte_mutated_valid_datagrams(dg: Datagram | MembershipDatagram,
                                      data: st.DataObject) -> None:
    for auth in AUTHS:
        raw = bytearray(encode(dg, auth, WALL_MS))
        for _ in range(data.draw(st.integers(1, 4))):
            i = data.draw(st.integers(0, len(raw) - 1))
            raw[i] = data.draw(st.integers(0, 255))
        decodes_or_fails_cleanly(bytes(raw), auth)
        if data.draw(st.booleans()):
            cut = data.draw(st.integers(0, len(raw)))
            decodes_or_fails_cleanly(bytes(raw[:cut]) + bytes(raw[cut + 1:]), auth)


@settings(max_examples=200, derandomize=True, database=None, deadline=None)
@given(any_dg)
def test_truncated_at_every_offset(dg: Datagram | MembershipDatagram) -> None:
    for auth in AUTHS:
        raw = encode(dg, auth, WALL_MS)
        for cut in range(len(raw)):
            try:
                decode(raw[:cut], auth, LIMITS)
            except DecodeError:
                continue
            raise AssertionError(f"truncation at {cut} of {len(raw)} decoded")


def test_every_sample_truncated_at_every_offset() -> None:
    for message in SAMPLES:
        raw = encode(MembershipDatagram(3, 4, 7, message), INSECURE, WALL_MS)
        for cut in range(len(raw)):
            with pytest.raises(DecodeError):
                decode(raw[:cut], INSECURE, LIMITS)
