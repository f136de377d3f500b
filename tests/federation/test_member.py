"""One ``FederationMember`` and small federations driven by hand: Skeen's order, acks and
retransmissions, refusals, stalls and their recovery, deadlines and order gaps (the
outcomes reported to the sender), joiners, snapshots, the horizon."""

from __future__ import annotations

from collections import deque

import pytest
from amcast.protocols.errors import BackpressureError
from amcast.protocols.federation import (
    Deliver,
    DroppedRemote,
    FederationConfig,
    FederationMember,
    OrderLocally,
    Output,
    SendRemote,
    Stalled,
    Undelivered,
)
from amcast.protocols.federation.state import ClusterState
from amcast.protocols.federation.wire import (
    DgAck,
    DgSubmit,
    DgTimestamp,
    RecSubmit,
    RecTimestamp,
    decode_datagram,
    encode_datagram,
    encode_record,
)

CLUSTERS = {"a": ("a1", "a2", "a3"), "b": ("b1", "b2"), "c": ("c1",)}


def config(cluster: str, **kw: float) -> FederationConfig:
    return FederationConfig(cluster, CLUSTERS, **kw)  # type: ignore[arg-type]


class Fed:
    """A federation in lock step: an ordered record reaches every attached member of its
    cluster at once, a datagram arrives after the ones sent before it; ``cut`` clusters
    neither send nor receive datagrams."""

    def __init__(self, **kw: float) -> None:
        self.cluster_of = {n: c for c, ns in CLUSTERS.items() for n in ns}
        self.members = {n: FederationMember(config(c, **kw), n) for n, c in
                        self.cluster_of.items()}
        self.queue: deque[tuple[str, ...] | tuple[str, str, bytes]] = deque()
        self.delivered: dict[str, list[Deliver]] = {n: [] for n in self.members}
        self.other: dict[str, list[Output]] = {n: [] for n in self.members}
        self.cut: set[str] = set()
        self.down: set[str] = set()
        self.now = 0.0
        self.sent: list[tuple[str, str, object]] = []

    def emit(self, node: str, outs: list[Output]) -> None:
        for o in outs:
            if isinstance(o, SendRemote):
                self.sent.append((node, o.node, decode_datagram(o.datagram)))
                src = self.cluster_of[node]
                if src not in self.cut and o.cluster not in self.cut:
                    self.queue.append(("remote", node, o.node, o.datagram))  # type: ignore[arg-type]
            elif isinstance(o, OrderLocally):
                self.queue.append(("order", self.cluster_of[node], o.record))  # type: ignore[arg-type]
            elif isinstance(o, Deliver):
                self.delivered[node].append(o)
            else:
                self.other[node].append(o)

    def run(self, until: float | None = None, step: float = 0.05) -> None:
        """Drain the queue; with ``until``, also tick every member every ``step``."""
        while True:
            while self.queue:
                self.now += 0.001
                item = self.queue.popleft()
                if item[0] == "remote":
                    _, src, dst, data = item
                    if dst not in self.down:
                        self.emit(dst, self.members[dst].on_remote(  # type: ignore[arg-type]
                            self.now, self.cluster_of[src], src, data))  # type: ignore[arg-type]
                else:
                    _, cluster, record = item
                    for n, c in self.cluster_of.items():
                        if c == cluster and n not in self.down:
                            self.emit(n, self.members[n].on_ordered(self.now, record))  # type: ignore[arg-type]
            if until is None or self.now >= until:
                return
            self.now += step
            for n, m in self.members.items():
                if n not in self.down:
                    self.emit(n, m.tick(self.now))

    def ids(self, node: str) -> list[tuple[str, str, int]]:
        return [d.msg_id for d in self.delivered[node]]


