"""``amcast.client.state`` without a daemon: a scripted total order delivers every
member's messages to every member of the group, in one sequence, and the members'
states are compared."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from amcast.client import (
    BlockingClient,
    ClientError,
    DeliveredBatch,
    Delivery,
    MembersChange,
    OrderGap,
)
from amcast.client.state import StateTransfer
from tests.client.fakedaemon import FakeDaemon


@dataclass
class Member:
    """One replica: a list of applied payloads is its whole state."""

    me: tuple[int, int]
    clock: list[float]
    applied: list[bytes] = field(default_factory=list)
    st: StateTransfer = field(init=False)

    def __post_init__(self) -> None:
        self.st = StateTransfer("g", self.snapshot, self.restore, self.apply, me=self.me,
                                part_bytes=7, retry_after=5.0, clock=lambda: self.clock[0])

    def snapshot(self) -> bytes:
        return json.dumps([p.decode() for p in self.applied]).encode()

    def restore(self, blob: bytes) -> None:
        self.applied = [p.encode() for p in json.loads(blob)]

    def apply(self, d: Delivery) -> None:
        self.applied.append(d.payload)


class Order:
    """A total order of the group ``g``: ``send`` appends, ``run`` delivers everything
    (and what members multicast meanwhile) to the members, one message per batch."""

    def __init__(self) -> None:
        self.members: list[Member] = []
        self.queue: list[tuple[tuple[int, int], bytes]] = []
        self.position = 0
        self.clock = [0.0]

    def join(self, node: int, client: int) -> Member:
        m = Member((node, client), self.clock)
        self.members.append(m)
        everyone = [(n, c, "") for n, c in (x.me for x in self.members)]
        for x in self.members:  # the notice of the join, at this place of the order
            x.st.handle(MembersChange("g", everyone, [(node, client, "")], [], "join", 1,
                                      self.position))
        self.collect()
        return m

    def leave(self, m: Member) -> None:
        self.members.remove(m)
        everyone = [(n, c, "") for n, c in (x.me for x in self.members)]
        for x in self.members:
            x.st.handle(MembersChange("g", everyone, [], [(*m.me, "")], "leave", 1,
                                      self.position))

    def collect(self) -> None:
        for m in self.members:
            self.queue += [(m.me, p) for p in m.st.outbox]
            m.st.outbox.clear()

    def send(self, m: Member, text: str) -> None:
        self.queue.append((m.me, m.st.wrap(text.encode())))

    def run(self, skip: Member | None = None) -> None:
        """Deliver until nothing is left; ``skip`` misses what is delivered (a gap)."""
        while self.queue:
            (node, client), payload = self.queue.pop(0)
            batch = DeliveredBatch(node, self.position, "agreed", self.position, 1, 0.0,
                                   [[client, ["g"], 0, [payload]]])
            self.position += 1
            for m in self.members:
                if m is not skip:
                    m.st.handle(batch)
            self.collect()


def test_a_late_member_gets_the_state_at_its_request_and_what_follows() -> None:
    o = Order()
    a = o.join(0, 1)
    assert a.st.ready and a.st.outbox == []  # alone: it founds the state
    for k in range(5):
        o.send(a, f"a{k}")
    o.run()
    b = o.join(1, 1)
    assert b.st.state == "requesting" and len(o.queue) == 1  # its request
    o.send(a, "after-request")  # ordered after b's request: b must apply it
    o.run()
    assert b.st.ready and b.applied == a.applied == [b"a0", b"a1", b"a2", b"a3", b"a4",
                                                     b"after-request"]
    assert b.st.stats.restored == 1 and b.st.stats.replayed == 1
    assert a.st.stats.snapshots_sent == 1
    c = o.join(2, 1)
    for k in range(3):
        o.send(b, f"b{k}")
        o.send(c, f"c{k}")
    o.run()
    assert a.applied == b.applied == c.applied and len(a.applied) == 12
    # two members held the state: both answered, the first complete snapshot won
    assert c.st.stats.restored == 1
    assert a.st.stats.snapshots_sent + b.st.stats.snapshots_sent == 3


def test_messages_before_the_request_are_discarded_not_applied_twice() -> None:
    o = Order()
    a = o.join(0, 1)
    o.send(a, "early")
    b = o.join(1, 1)  # b's request is queued after "early"
    o.run()
    assert b.applied == a.applied == [b"early"]
    assert b.st.stats.discarded == 1


def test_an_order_gap_triggers_a_transfer() -> None:
    o = Order()
    a = o.join(0, 1)
    b = o.join(1, 1)
    o.run()
    o.send(a, "seen")
    o.run()
    o.send(a, "missed")  # b's daemon misses it
    o.run(skip=b)
    assert b.applied == [b"seen"]
    b.st.handle(OrderGap(2, (1, 3)))
    assert b.st.state == "requesting" and b.st.stats.gaps == 1
    o.collect()
    o.send(a, "later")
    o.run()
    assert b.applied == a.applied == [b"seen", b"missed", b"later"]


def test_ask_one_retries_everyone_and_a_lone_member_becomes_ready() -> None:
    o = Order()
    a = o.join(0, 1)
    a.st.state = "joining"  # a holds no state: it cannot answer
    b = o.join(1, 1)
    b.st.ask_one = True
    o.run()
    assert b.st.state == "requesting" and b.st.due() == 5.0
    o.clock[0] = 6.0
    b.st.tick()
    assert b.st.stats.requests == 2
    o.leave(a)
    o.collect()
    o.run()
    o.clock[0] = 12.0
    b.st.tick()  # alone now: it becomes ready with the state it has
    assert b.st.ready and b.st.due() is None


def test_only_the_named_responder_answers() -> None:
    o = Order()
    a = o.join(0, 1)
    b = o.join(1, 1)
    o.run()
    c_st_ask = StateTransfer("g", bytes, lambda b: None, lambda d: None, ask_one=True,
                             me=(2, 1))
    o.members.append(Member((2, 1), o.clock))
    o.members[-1].st = c_st_ask
    everyone = [(n, c, "") for n, c in (x.me for x in o.members)]
    for x in o.members:
        x.st.handle(MembersChange("g", everyone, [], [], "join", 1, o.position))
    o.collect()
    o.run()
    assert a.st.stats.snapshots_sent == 1 + 1 and b.st.stats.snapshots_sent == 0
    assert c_st_ask.ready


def test_other_groups_pass_through_and_bad_arguments_are_refused() -> None:
    st = StateTransfer("g", bytes, lambda b: None, lambda d: None, me=(0, 1))
    batch = DeliveredBatch(0, 0, "agreed", 0, 1, 0.0, [[1, ["h"], 0, [b"x"]]])
    assert [d.payload for d in st.handle(batch)] == [b"x"]
    with pytest.raises(ValueError):
        StateTransfer("g", bytes, lambda b: None, lambda d: None, service="causal")


def test_the_drivers_check_the_client_and_run_a_lone_founder(sock: str) -> None:
    applied: list[bytes] = []
    st = StateTransfer("g", bytes, lambda b: None, lambda d: applied.append(d.payload))
    with FakeDaemon(sock) as fake:
        with BlockingClient.connect(sock, self_discard=True) as c:
            with pytest.raises(ClientError) as info:
                st.next(c, 1)
            assert info.value.code == "self_discard"
        with BlockingClient.connect(sock, name="solo") as c:
            c.join("g")
            with pytest.raises(ClientError) as info:
                st.next(c, 1)
            assert info.value.code == "not_watching"
            c.join("g", members=True)
            me = [c.node, c.client_id, "solo"]
            fake.emit({"t": "members", "group": "g", "members": [me], "joined": [me],
                       "left": [], "cause": "join", "view": 1, "position": 0})
            assert isinstance(st.next(c, 5), MembersChange) and st.ready
            c.send(st.wrap(b"x"), "g")
            assert isinstance(st.next(c, 5), DeliveredBatch)
            assert applied == [b"x"] and st.outbox == []
