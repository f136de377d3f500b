"""The swap tree carried across view changes (section 6.2's local joins and leaves):
``swap.carry`` on its own, in the view record on the wire, and in the simulated
cluster of real Nodes, with the locality checker and a planted violation."""

from __future__ import annotations

import random

import msgpack
import pytest
from amcast.protocols import node as node_module
from amcast.protocols.errors import DecodeError
from amcast.protocols.simulation import swap_checkers as sc
from amcast.protocols.simulation.checkers import InstalledView, Proc, check_all
from amcast.protocols.simulation.cluster import Cluster
from amcast.protocols.simulation.faults import Fault
from amcast.protocols.simulation.network import NetworkConfig
from amcast.protocols.simulation.swap_churn_study import AT, plan, tree_change
from amcast.protocols.simulation.swap_cluster import Join, Leave, SwapSimConfig, run_trace
from amcast.protocols.simulation.swap_node_study import drive, node_config
from amcast.protocols.simulation.swap_sweep import sweep
from amcast.protocols.swap import arrow, carry
from amcast.protocols.swap.arrow import ArrowNode
from amcast.protocols.swap.carry import CarriedTree
from amcast.protocols.swap.engine import view_tree
from amcast.protocols.swap.tree import SpanningTree
from amcast.protocols.wire.codec import MembershipDatagram, encode_membership_body
from amcast.protocols.wire.limits import WireLimits
from amcast.protocols.wire.membership import (
    Ballot,
    Install,
    Member,
    Proposal,
    ViewRecord,
    read_view,
    view_obj,
)
from amcast.protocols.wire.native import make_decoder, native_module

SHAPES = ("balanced", "star", "path")


def _check(tree: CarriedTree) -> None:
    """A rooted spanning tree with one root and a connected R holding it."""
    ids = tree.members
    assert carry.decode(ids, carry.encode(tree, ids)) == tree


def test_initial_is_the_old_rule() -> None:
    t = carry.initial((4, 0, 2, 1, 3), "balanced", 2, 3)
    assert t.root == 0 and t.group == (0, 1, 2)
    assert t.parent == {0: None, 1: 0, 2: 0, 3: 1, 4: 1}


@pytest.mark.parametrize("shape", SHAPES)
def test_join_attaches_a_leaf(shape: str) -> None:
    old = carry.initial(range(5), shape, 2, 1)
    new = carry.next_tree(old, range(6), shape, 2, 1)
    assert new.children(5) == [] and new.root == old.root
    want = {"star": 0, "path": 4, "balanced": 2}[shape]
    assert new.parent[5] == want
    assert carry.changed_members(old, new) == {5, want}
    assert carry.locality_violations(old, new) == []


def test_leave_contracts_into_the_parent() -> None:
    old = carry.initial(range(7), "balanced", 2, 1)  # 1 has children 3, 4
    new = carry.next_tree(old, (0, 2, 3, 4, 5, 6), "balanced", 2, 1)
    assert new.parent[3] == new.parent[4] == 0 and new.root == 0
    assert carry.changed_members(old, new) == {0, 1, 3, 4}
    assert carry.locality_violations(old, new) == []


def test_root_leave_hands_the_root_to_a_neighbour() -> None:
    old = carry.initial(range(7), "balanced", 2, 3)  # R = 0, 1, 2
    new = carry.next_tree(old, range(1, 7), "balanced", 2, 3)
    assert new.root == 1 and new.parent[2] == 1 and new.parent[1] is None
    assert new.group == (1, 2, 3)  # R grew back by the lowest id next to it
    _check(new)
    assert carry.locality_violations(old, new) == []