def test_every_destination_delivers_in_one_order() -> None:
    fed = Fed()
    fed.emit("a1", fed.members["a1"].multicast(0.0, "g", b"1", ["a", "b"]))
    fed.emit("b2", fed.members["b2"].multicast(0.0, "g", b"2", ["a", "b", "c"]))
    fed.emit("c1", fed.members["c1"].multicast(0.0, "g", b"3", ["b", "c"]))
    fed.emit("a2", fed.members["a2"].multicast(0.0, "g", b"4", ["c"]))
    fed.run()
    order = sorted({d.msg_id: (d.gts, d.msg_id) for ds in fed.delivered.values()
                    for d in ds}.items(), key=lambda kv: kv[1])
    for node, cluster in fed.cluster_of.items():
        mine = fed.ids(node)
        assert mine == [m for m, _ in order if cluster in fed_dst(fed, m)], node
    d = fed.delivered["b1"][0]
    assert d.group == "g" and d.clusters == tuple(sorted(d.clusters))
    # nothing left to retransmit, nobody reports anything
    fed.run(until=20.0)
    assert all(not m.in_flight() for m in fed.members.values())
    assert all(not o for o in fed.other.values())
    for m in fed.members.values():  # bounded: nothing kept for finished messages
        assert not (m._own or m._stamps or m._reply_to or m._injected or m._seen
                    or m._stall_next)
        assert m.state is not None and not (m.state.pending or m.state.early)


def fed_dst(fed: Fed, m: tuple[str, str, int]) -> tuple[str, ...]:
    return next(d.clusters for ds in fed.delivered.values() for d in ds if d.msg_id == m)


def test_multicast_refuses_unknown_or_local_destinations_and_a_full_window() -> None:
    member = FederationMember(config("a", max_in_flight=2), "a1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown"):
        member.multicast(0.0, "g", b"x", ["a", "mars"])
    with pytest.raises(ValueError, match="local"):
        member.multicast(0.0, "g", b"x", ["a"])
    member.multicast(0.0, "g", b"x", ["b"])
    assert member.last_id == ("a", "a1", 1)
    member.multicast(0.0, "g", b"x", ["a", "b"])
    with pytest.raises(BackpressureError):
        member.multicast(0.0, "g", b"x", ["b"])


def test_bad_datagrams_are_dropped_and_counted_never_raised() -> None:
    member = FederationMember(config("a"), "a1")
    assert member.on_remote(0.0, "b", "b1", b"\xc1f\x01\xc1") == [DroppedRemote("malformed")]
    assert member.on_remote(0.0, "b", "b9", b"") == [DroppedRemote("unknown_sender")]
    assert member.on_remote(0.0, "a", "a2", b"") == [DroppedRemote("unknown_sender")]
    m = ("b", "b1", 1)
    to_c = encode_datagram(DgSubmit(m, ("b", "c"), "g", b""))
    assert member.on_remote(0.0, "b", "b1", to_c) == [DroppedRemote("not_addressed")]
    forged = encode_datagram(DgTimestamp(m, ("a", "b", "c"), "c", 3))
    assert member.on_remote(0.0, "b", "b1", forged) == [DroppedRemote("bad_origin")]
    relayed = encode_datagram(DgSubmit(m, ("a", "b"), "g", b""))
    assert member.on_remote(0.0, "c", "c1", relayed) == [DroppedRemote("not_addressed")]
    assert member.counters["dropped_malformed"] == 1
    assert member.on_ordered(0.0, b"junk") == []
    assert member.counters["bad_record_malformed"] == 1


def test_a_submit_is_sent_again_to_another_member_until_acknowledged() -> None:
    member = FederationMember(config("a", retransmit_s=0.2), "a1")  # type: ignore[arg-type]
    first = member.multicast(0.0, "g", b"x", ["b"])
    targets = [o.node for o in first if isinstance(o, SendRemote)]
    again = member.tick(0.25)
    targets += [o.node for o in again if isinstance(o, SendRemote)]
    assert targets == ["b2", "b1"]  # seq 1: b2 first, then the other member
    m = member.last_id
    assert m is not None
    member.on_remote(0.3, "b", "b1", encode_datagram(DgAck(m, True, ("b",), False)))
    assert member.tick(10.0) == [] and member.in_flight() == []


