"""The engine's contract: bad input is a typed error, config is validated, ack-only
messages vote but are never delivered, and G drains."""

from __future__ import annotations

import pytest
from amcast.protocols.errors import ConfigurationError, ProtocolViolation
from amcast.protocols.ordering import (
    CausalMessage,
    DeliveryRule,
    OrderingConfig,
    OrderingRule,
    TotalOrderEngine,
)


def engine(n: int = 3, rule: str = "stoto", phi: float | None = None) -> TotalOrderEngine:
    return TotalOrderEngine(range(n), OrderingConfig(rule=rule, phi=phi))


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (CausalMessage(9, 1), "unknown_sender"),
        (CausalMessage(0, 2), "sequence_gap"),
        (CausalMessage(0, 1, ((1, 1),)), "ack_unknown"),
        (CausalMessage(0, 1, ((0, 1),)), "ack_unknown"),
        (CausalMessage(0, 1, ((7, 1),)), "unknown_sender"),
        (CausalMessage(0, 1, ((1, 0),)), "ack_unknown"),
    ],
)
def test_impossible_messages_raise_protocol_violation(message: CausalMessage, reason: str) -> None:
    with pytest.raises(ProtocolViolation) as info:
        engine().insert(message)
    assert info.value.reason == reason


def test_a_duplicate_is_a_protocol_violation_and_leaves_state_intact() -> None:
    e = engine()
    e.insert(CausalMessage(0, 1, payload="x"))
    with pytest.raises(ProtocolViolation, match="duplicate"):
        e.insert(CausalMessage(0, 1, payload="x"))
    assert e.pending == 1


@pytest.mark.parametrize(
    ("rule", "n", "phi"),
    [("stoto", 8, 3), ("stoto", 8, 8), ("gtoto", 8, 1), ("gtoto", 8, 8), ("gltoto", 4, 0.5)],
)
def test_phi_out_of_range_is_a_configuration_error(rule: str, n: int, phi: float) -> None:
    with pytest.raises(ConfigurationError, match="phi"):
        engine(n, rule, phi)


def test_unknown_rule_and_duplicate_members_are_configuration_errors() -> None:
    with pytest.raises(ConfigurationError, match="unknown ordering rule"):
        OrderingConfig(rule="fastest")
    with pytest.raises(ConfigurationError, match="distinct"):
        TotalOrderEngine([1, 1, 2])


def test_default_phi_is_half_the_group_and_stays_valid_for_two_members() -> None:
    assert engine(8, "stoto").phi == 4
    assert engine(7, "stoto").phi == 3.5
    assert engine(2, "gltoto").phi == 1.5
    assert engine(1, "gltoto").phi == 1.5


def test_single_member_delivers_at_once() -> None:
    e = TotalOrderEngine([42], OrderingConfig(rule="gltoto"))
    out = e.insert(CausalMessage(42, 1, payload="solo"))
    assert [(d.payload, d.position, d.rule) for d in out] == [("solo", 0, DeliveryRule.DEFAULT)]


@pytest.mark.parametrize("rule", [r for r in OrderingRule if r is not OrderingRule.TOTO])
def test_ack_only_messages_vote_are_never_delivered_and_leave_g(rule: OrderingRule) -> None:
    e = TotalOrderEngine(range(3), OrderingConfig(rule=rule))
    out = e.insert(CausalMessage(0, 1, payload="a"))
    out += e.insert(CausalMessage(1, 1, ((0, 1),)))  # ack-only, votes for a
    out += e.insert(CausalMessage(2, 1, ((0, 1),)))  # ack-only, votes for a
    out += e.insert(CausalMessage(0, 2, ((1, 1), (2, 1))))  # ack-only
    out += e.insert(CausalMessage(1, 2, ((0, 2), (2, 1))))  # ack-only
    out += e.insert(CausalMessage(2, 2, ((0, 2), (1, 2))))  # ack-only
    assert [d.payload for d in out] == ["a"]
    assert out[0].position == 0
    assert e.delivered_ack_only >= 2  # the first ack-only round left G
    nxt = e.insert(CausalMessage(0, 3, ((1, 2), (2, 2)), payload="b"))
    nxt += e.insert(CausalMessage(1, 3, ((0, 3),)))
    nxt += e.insert(CausalMessage(2, 3, ((0, 3), (1, 3))))
    assert [(d.payload, d.position) for d in nxt] == [("b", 1)]