def test_last_member_of_the_virtual_root_hands_it_to_a_child() -> None:
    old = carry.initial(range(5), "balanced", 2, 1)
    new = carry.remove(old, 0)
    assert new.root == 1 and new.group == (1,) and new.parent[2] == 1


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("group", [1, 3])
def test_random_churn_stays_local(shape: str, group: int) -> None:
    """Seeded joins, leaves and both at once: every tree is a rooted spanning tree with
    one root and a connected R, and only joiners, leavers and their neighbours change
    links (at most the degree + 1 per event)."""
    rng = random.Random(7 + len(shape) + group)
    members = set(range(6))
    tree = carry.initial(members, shape, 2, group)
    for _ in range(300):
        nxt = set(members)
        for _ in range(rng.choice((1, 1, 2))):
            if rng.random() < 0.5 and len(nxt) > 1:
                nxt.discard(rng.choice(sorted(nxt)))
            else:
                nxt.add(rng.randrange(40))
        new = carry.next_tree(tree, nxt, shape, 2, group)
        _check(new)
        assert set(new.parent) == nxt and len(new.group) == min(group, len(nxt))
        assert carry.locality_violations(tree, new) == []
        if len(nxt ^ members) == 1:
            (node,) = nxt ^ members
            side = tree if node in members else new
            assert len(carry.changed_members(tree, new)) <= len(side.neighbours()[node]) + 1
        tree, members = new, nxt


def test_a_rebuilt_tree_fails_the_locality_check() -> None:
    """The planted violation: rebuilding the balanced tree from the member list after the
    root left moves every member up a slot."""
    old = carry.initial(range(7), "balanced", 2, 1)
    rebuilt = carry.initial(range(1, 7), "balanced", 2, 1)
    assert carry.locality_violations(old, rebuilt)
    assert not carry.locality_violations(old, carry.next_tree(old, range(1, 7), "balanced",
                                                              2, 1))


def test_decode_refuses_what_is_not_a_tree() -> None:
    ids = (1, 2, 3)
    with pytest.raises(ValueError):
        carry.decode(ids, (1, 1, 2))  # no R
    with pytest.raises(ValueError):
        carry.decode(ids, (1, 2, 2, 1))  # two roots
    with pytest.raises(ValueError):
        carry.decode(ids, (2, 1, 1, 1))  # a cycle, no root
    with pytest.raises(ValueError):
        carry.decode(ids, (1, 1, 1, 3))  # R without the root
    with pytest.raises(ValueError):
        carry.decode(ids, (1, 1, 2, 1, 3))  # R not connected
    assert carry.decode(ids, (1, 1, 2, 1, 2)).group == (1, 2)


def test_view_tree_follows_the_view_record() -> None:
    """What the coordinator computes: the shape for a record without a tree, then the
    tree carried through the records."""
    first = ViewRecord.agreed((0, 1, 2, 3))
    kw = {"shape": "balanced", "fanout": 2, "root_group": 1}
    t2 = view_tree(first, (1, 2, 3), **kw)
    assert carry.decode((1, 2, 3), t2).root == 1
    second = ViewRecord(2, tuple(Member(n, 1) for n in (1, 2, 3)), first.potential, 1, t2)
    t3 = view_tree(second, (0, 1, 2, 3), **kw)
    tree = carry.decode((0, 1, 2, 3), t3)
    assert tree.root == 1 and tree.children(0) == []  # 0 is back, as a leaf


def test_view_record_with_a_tree_on_the_wire() -> None:
    members = tuple(Member(n, 1) for n in (1, 2, 5))
    rec = ViewRecord(4, members, (1, 2, 5), 3, (2, 2, 1, 2))
    obj = view_obj(rec)
    assert obj is not None and len(obj) == 5
    assert read_view(obj, WireLimits()) == rec
    plain = ViewRecord(4, members, (1, 2, 5), 3)
    assert len(view_obj(plain) or []) == 4  # no tree: the record's old layout
    with pytest.raises(DecodeError):
        read_view([*obj[:4], [2, 2, 1]], WireLimits())  # too short
    with pytest.raises(DecodeError):
        read_view([*obj[:4], [2, 2, 9, 2]], WireLimits())  # not a member