def test_duplicate_submits_in_the_order_are_delivered_once() -> None:
    fed = Fed()
    fed.emit("a1", fed.members["a1"].multicast(0.0, "g", b"x", ["a", "b"]))
    m = fed.members["a1"].last_id
    assert m is not None
    dup = encode_record(RecSubmit(m, ("a", "b"), "g", b"x"))
    fed.queue.extend([("order", "a", dup), ("order", "b", dup)])  # type: ignore[list-item]
    fed.run(until=2.0)
    assert all(fed.ids(n) == [m] for n in fed.members if n != "c1")
    assert fed.members["a1"].counters["ignored_submit"] >= 1


def test_an_unreachable_cluster_stalls_its_messages_then_they_finish() -> None:
    fed = Fed(stall_after_s=1.0, retransmit_s=0.1)
    fed.cut = {"b"}
    fed.emit("a1", fed.members["a1"].multicast(0.0, "g", b"x", ["a", "b"]))
    fed.emit("a2", fed.members["a2"].multicast(0.0, "g", b"y", ["a", "c"]))
    fed.run(until=3.0)
    m = fed.members["a1"].last_id
    behind = fed.members["a2"].last_id
    stalls = [o for o in fed.other["a3"] if isinstance(o, Stalled)]
    assert {s.msg_id for s in stalls} == {m, behind}
    # the message to {a, c} has all its timestamps: it waits behind m, which waits for b
    assert {s.clusters_waited_for for s in stalls} == {("b",)}
    mine = [s for s in stalls if s.msg_id == m]
    assert mine[0].age_s >= 1.0
    assert len(mine) >= 2 and mine[-1].age_s > mine[0].age_s  # repeated, older
    flight = {f.msg_id: f for f in fed.members["a3"].in_flight()}
    assert flight[m].waiting_for == ("b",) and flight[m].age_s >= 2.0  # type: ignore[index]
    assert fed.ids("a3") == []  # the message to {a, c} waits behind m's smaller key
    fed.cut = set()
    fed.run(until=8.0)
    for n in ("a1", "a2", "a3"):
        assert len(fed.ids(n)) == 2 and fed.ids(n) == fed.ids("a1")
    assert fed.ids("b1") == fed.ids("b2") == [m]
    assert all(not member.in_flight() for member in fed.members.values())


def test_a_sender_that_reaches_one_cluster_only_still_reaches_all() -> None:
    """The sender's Submit reaches c only and the sender is gone: c's timestamp tells b
    about m, b's ack says it lacks the Submit, and c's member sends it."""
    fed = Fed()
    fed.down = {"a1"}
    outs = fed.members["a1"].multicast(0.0, "g", b"x", ["b", "c"])
    only_c = [o for o in outs if isinstance(o, SendRemote) and o.cluster == "c"]
    fed.emit("a1", only_c)  # type: ignore[arg-type]
    fed.run(until=5.0)
    m = fed.members["a1"].last_id
    assert fed.ids("b1") == fed.ids("b2") == fed.ids("c1") == [m]
    assert any(isinstance(d, DgSubmit) for src, _, d in fed.sent if src == "c1")


