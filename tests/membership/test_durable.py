"""The state that survives a restart: round trip, damaged files, another node's file,
and the next incarnation."""

from __future__ import annotations

from dataclasses import replace

import msgpack
import pytest
from amcast.protocols.errors import ConfigurationError
from amcast.protocols.membership.durable import FORMAT, MAX_LIVES, DurableState
from amcast.protocols.wire.membership import Ballot, Member, Proposal, ViewRecord
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

V3 = ViewRecord(3, (Member(1, 5), Member(2, 9), Member(4, 1)), (1, 2, 3, 4), 2)
V4 = ViewRecord(4, (Member(1, 5), Member(2, 9)), (1, 2, 3, 4), 3)
FULL = DurableState(
    node_id=2, incarnation=1_700_000_000_123, promised=Ballot(12, 1),
    accepted=(Ballot(11, 4), Proposal(V4, V3, ((1, 7), (2, 0), (4, 2**40)))),
    known=V3, max_view_id=12,
)
FIRST = DurableState(
    node_id=2, incarnation=3, promised=Ballot(1, 1),
    accepted=(Ballot(1, 1), Proposal(ViewRecord.agreed([1, 2, 3]), None, ())), known=None,
)
STATES = [DurableState(node_id=0), DurableState(node_id=2**32 - 1, incarnation=2**63 - 1),
          FULL, FIRST, replace(FULL, accepted_held=False),
          replace(FULL, origin=1_700_000_000_001, lives=(1_700_000_000_001, 1_700_000_000_123)),
          replace(FULL, lives=(1_700_000_000_123,))]
FUZZ = settings(max_examples=2000, derandomize=True, database=None, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("state", STATES)
def test_round_trip(state: DurableState) -> None:
    assert DurableState.decode(state.encode(), state.node_id) == state


def test_a_vote_recorded_by_an_older_version_reads_as_a_holders() -> None:
    """Before votes said whether they held the cut, the record was ``[ballot, proposal]``:
    read as held, the cautious reading (a later round keeps the proposal)."""
    obj = msgpack.unpackb(replace(FULL, accepted_held=False).encode())
    assert obj[4][2] is False
    obj[4] = obj[4][:2]
    state = DurableState.decode(msgpack.packb(obj), 2)
    assert state.accepted == FULL.accepted and state.accepted_held


def test_state_of_another_node_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="belongs to node 2, not 3"):
        DurableState.decode(FULL.encode(), 3)


def test_restarted_takes_the_larger_of_previous_plus_one_and_the_floor() -> None:
    assert FIRST.restarted(0).incarnation == 4
    assert FIRST.restarted(4).incarnation == 4
    assert FIRST.restarted(5).incarnation == 5
    assert FIRST.restarted(1_700_000_000_000).incarnation == 1_700_000_000_000
    assert FULL.restarted(1_700_000_000_000).incarnation == 1_700_000_000_124
    again = FULL.restarted(0)
    assert (again.node_id, again.promised, again.accepted, again.known, again.max_view_id) == (
        FULL.node_id, FULL.promised, FULL.accepted, FULL.known, FULL.max_view_id)
    assert DurableState(node_id=1).restarted(0).incarnation == 1


def test_a_first_record_begins_at_its_incarnation_and_keeps_that_origin() -> None:
    """``origin`` is the incarnation a record began with: a restart keeps it and adds
    its incarnation to the ``lives`` (the last ``MAX_LIVES``); a record of an older
    release (seven fields) reads as origin 0 with no lives, counted as ever."""
    first = DurableState.first(2, 1_700_000_000_000)
    assert (first.incarnation, first.origin, first.lives, first.known) == (
        1_700_000_000_000, 1_700_000_000_000, (1_700_000_000_000,), None)
    assert DurableState.first(2, 0).origin == 1
    again = first.restarted(1_700_000_000_500)
    assert (again.incarnation, again.origin, again.lives) == (
        1_700_000_000_500, 1_700_000_000_000, (1_700_000_000_000, 1_700_000_000_500))
    assert DurableState.decode(again.encode(), 2) == again
    assert len(msgpack.unpackb(FULL.encode())) == 7  # no origin: the older record
    assert DurableState.decode(FULL.encode(), 2).origin == 0
    assert FULL.restarted(0).lives == (FULL.incarnation + 1,)  # an older record goes on
    many = first
    for _ in range(MAX_LIVES + 5):
        many = many.restarted(0)
    assert len(many.lives) == MAX_LIVES and many.lives[-1] == many.incarnation
    assert many.origin == 1_700_000_000_000
    assert DurableState.decode(many.encode(), 2) == many
    top = DurableState.first(2, 2**63 - 1)
    assert top.restarted(0) == top  # the largest incarnation: nothing to add


def damaged(data: bytes, node_id: int = 2) -> None:
    """Decoding ``data`` either yields a state of ``node_id`` or raises ConfigurationError."""
    try:
        state = DurableState.decode(data, node_id)
    except ConfigurationError as exc:
        assert str(exc)
        return
    assert isinstance(state, DurableState) and state.node_id == node_id