@pytest.mark.parametrize("core", ["pure", "native"])
def test_both_decoders_read_the_tree(core: str) -> None:
    if core == "native" and native_module() is None:
        pytest.skip("the native core is not built")
    members = tuple(Member(n, 1) for n in (1, 2, 5))
    prev = ViewRecord(3, members, (1, 2, 5), 2, (1, 1, 1, 1))
    rec = ViewRecord(4, members, (1, 2, 5), 3, (2, 2, 1, 2))
    plain = ViewRecord(5, members, (1, 2, 5), 4)
    decode = make_decoder(WireLimits(), core)
    for proposal in (Proposal(rec, prev, ((1, 0), (2, 0), (5, 0))),
                     Proposal(plain, rec, ((1, 0), (2, 0), (5, 0)))):
        dg = MembershipDatagram(1, 3, 1, Install(Ballot(4, 1), proposal))
        assert decode(encode_membership_body(dg)) == dg


def _cluster_run(mode: str, event: str, n: int, seed: int
                 ) -> tuple[dict[str, list[str]], tuple[int, int, int] | None]:
    joining = event == "join"
    cluster = Cluster(n, seed=seed, node_config=node_config(mode, "balanced"),
                      network=NetworkConfig(), bootstrap="join" if joining else "agreed",
                      start=range(n - 1) if joining else None)
    node = {"join": n - 1, "leave": n - 1, "leave-root": 0, "leave-inner": 1}[event]
    cluster.schedule(Fault(AT, "start" if joining else "leave", (node,),
                           duration=0.0 if joining else 5.0))
    drive(cluster, plan(n, event, 20.0, seed), seed, until=AT + 3.0)
    result = cluster.result()
    return result.violations, tree_change(result, node,
                                          root_group=3 if mode == "hybrid" else 1)


@pytest.mark.parametrize("mode", ["arrow", "combining", "hybrid"])
@pytest.mark.parametrize("event", ["join", "leave-inner", "leave-root"])
def test_node_views_carry_the_tree(mode: str, event: str) -> None:
    """Every member (the joiner included) builds the same tree, which changes only at the
    joiner or leaver and its neighbours; every checker passes."""
    violations, change = _cluster_run(mode, event, 7, 3)
    assert "swap_tree" in violations
    assert all(not v for v in violations.values()), {k: v[:3] for k, v in violations.items()
                                                     if v}
    assert change is not None
    degree, changed, rebuilt = change
    assert degree >= 1 and changed <= degree + 1
    if event != "join":
        assert rebuilt > changed  # the old rule moved members up a slot


def test_node_planted_rebuild_fails_the_checker(monkeypatch: pytest.MonkeyPatch) -> None:
    """The planted violation: Nodes whose coordinator rebuilds the tree from the member
    list at every view (the old rule) fail the locality checker when an inner node
    leaves."""
    def rebuild(known: object, members: tuple[int, ...], *, shape: str, fanout: int,
                root_group: int) -> tuple[int, ...]:
        return carry.encode(carry.initial(members, shape, fanout, root_group), members)
    monkeypatch.setattr(node_module, "view_tree", rebuild)
    violations, _ = _cluster_run("arrow", "leave-inner", 7, 3)
    assert violations["swap_tree"] and "changed tree links" in violations["swap_tree"][0]


def test_checker_flags_members_that_disagree() -> None:
    a = carry.initial(range(4), "balanced", 2, 1)
    b = carry.initial(range(4), "star", 2, 1)
    views = {Proc(0, 1): [InstalledView(0.0, 1, a.members, 0, 4, a)],
             Proc(1, 1): [InstalledView(0.0, 1, b.members, 0, 4, b)]}
    found = check_all([], {p: [] for p in views}, views)["swap_tree"]
    assert found and "another swap tree" in found[0]


def test_swap_simulator_joins_and_leaves_are_local() -> None:
    """The swap simulator's section 6.2 operations pass ``local_changes`` (every mode)."""
    for mode in ("arrow", "combining", "hybrid"):
        cfg = SwapSimConfig(mode=mode, changes=(Join(7, 3), Leave(4), Leave(0),  # type: ignore[arg-type]
                                                Leave(1), Join(8, 7)))
        trace = run_trace(cfg, 2)
        assert len(trace.changes) == 5 and not sc.local_changes(trace)