def test_a_joiner_gets_the_state_through_the_order() -> None:
    fed = Fed()
    fed.emit("a1", fed.members["a1"].multicast(0.0, "g", b"1", ["a", "b"]))
    fed.run()
    fed.cut = {"b"}  # a second message stays pending in a's state
    fed.emit("a2", fed.members["a2"].multicast(0.0, "g", b"2", ["a", "b"]))
    fed.run()
    fed.down = {"a3"}
    joiner = fed.members["a3"] = FederationMember(config("a"), "a3", joining=True)
    fed.delivered["a3"] = []  # the new incarnation's deliveries
    fed.down = set()
    fed.emit("a3", joiner.on_view(fed.now, ["a1", "a2", "a3"]))
    for n in ("a1", "a2"):
        fed.emit(n, fed.members[n].on_view(fed.now, ["a1", "a2", "a3"]))
    fed.run()
    assert joiner.state is not None and joiner.counters["snapshots_installed"] == 1
    assert sum(fed.members[n].counters["snapshots_sent"] for n in ("a1", "a2")) == 1
    fed.cut = set()
    fed.emit("b1", fed.members["b1"].multicast(fed.now, "g", b"3", ["a", "b"]))
    fed.run(until=fed.now + 5.0)
    assert len(fed.ids("a1")) == 3
    assert fed.ids("a3") == fed.ids("a1")[1:]  # the pending one and the new one


def test_a_joiner_asks_again_when_nobody_answers() -> None:
    joiner = FederationMember(config("a", snapshot_retry_s=1.0), "a3", joining=True)  # type: ignore[arg-type]
    first = joiner.on_view(0.0, ["a1", "a3"])
    assert len(first) == 1 and isinstance(first[0], OrderLocally)
    assert joiner.tick(0.5) == []
    again = joiner.tick(1.2)
    assert len(again) == 1 and again[0] != first[0]  # a new nonce
    assert joiner.on_remote(2.0, "b", "b1", b"\xc1f\x01\x90") == [DroppedRemote("bad_field")]


def test_snapshot_and_restore_resume_the_timestamps() -> None:
    fed = Fed()
    fed.cut = {"b"}
    fed.emit("a1", fed.members["a1"].multicast(0.0, "g", b"x", ["a", "b"]))
    fed.run()
    data = fed.members["a2"].snapshot()
    restored, outs = FederationMember.restore(config("a"), "a3", data, fed.now)
    assert [type(decode_datagram(o.datagram)) for o in outs
            if isinstance(o, SendRemote)] == [DgTimestamp]
    assert restored.snapshot() == data
    with pytest.raises(ValueError):
        FederationMember(config("a"), "a3", joining=True).snapshot()


def test_delivered_ids_are_forgotten_beyond_the_horizon_but_duplicates_stay_out() -> None:
    st = ClusterState("a", horizon=2, max_pending=10)
    for seq in (1, 2, 3):
        lts, out = st.apply_submit(("b", "b1", seq), ("a",), "g", b"")
        assert lts is not None and len(out) == 1
    assert len(st.done) == 2 and st.floors == {("b", "b1"): 1}
    assert st.apply_submit(("b", "b1", 1), ("a",), "g", b"") == (None, [])  # below floor
    assert st.apply_submit(("b", "b1", 3), ("a",), "g", b"") == (None, [])  # remembered
    assert st.holds(("b", "b1", 1)) == (True, (), True)


def test_the_state_delivers_by_final_key_only() -> None:
    st = ClusterState("a", horizon=10, max_pending=10)
    m1, m2 = ("b", "b1", 1), ("c", "c1", 1)
    assert st.apply_submit(m1, ("a", "b"), "g", b"")[0] == 1
    assert st.apply_submit(m2, ("a",), "g", b"") == (2, [])  # final, behind m1's lower bound
    out = st.apply_timestamp(m1, "b", 5)
    assert [(d.msg_id, d.gts) for d in out] == [(m2, 2), (m1, 5)]
    assert st.clock == 5
    assert st.apply_submit(("b", "b1", 2), ("a", "b"), "g", b"")[0] == 6
    again = ClusterState.decode(st.encode(), "a", 10, 10, ["a", "b", "c"])
    assert again.encode() == st.encode()


