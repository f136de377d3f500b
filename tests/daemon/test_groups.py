"""Group membership (``amcast.daemon.groups``): the control codec (strict, fuzzed), tables
applied identically, departures at a view change, snapshots across views, and a
delivered vertex split around a join in a real in-process daemon (fake engine)."""

from __future__ import annotations

import dataclasses
from typing import Any

import msgpack
from amcast.daemon.groups import Groups
from amcast.protocols.events import BatchDelivered, ServiceLevel, ViewInstalled
from daemon_helpers import FakeNode, Raw, envelope
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amcast.socket_protocol import (
    Control,
    SnapEntry,
    decode_control,
    decode_envelope,
    encode_gone,
    encode_join,
    encode_leave,
    encode_snapshot,
    is_control,
)

FUZZ = settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---- the codec ------------------------------------------------------------------------
def test_controls_round_trip_and_are_never_envelopes() -> None:
    e = SnapEntry(3, 2, "n", ("a", "b"))
    cases = {
        encode_join(4, 7, 1, "app", ["a", "b"]): Control("join", 4, 7, 1, "app", ("a", "b")),
        encode_leave(4, 7, 2, ["a"]): Control("leave", 4, 7, 2, groups=("a",)),
        encode_gone(4, 7): Control("gone", 4, 7),
        encode_snapshot(4, 1, True, [e, SnapEntry(5, 0, "", ())]): Control(
            "snap", 4, part=1, final=True, entries=(e, SnapEntry(5, 0, "", ()))),
    }
    for data, control in cases.items():
        assert decode_control(data) == control
        assert decode_envelope(data) is None
        assert is_control(data)
    assert decode_control(envelope(1, ["g"], [b"x"])) is None
    assert not is_control(envelope(1, ["g"], [b"x"]))


def test_malformed_controls_are_refused() -> None:
    bad = [
        ["join", 1, 7, 1, "n", []], ["join", 1, 7, 1, "n", [""]], ["join", -1, 7, 1, "n", ["g"]],
        ["join", 1, True, 1, "n", ["g"]], ["join", 1, 7, 1, 5, ["g"]],
        ["join", 1, 7, 1, "x" * 200, ["g"]], ["join", 1, 7, 1, "n", ["g"], 0],
        ["leave", 1, 7, 1], ["leave", 1, 7, 1, "g"], ["gone", 1], ["gone", 1, -7],
        ["gone", 1, 2**64 - 1], ["snap", 1, 0, 1, []], ["snap", 1, 0, True, [[1, 2, "n"]]],
        ["snap", 1, 0, True, [[1, 2, "n", [b"g"]]]], ["snap", 1, 0, True, "x"],
        ["what", 1, 2], [b"join", 1, 7, 1, "n", ["g"]], {"join": 1}, [],
    ]
    for obj in bad:
        assert decode_control(msgpack.packb(obj, use_bin_type=True)) is None, obj
    assert decode_control(b"\xc1") is None and decode_control(b"") is None


msgpack_value = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.text(max_size=6)
    | st.binary(max_size=6) | st.sampled_from(["join", "leave", "gone", "snap"]),
    lambda inner: st.lists(inner, max_size=6),
    max_leaves=14,
)


@FUZZ
@given(st.binary(max_size=200))
def test_fuzz_arbitrary_bytes(data: bytes) -> None:
    decode_control(data)  # never raises
    is_control(data)


@FUZZ
@given(msgpack_value)
def test_fuzz_objects_decode_only_to_what_reencodes_identically(obj: Any) -> None:
    data = msgpack.packb(obj, use_bin_type=True)
    c = decode_control(data)
    if c is not None:
        again = {"join": lambda: encode_join(c.view, c.client, c.req, c.name, list(c.groups)),
                 "leave": lambda: encode_leave(c.view, c.client, c.req, list(c.groups)),
                 "gone": lambda: encode_gone(c.view, c.client),
                 "snap": lambda: encode_snapshot(c.view, c.part, c.final, list(c.entries))}
        assert decode_control(again[c.kind]()) == c


@FUZZ
@given(st.integers(0, 300), st.binary(min_size=1, max_size=3))
def test_fuzz_mutated_controls(at: int, junk: bytes) -> None:
    good = encode_snapshot(3, 0, True, [SnapEntry(1, 2, "name", ("a", "bb"))])
    i = at % (len(good) + 1)
    for data in (good[:i] + junk + good[i:], good[:i] + junk + good[i + len(junk):], good[:i]):
        c = decode_control(data)
        assert c is None or c.kind in ("join", "leave", "gone", "snap")


# ---- the pure side: two daemons fed the same total order ------------------------------
class Out:
    def __init__(self) -> None:
        self.submitted: list[bytes] = []
        self.frames: list[tuple[int, dict[str, Any]]] = []

    def submit_control(self, envelope: bytes) -> None:
        self.submitted.append(envelope)

    def to_client(self, client: int, frame: dict[str, Any]) -> None:
        self.frames.append((client, frame))

    def notices(self, client: int | None = None) -> list[dict[str, Any]]:
        return [f for c, f in self.frames if f["t"] == "members" and client in (None, c)]

    def take(self) -> list[bytes]:
        out, self.submitted = self.submitted, []
        return out