@pytest.mark.parametrize(
    "obj",
    [
        None, 1, [], [FORMAT], [FORMAT + 1, 2, 1, [0, 0], None, None, 0],
        [FORMAT, 2, 1, [0, 0], None, None],  # arity
        [FORMAT, 2, 1, [0, 0], None, None, 0, 0],  # arity: origin without lives
        [FORMAT, 2, 1, [0, 0], None, None, 0, -4, [1]],  # negative origin
        [FORMAT, 2, 1, [0, 0], None, None, 0, b"1", [1]],  # origin not an int
        [FORMAT, 2, 1, [0, 0], None, None, 0, 1, []],  # no lives
        [FORMAT, 2, 1, [0, 0], None, None, 0, 1, 1],  # lives not a list
        [FORMAT, 2, 1, [0, 0], None, None, 0, 5, [3]],  # a life before the origin
        [FORMAT, 2, 1, [0, 0], None, None, 0, 1, [3, 3]],  # lives not increasing
        [FORMAT, 2, 1, [0, 0], None, None, 0, 1, list(range(1, 35))],  # too many
        [FORMAT, 2, 1, [0, 0], None, None, 0, 1, [1], 0],  # arity
        [FORMAT, 2, b"1", [0, 0], None, None, 0],  # incarnation not an int
        [FORMAT, 2, 1, [0, 0], None, None, 1.5],  # max_view_id not an int
        [FORMAT, 2, 1, [0], None, None, 0],  # ballot arity
        [FORMAT, 2, 1, [0, 0], [[1, 1]], None, 0],  # accepted without a proposal
        [FORMAT, 2, 1, [0, 0], [[1, 1], [[1, [], [], 0], None, []], 1], None, 0],  # held
        [FORMAT, 2, 1, [0, 0], 7, None, 0],
        [FORMAT, 2, 1, [0, 0], b"xx", None, 0],
        [FORMAT, 2, 1, [0, 0], {0: 1}, None, 0],
        [FORMAT, 2, 1, [0, 0], None, [3, [1, 1], [1], 3], 0],  # view succeeding itself
        [FORMAT, 2, 1, [0, 0], None, [3, [2, 1, 1, 1], [1, 2], 2], 0],  # unsorted members
        [FORMAT, 2, 1, {1: 2}, None, None, 0],
    ],
)
def test_damaged_documents_are_configuration_errors(obj: object) -> None:
    with pytest.raises(ConfigurationError, match="damaged"):
        DurableState.decode(msgpack.packb(obj), 2)


def test_msgpack_strings_and_garbage_are_configuration_errors() -> None:
    for data in (msgpack.packb([FORMAT, "2", 1, [0, 0], None, None, 0]), b"", b"\xc1",
                 b"\x91" * 100_000 + b"\xc0", b"\xdd\xff\xff\xff\xff"):
        with pytest.raises(ConfigurationError):
            DurableState.decode(data, 2)


@FUZZ
@given(st.binary(max_size=256))
def test_random_bytes(data: bytes) -> None:
    damaged(data)


@settings(max_examples=50, derandomize=True, database=None, deadline=None)
@given(st.sampled_from(STATES), st.data())
def test_truncations_and_mutations(state: DurableState, data: st.DataObject) -> None:
    raw = state.encode()
    for cut in range(len(raw)):
        with pytest.raises(ConfigurationError):
            DurableState.decode(raw[:cut], state.node_id)
    mutated = bytearray(raw)
    for _ in range(data.draw(st.integers(1, 4))):
        mutated[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    damaged(bytes(mutated), state.node_id)


@pytest.mark.parametrize(
    "obj",
    [
        [FORMAT, 2.0, 1, [0, 0], None, None, 0],  # node id a float (2.0 == 2)
        [FORMAT, True, 1, [0, 0], None, None, 0],  # node id a bool, for node 1
        [FORMAT, 2, -5, [0, 0], None, None, 0],  # negative incarnation (the wire refuses it)
        [FORMAT, 2, 2**64 - 1, [0, 0], None, None, 0],  # restarted() cannot be encoded
        [FORMAT, 2, 1, [0, 0], None, None, -3],  # negative max_view_id
    ],
)
def test_out_of_range_fields_are_configuration_errors(obj: list) -> None:
    node_id = 1 if obj[1] is True else 2
    with pytest.raises(ConfigurationError):
        DurableState.decode(msgpack.packb(obj), node_id)


def test_a_restarted_state_always_encodes() -> None:
    """What ``decode`` accepts, ``restarted(floor).encode()`` writes back (today that holds
    only for incarnations below 2**64 - 1, see the test above)."""
    for incarnation in (0, 5, 2**63 - 2):
        state = DurableState(node_id=2, incarnation=incarnation)
        again = DurableState.decode(state.restarted(1).encode(), 2)
        assert again.incarnation == incarnation + 1