def test_a_joiner_does_not_deliver_what_it_replays() -> None:
    """Records ordered between the joiner's request and the state finish a message: the
    others deliver it there, the joiner (which delivered local messages in that stretch
    of the order) must not, or its sequence would put it after those local messages."""
    fed = Fed()
    fed.cut = {"b"}
    fed.emit("a1", fed.members["a1"].multicast(0.0, "g", b"x", ["a", "b"]))
    fed.run()
    m = fed.members["a1"].last_id
    joiner = fed.members["a3"] = FederationMember(config("a"), "a3", joining=True)
    fed.delivered["a3"] = []
    request = joiner.on_view(fed.now, ["a1", "a2", "a3"])
    fed.members["a1"].on_view(fed.now, ["a1", "a2", "a3"])
    fed.members["a2"].on_view(fed.now, ["a1", "a2", "a3"])
    fed.emit("a3", request)
    # the request, then b's timestamp (m is delivered there), then the state
    b_ts = encode_record(RecTimestamp(m, "b", 1))  # type: ignore[arg-type]
    fed.queue.insert(1, ("order", "a", b_ts))  # type: ignore[arg-type]
    fed.run()
    assert fed.ids("a1") == fed.ids("a2") == [m]
    assert joiner.state is not None and fed.ids("a3") == []
    assert joiner.counters["skipped_while_joining"] == 1


def test_one_member_sends_the_timestamp_and_the_others_only_back_it_up() -> None:
    """Every member of a holds a's timestamp of m; the designated one sends it, b orders
    it once and acks every member of a, so the backups never send it."""
    fed = Fed()
    fed.emit("a1", fed.members["a1"].multicast(0.0, "g", b"x", ["a", "b"]))
    fed.run(until=10.0)
    m = fed.members["a1"].last_id
    assert m is not None
    assert fed.ids("a1") == fed.ids("a2") == fed.ids("a3") == fed.ids("b1") == [m]
    stamps = [(src, d.cluster) for src, _, d in fed.sent if isinstance(d, DgTimestamp)]
    designated_a = CLUSTERS["a"][m[2] % 3]
    designated_b = CLUSTERS["b"][m[2] % 2]
    assert stamps == [(designated_b, "b"), (designated_a, "a")] or stamps == [
        (designated_a, "a"), (designated_b, "b")]
    acks_to_a = {dst for src, dst, d in fed.sent if isinstance(d, DgAck) and src[0] == "b"}
    assert acks_to_a == set(CLUSTERS["a"])
    assert all(member.counters["retransmit_timestamp"] == 0
               for member in fed.members.values())


@pytest.mark.parametrize("crashed", ["a", "b"])
def test_a_crashed_designated_member_costs_a_retransmission_not_the_message(
        crashed: str) -> None:
    fed = Fed()
    seq = fed.members["a1"].next_seq
    down = CLUSTERS[crashed][seq % len(CLUSTERS[crashed])]
    assert down != "a1"  # the sender stays up
    fed.down = {down}
    fed.emit("a1", fed.members["a1"].multicast(0.0, "g", b"x", ["a", "b"]))
    fed.run(until=0.1)
    m = fed.members["a1"].last_id
    assert fed.ids("a1") == []  # the designated member's timestamp never came
    fed.run(until=10.0)
    for n in fed.members:
        assert fed.ids(n) == ([] if n == down or n == "c1" else [m]), n
    backups = [n for n in CLUSTERS[crashed] if n != down]
    assert sum(fed.members[n].counters["retransmit_timestamp"] for n in backups) >= 1


def test_a_timestamp_ordered_before_its_submit_is_acknowledged_again_with_it() -> None:
    """b orders a's Timestamp before m's Submit: its ack says it lacks the Submit; once
    the Submit is ordered it acks every member of a again, and no member of a has
    anything left to send, without a single retransmission."""
    fed = Fed()
    outs = fed.members["a1"].multicast(0.0, "g", b"x", ["a", "b"])
    held = [o for o in outs if isinstance(o, SendRemote)]
    fed.emit("a1", [o for o in outs if not isinstance(o, SendRemote)])
    fed.run()
    m = fed.members["a1"].last_id
    lacking = [d for src, _, d in fed.sent if isinstance(d, DgAck) and not d.submit]
    assert {dst for src, dst, d in fed.sent
            if isinstance(d, DgAck) and not d.submit} == set(CLUSTERS["a"]) and lacking
    assert all(fed.members[n]._stamps for n in CLUSTERS["a"])
    fed.emit("a1", held)  # type: ignore[arg-type]
    fed.run()
    assert all(not fed.members[n]._stamps for n in CLUSTERS["a"])
    assert fed.ids("a2") == fed.ids("b1") == fed.ids("b2") == [m]
    assert all(member.counters["retransmit_timestamp"] == 0
               and member.counters["retransmit_submit"] == 0
               for member in fed.members.values())