class Cluster:
    """Daemons ``Groups`` with a total order we write: ``order`` delivers to all."""

    def __init__(self, n: int) -> None:
        self.outs = [Out() for _ in range(n)]
        self.g = [Groups(i, {}, self.outs[i], agreed=True, part_bytes=120) for i in range(n)]
        self.position = 0
        self.view = 0

    def install(self, view: int, members: list[int], joined: list[int],
                excluded: tuple[int, ...] = (), left: tuple[int, ...] = ()) -> None:
        self.view, self.position = view, 0
        for i in members:
            self.g[i].view_installed(view, members, joined, left, excluded)

    def order(self, members: list[int] | None = None) -> None:
        """Deliver everything submitted, node by node, at every member (one position
        step per control, as if an application message followed each)."""
        members = list(range(len(self.g))) if members is None else members
        for sender in members:
            for data in self.outs[sender].take():
                control = decode_control(data)
                assert control is not None
                for i in members:
                    self.g[i].delivered(sender, control, self.view, self.position)
                self.position += 1


def test_controls_are_applied_identically_with_notices_in_order() -> None:
    c = Cluster(3)
    c.install(1, [0, 1, 2], [0, 1, 2])
    c.order()
    assert all(g.table.complete for g in c.g)
    for i in range(3):  # a watching client on every daemon
        c.g[i].request(1, f"w{i}", "join", ["g"], -1, True)
    c.g[2].request(2, "plain", "join", ["g", "h"], -2, False)
    c.order()
    c.g[1].request(1, "w1", "leave", ["g"], -3, False)
    c.g[2].disconnect(2)
    c.order()
    tables = [(g.table.members("g"), g.table.members("h")) for g in c.g]
    assert tables[0] == tables[1] == tables[2] == ([(0, 1, "w0"), (2, 1, "w2")], [])
    # the watchers of daemons 0 and 2 saw the same notices, at the same places
    seen0, seen2 = c.outs[0].notices(1), c.outs[2].notices(1)
    assert seen2 == [n for n in seen0 if n["position"] >= seen2[0]["position"]]
    causes = [(n["cause"], n["joined"], n["left"]) for n in seen0]
    assert causes == [("join", [[0, 1, "w0"]], []), ("join", [[1, 1, "w1"]], []),
                      ("join", [[2, 1, "w2"]], []), ("join", [[2, 2, "plain"]], []),
                      ("leave", [], [[1, 1, "w1"]]), ("disconnect", [], [[2, 2, "plain"]])]
    # the leaver got its own leave notice, then its reply; routing follows the order
    assert c.outs[1].notices(1)[-1]["cause"] == "leave"
    assert c.outs[1].frames[-1] == (1, {"t": "groups", "groups": [], "id": -3})
    assert c.g[0].routing == {"g": {1}} and c.g[1].routing == {}


def test_departures_are_removed_at_position_0_of_the_next_view() -> None:
    c = Cluster(3)
    c.install(1, [0, 1, 2], [0, 1, 2])
    c.order()
    for i in range(3):
        c.g[i].request(1, "", "join", ["g"], -1, True)
    c.order()
    c.outs[0].frames.clear()
    c.outs[1].frames.clear()
    c.install(2, [0, 1], [], excluded=(2,))  # node 2 was killed
    n0, n1 = c.outs[0].notices(1), c.outs[1].notices(1)
    assert n0 == n1 == [{"t": "members", "group": "g", "members": [[0, 1, ""], [1, 1, ""]],
                         "joined": [], "left": [[2, 1, ""]], "cause": "view", "view": 2,
                         "position": 0}]
    c.order([0, 1])  # the view's snapshots: nothing changes
    assert len(c.outs[0].notices(1)) == 1


def test_a_rejoining_daemon_waits_for_every_snapshot_then_lists_all() -> None:
    c = Cluster(3)
    c.install(1, [0, 1], [0, 1])
    c.order([0, 1])
    c.g[0].request(1, "a", "join", ["g"], -1, True)
    c.order([0, 1])
    # node 2 starts (its client joins before any view: no control, the snapshot carries it)
    c.g[2].request(1, "c", "join", ["g"], -1, True)
    assert c.outs[2].submitted == [] and c.outs[2].frames == []
    c.install(2, [0, 1, 2], [2])
    assert c.g[2].routing == {"g": {1}}  # its clients receive from the view's start
    c.order([2, 0, 1])  # node 2's snapshot is ordered first: node 2 is still incomplete
    full = c.outs[2].notices(1)
    assert len(full) == 1 and full[0]["cause"] == "snapshot"
    assert full[0]["members"] == [[0, 1, "a"], [2, 1, "c"]]
    assert full[0]["position"] == 2  # the last snapshot (node 1's)
    assert c.outs[2].frames[0] == (1, {"t": "groups", "groups": ["g"], "id": -1})
    # daemon 0's watcher saw node 2's client arrive with node 2's snapshot
    assert [(n["cause"], n["joined"], n["position"]) for n in c.outs[0].notices(1)][-1] == \
        ("snapshot", [[2, 1, "c"]], 0)


