"""Batches: the datagrams of one round for the same member go as one, and a member
takes a batch's datagrams one by one, as if each came alone."""

from __future__ import annotations

from amcast.protocols.federation import (
    DroppedRemote,
    FederationConfig,
    FederationMember,
    OrderLocally,
    SendRemote,
    batch_sends,
)
from amcast.protocols.federation.batching import MAX_BATCH_BYTES
from amcast.protocols.federation.simulation import random_scenario, run_scenario
from amcast.protocols.federation.wire import (
    MAX_BATCH,
    DgAck,
    DgBatch,
    DgSubmit,
    DgTimestamp,
    decode_datagram,
    encode_datagram,
)

CLUSTERS = {"a": ("a1", "a2"), "b": ("b1", "b2")}


def _ack(seq: int) -> bytes:
    return encode_datagram(DgAck(("b", "b1", seq), True, ("a", "b"), False))


def test_sends_for_one_member_are_joined_and_the_rest_keep_their_order() -> None:
    order = OrderLocally(b"r")
    outs = [SendRemote("b", "b1", _ack(1)), order, SendRemote("b", "b2", _ack(2)),
            SendRemote("b", "b1", _ack(3))]
    joined = batch_sends(outs)
    assert joined[0] is order and len(joined) == 3
    first = joined[1]
    assert isinstance(first, SendRemote) and first.node == "b1"
    assert decode_datagram(first.datagram) == DgBatch(
        (decode_datagram(_ack(1)), decode_datagram(_ack(3))))  # type: ignore[arg-type]
    assert joined[2] == SendRemote("b", "b2", _ack(2))  # alone: as it was


def test_batches_stay_within_their_count_and_bytes() -> None:
    many = [SendRemote("b", "b1", _ack(i)) for i in range(2 * MAX_BATCH + 1)]
    sizes = [len(decode_datagram(o.datagram).items)  # type: ignore[union-attr]
             if isinstance(o, SendRemote) and o.datagram[2] == 2 else 1
             for o in batch_sends(many)]
    assert sizes == [MAX_BATCH, MAX_BATCH, 1]
    big = encode_datagram(DgSubmit(("a", "a1", 1), ("a", "b"), "g", b"x" * MAX_BATCH_BYTES))
    outs = batch_sends([SendRemote("b", "b1", _ack(1)), SendRemote("b", "b1", big),
                        SendRemote("b", "b1", _ack(2))])
    assert [o.datagram for o in outs if isinstance(o, SendRemote)] == [_ack(1), big, _ack(2)]


def test_a_member_takes_a_batch_as_its_datagrams_one_by_one() -> None:
    alone = FederationMember(FederationConfig("a", CLUSTERS), "a1")
    batched = FederationMember(FederationConfig("a", CLUSTERS), "a1")
    dgs = [DgSubmit(("b", "b1", 1), ("a", "b"), "g", b"1"),
           DgTimestamp(("b", "b1", 1), ("a", "b"), "b", 4),
           DgSubmit(("b", "b2", 9), ("a", "b"), "g", b"2"),
           DgSubmit(("b", "b2", 10), ("b",), "g", b"3")]  # not addressed to a: dropped
    one_by_one = [o for d in dgs for o in alone.on_remote(0.0, "b", "b1", encode_datagram(d))]
    together = batched.on_remote(0.0, "b", "b1", encode_datagram(DgBatch(tuple(dgs))))
    assert together == one_by_one
    assert sum(isinstance(o, OrderLocally) for o in together) == 3
    assert [o for o in together if isinstance(o, DroppedRemote)] == [
        DroppedRemote("not_addressed")]


def test_the_simulation_sends_batches_and_counts_their_datagrams() -> None:
    r = run_scenario(random_scenario(3), 3)
    assert r.violations == []
    assert r.sent_by_kind["DgBatch"] > 0