def reports(fed: Fed, node: str) -> list[Undelivered]:
    return [o for o in fed.other[node] if isinstance(o, Undelivered)]


def test_a_message_past_its_deadline_is_reported_once_as_unknown_and_still_delivered(
) -> None:
    fed = Fed(deadline_s=1.0, retransmit_s=0.1, stall_after_s=0.5)
    fed.cut = {"b"}
    sender = fed.members["a1"]
    fed.emit("a1", sender.multicast(0.0, "g", b"x", ["a", "b"]))
    m = sender.last_id
    fed.run(until=3.0)
    got = reports(fed, "a1")
    assert [(r.msg_id, r.reason, r.outcome, r.waiting_for) for r in got] == [
        (m, "deadline", "unknown", ("b",))]
    assert got[0].age_s >= 1.0
    assert all(reports(fed, n) == [] for n in fed.members if n != "a1")  # the sender's own
    assert sender.owns(m)  # still sent: the outcome is open, not "not delivered"
    fed.cut = set()
    fed.run(until=8.0)
    assert fed.ids("a1") == fed.ids("a2") == fed.ids("b1") == fed.ids("b2") == [m]
    assert not sender.owns(m) and len(reports(fed, "a1")) == 1  # reported once


def test_a_message_committed_in_time_is_never_reported() -> None:
    fed = Fed(deadline_s=0.5, retransmit_s=0.1)
    fed.emit("c1", fed.members["c1"].multicast(0.0, "g", b"x", ["a", "b"]))
    m = fed.members["c1"].last_id
    assert fed.members["c1"].owns(m) and fed.members["c1"].next_deadline() is not None
    fed.run(until=3.0)
    assert fed.ids("a3") == fed.ids("b1") == [m]
    assert not fed.members["c1"].owns(m)
    assert all(reports(fed, n) == [] for n in fed.members)


def test_a_new_member_after_an_order_gap_adopts_the_own_multicasts() -> None:
    """The sender's Submit records and datagrams are lost with its member (an order gap
    drops it): the daemon's next member adopts the multicast, which is delivered
    everywhere once, and reported at most once."""
    fed = Fed(deadline_s=1.0, retransmit_s=0.1)
    old = fed.members["a1"]
    old.multicast(0.0, "g", b"x", ["a", "b"])  # every output lost
    m = old.last_id
    assert m is not None
    fed.down = {"a1"}  # cut off from its order and the others: the gap
    fed.run(until=1.5)
    assert [r.msg_id for r in old.tick(1.5) if isinstance(r, Undelivered)] == [m]
    new = FederationMember(config("a", deadline_s=1.0, retransmit_s=0.1), "a1",
                           joining=True)
    new.adopt(old, fed.now)
    assert new.owns(m) and new.next_seq >= old.next_seq
    fed.members["a1"] = new
    fed.down = set()
    fed.emit("a1", new.on_view(fed.now, CLUSTERS["a"]))
    fed.run(until=6.0)
    assert new.state is not None
    for n in ("a2", "a3", "b1", "b2"):
        assert fed.ids(n) == [m]
    assert not new.owns(m) and reports(fed, "a1") == []  # reported by the old one only
    new.multicast(fed.now, "g", b"y", ["a", "b"])
    assert new.last_id is not None and new.last_id[2] > m[2]