def test_a_control_delivered_in_a_later_view_is_ignored_and_the_snapshot_covers_it() -> None:
    c = Cluster(2)
    c.install(1, [0, 1], [0, 1])
    c.order()
    for k in range(12):  # enough clients for a snapshot in several parts (part_bytes 120)
        c.g[0].request(k + 1, f"client{k}", "join", ["g", "h"], -1, False)
    c.order()
    c.g[0].request(1, "client0", "leave", ["g"], -2, False)  # submitted in view 1 ...
    stale = c.outs[0].take()
    c.install(2, [0, 1], [])
    parts = [decode_control(p) for p in c.outs[0].submitted]
    assert len(parts) > 1 and [p.final for p in parts if p] == [False] * (len(parts) - 1) + [True]
    c.outs[0].submitted[:0] = stale  # ... delivered in view 2, before the snapshot
    c.order()
    assert c.g[0].stale == c.g[1].stale == 1
    assert c.g[0].table.groups_of(0, 1) == c.g[1].table.groups_of(0, 1) == {"h"}
    assert c.g[1].table.members("g") == c.g[0].table.members("g")
    assert len(c.g[1].table.members("g")) == 11
    assert c.outs[0].frames[-1] == (1, {"t": "groups", "groups": ["h"], "id": -2})
    assert c.g[0].routing["g"] == set(range(2, 13))


# ---- a real in-process daemon with a fake engine that has views -----------------------
class ViewNode(FakeNode):
    """A fake engine with agreed membership (``membership``): starts in view 1."""

    membership = True

    def __init__(self) -> None:
        super().__init__(0)
        self.pending.append(ViewInstalled(1, (0,), True, (0,), (), (), 0, 1.5))

    def deliver(self, payloads: list[bytes], *, sender: int | None = None,
                service: ServiceLevel = ServiceLevel.AGREED) -> BatchDelivered:
        ev = dataclasses.replace(super().deliver(payloads, sender=sender, service=service),
                                 view=1)
        self.pending[-1] = ev
        return ev


async def test_a_vertex_is_split_around_a_join(make_cluster: Any) -> None:
    fake = ViewNode()
    c = await make_cluster(1, node_factory=lambda *a, **k: fake,
                           shutdown={"grace_s": 0.2}, api={"close_grace_s": 0.5})
    d = c.daemons[0]
    fake.deliver_submitted()  # the view's snapshot
    d.request_pump()
    old = await Raw.open(c.socket(0))
    old.send({"t": "join", "groups": ["g"], "id": -1})
    d.request_pump()
    await old.sync(-9)
    fake.deliver_submitted()
    d.request_pump()
    await old.until("groups")
    new = await Raw.open(c.socket(0))
    new.send({"t": "join", "groups": ["g"], "members": True, "id": -1})
    await new.sync(-2)  # handled: its control was submitted, not answered yet
    (join, _), = fake.submitted
    fake.submitted.clear()
    fake.deliver([envelope(9, ["g"], [b"before"]), join, envelope(9, ["g"], [b"after"])],
                 sender=0)
    d.request_pump()
    got = await new.until("deliver")
    assert [f["t"] for f in got] == ["members", "groups", "deliver"]
    assert got[0]["cause"] == "join" and got[0]["position"] == 1 and got[0]["view"] == 1
    assert got[0]["members"] == [[0, 1, "raw"], [0, 2, "raw"]]
    assert got[2]["batches"] == [[9, ["g"], 1, [b"after"]]] and got[2]["position"] == 0
    first, second = await old.next(), await old.next()
    assert first["batches"] == [[9, ["g"], 0, [b"before"]]]
    assert second["batches"] == [[9, ["g"], 1, [b"after"]]]
    status = d.status()["group_membership"]
    assert status["members"] == 2 and status["complete"] and status["pending_requests"] == 0


def test_a_request_that_cannot_be_ordered_is_answered_pending_then_takes_effect() -> None:
    c = Cluster(2)
    c.install(1, [0, 1], [0, 1])
    c.order()
    c.g[0].quorum_lost()  # no primary view: nothing is submitted, the snapshot will carry it
    c.g[0].request(1, "x", "join", ["g"], -1, True, now=100.0)
    assert c.outs[0].submitted == []
    c.g[0].expire(104.9, 5.0)
    assert c.outs[0].frames == []
    c.g[0].expire(105.0, 5.0)
    assert c.outs[0].frames == [(1, {"t": "groups", "groups": [], "pending": True, "id": -1})]
    c.install(2, [0, 1], [])
    c.order()  # the snapshot: in effect now, a notice, no second reply
    assert c.g[1].table.members("g") == [(0, 1, "x")] and c.g[0].routing == {"g": {1}}
    assert [f["t"] for _, f in c.outs[0].frames] == ["groups", "members"]
    assert c.outs[0].notices(1)[0]["cause"] == "snapshot"