def test_delivery_event_reports_votes_and_activation() -> None:
    e = engine(3, "stoto")  # phi = 1.5: a source with 2 votes fires
    assert e.insert(CausalMessage(0, 1, payload="a")) == []
    out = e.insert(CausalMessage(1, 1, ((0, 1),), payload="b"))
    assert len(out) == 1
    d = out[0]
    assert (d.sender, d.seq, d.rule, d.nvt, d.ntail, d.unseen, d.activation) == (
        0,
        1,
        DeliveryRule.EARLY,
        2,
        2,
        1,
        0,
    )
    assert e.activation == 1


def test_one_default_rule_everywhere() -> None:
    """NodeConfig, OrderingConfig, the daemon's config, config/amcastd.toml and the rule
    table of docs/design/ordering.md name the same default delivery rule."""
    import re
    from pathlib import Path

    from amcast.daemon.config import DaemonConfig
    from amcast.protocols.node_config import NodeConfig
    from amcast.protocols.ordering import DEFAULT_RULE, OrderingConfig

    root = Path(__file__).resolve().parents[2]
    assert OrderingConfig().rule is DEFAULT_RULE
    assert NodeConfig(insecure=True).rule == DEFAULT_RULE.value
    daemon = DaemonConfig.model_validate({"protocol": {"insecure": True}}).node_config()
    assert daemon.rule == DEFAULT_RULE.value
    toml = (root / "config" / "amcastd.toml").read_text()
    assert re.search(r'^# rule = "(\w+)"$', toml, re.M).group(1) == DEFAULT_RULE.value
    page = (root / "docs" / "design" / "ordering.md").read_text()
    defaults = re.findall(r"^\| `(\w+)` \|[^\n]*\(default\) \|", page, re.M)
    assert defaults == [DEFAULT_RULE.value]


@pytest.mark.parametrize("rule", ["gltoto", "gtoto"])
def test_ack_only_roots_leave_so_the_next_message_needs_only_half_the_group(rule: str) -> None:
    """n = 4, phi = 2: node 0 sends alone and only nodes 1 and 2 ack (node 3 acks
    lazily). With ``ack_roots_leave`` the acks leave G once "a" is delivered, so "b" is
    ordered on the acks of 1 and 2 alone; in the paper's model the acks are the
    candidates of the next activation, which waits to hear from node 3."""
    def feed(e: TotalOrderEngine) -> list[str]:
        out = e.insert(CausalMessage(0, 1, payload="a"))
        out += e.insert(CausalMessage(1, 1, ((0, 1),)))
        out += e.insert(CausalMessage(2, 1, ((0, 1),)))
        out += e.insert(CausalMessage(0, 2, ((1, 1), (2, 1)), payload="b"))
        out += e.insert(CausalMessage(1, 2, ((0, 2),)))
        out += e.insert(CausalMessage(2, 2, ((0, 2), (1, 2))))
        return [d.payload for d in out]

    leaving = TotalOrderEngine(range(4), OrderingConfig(rule=rule, ack_roots_leave=True))
    assert feed(leaving) == ["a", "b"]
    assert leaving.pending == 0 and leaving.delivered_ack_only == 4
    # node 3's lazy ack of both arrives later: a root at once, it leaves on insertion
    assert leaving.insert(CausalMessage(3, 1, ((0, 2), (1, 2), (2, 2)))) == []
    assert leaving.pending == 0 and leaving.delivered_ack_only == 5

    staying = TotalOrderEngine(range(4), OrderingConfig(rule=rule))
    assert feed(staying) == ["a"]  # b waits for the ack activation to close
    late = staying.insert(CausalMessage(3, 1, ((0, 2), (1, 2), (2, 2))))
    assert [d.payload for d in late] == ["b"]


def test_an_ack_that_voted_leaves_when_the_activation_closes_and_its_sender_is_unseen() -> None:
    """Node 1's ack votes for "a"; once "a" is delivered it leaves, and node 1 counts as
    unseen in the next activation until a message of it that stays in G arrives."""
    e = TotalOrderEngine(range(3), OrderingConfig(rule="gltoto", ack_roots_leave=True))
    assert e.insert(CausalMessage(0, 1, payload="a")) == []
    out = e.insert(CausalMessage(1, 1, ((0, 1),)))  # phi = 1.5: 2 votes, 1 unseen
    assert [d.payload for d in out] == ["a"] and e.pending == 0
    assert e.insert(CausalMessage(2, 1, payload="c")) == []  # 0 and 1 unseen again
    assert e.ntail == 1