def test_swap_simulator_planted_rebuild_on_leave(monkeypatch: pytest.MonkeyPatch) -> None:
    """The planted violation: an arrow leave that rebuilds the tree and every link from
    the members left (toward the lowest id) fails ``local_changes``."""
    def rebuild(nodes: dict[int, ArrowNode], tree: SpanningTree, node_id: int,
                into: int | None = None) -> int:
        del nodes[node_id]
        fresh = SpanningTree.shaped(sorted(nodes), "balanced", 2)
        tree._adj = {n: set(fresh.neighbours(n)) for n in fresh.nodes}  # type: ignore[attr-defined]
        for n, node in arrow.initial_nodes(fresh, min(nodes)).items():
            nodes[n].link, nodes[n].value = node.link, node.value
        return min(nodes)
    monkeypatch.setattr(arrow, "leave", rebuild)
    bad = sweep(SwapSimConfig(mode="arrow", changes=(Leave(1),)), range(3))
    assert bad and all(any("local_changes" in v for v in vs) for vs in bad.values())


@pytest.mark.parametrize("tree", [[2, 2, 1], [2, 2, 9, 2], [2, 2, 1, -1]])
def test_both_decoders_refuse_a_bad_tree_alike(tree: list[int]) -> None:
    if native_module() is None:
        pytest.skip("the native core is not built")
    members = tuple(Member(n, 1) for n in (1, 2, 5))
    rec = ViewRecord(4, members, (1, 2, 5), 3, (2, 2, 1, 2))
    dg = MembershipDatagram(1, 3, 1, Install(Ballot(4, 1), Proposal(rec, None, ())))
    good = encode_membership_body(dg)
    bad = good.replace(bytes([0x94, 2, 2, 1, 2]), msgpack.packb(tree))
    assert bad != good
    errors = []
    for core in ("pure", "native"):
        with pytest.raises(DecodeError) as exc:
            make_decoder(WireLimits(), core)(bad)
        errors.append((exc.value.reason, exc.value.detail))
    assert errors[0] == errors[1]


@pytest.mark.parametrize("tree", [(2, 5, 1, 2), (2, 1, 2, 2), (2, 2, 1, 1)])
@pytest.mark.parametrize("message", ["install", "accept", "prepare"])
def test_a_record_whose_tree_is_not_a_tree_is_dropped(tree: tuple[int, ...],
                                                       message: str) -> None:
    """The decoders check only the tree's length and ids: a record that passes them but
    holds no rooted spanning tree (a cycle, two roots, R without the root) is a counted
    drop at the membership layer, before it changes anything; without the check the
    session built from it would raise."""
    from amcast.protocols.node import Node
    from amcast.protocols.node_config import NodeConfig
    from amcast.protocols.wire.membership import Accept, Prepare

    assert carry.initial((1, 2, 5), "balanced", 2, 1)  # the shape itself is fine
    with pytest.raises(ValueError):
        carry.decode((1, 2, 5), tree)
    nd = Node(NodeConfig(group_key=b"k" * 32, ordering="arrow"), node_id=5,
              members=[1, 2, 5], rng=random.Random(1), now=0.0)
    members = tuple(Member(n, 1) for n in (1, 2, 5))
    rec = ViewRecord(4, members, (1, 2, 5), 0, tree)
    proposal = Proposal(rec, None, ())
    msg = {"install": Install(Ballot(4, 1), proposal),
           "accept": Accept(Ballot(4, 1), proposal),
           "prepare": Prepare(Ballot(4, 1), members, rec)}[message]
    nd.membership.on_membership(MembershipDatagram(1, 0, 1, msg), 0.5)
    assert nd.stats.drops.get("bad_swap_tree") == 1
    assert nd.membership.session is None  # nothing installed
