"""``TotalOrderEngine.close``: the end of a view delivers the rest of the final DAG
deterministically (section 2 of the ToTo paper, virtual synchrony).

Engines fed the same final DAG (a causally closed set) in different causally consistent
orders, each having delivered what the rules allowed on the way, end with the same
complete sequence after ``close``; that sequence respects causal order, covers every
message with a payload exactly once (GL-ToTo's prefix deliveries are not repeated) and
leaves G empty.
"""

from __future__ import annotations

import pytest
from amcast.protocols.ordering import (
    UNSAFE_RULES,
    CausalMessage,
    DeliveryRule,
    MessageDelivered,
    OrderingConfig,
    OrderingRule,
    TotalOrderEngine,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.ordering.causal_dags import Execution, executions, reveal_order

SAFE_RULES = [r for r in OrderingRule if r not in UNSAFE_RULES]
PROPERTY = settings(max_examples=80, derandomize=True, database=None, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def engine(n: int, rule: OrderingRule | str, phi: float | None = None) -> TotalOrderEngine:
    return TotalOrderEngine(range(n), OrderingConfig(rule=rule, phi=phi))


def phi_for(rule: OrderingRule, n: int, data: st.DataObject) -> float:
    if rule in (OrderingRule.STOTO, OrderingRule.LEX):
        return data.draw(st.integers(n, 2 * n - 1), label="2*phi") / 2
    return data.draw(st.integers(3, 2 * n - 1), label="2*phi") / 2


def final_dag(execution: Execution, data: st.DataObject) -> Execution:
    """A causally closed subset of the execution (a prefix of one causal order): what
    a flush's cut leaves as the final DAG of a view."""
    order = reveal_order(execution, data.draw(st.lists(st.integers(0, 50), min_size=1,
                                                       max_size=60), label="cut order"))
    size = data.draw(st.integers(0, len(order)), label="cut size")
    kept = order[:size]
    return Execution(execution.n, tuple(kept), {m.id: execution.clocks[m.id] for m in kept})


def check_sequence(execution: Execution, seq: list[MessageDelivered]) -> None:
    ids = [(d.sender, d.seq) for d in seq]
    payloads = [m.id for m in execution.messages if m.payload is not None]
    assert sorted(ids) == sorted(payloads), "every payload exactly once"
    assert [d.position for d in seq] == list(range(len(seq)))
    for i, later in enumerate(ids):
        for earlier in ids[i + 1:]:
            assert not execution.precedes(earlier, later), f"{earlier} before {later}"


@PROPERTY
@given(execution=executions(max_n=8, max_sends=30), data=st.data())
def test_engines_fed_one_final_dag_in_different_orders_close_identically(
    execution: Execution, data: st.DataObject
) -> None:
    dag = final_dag(execution, data)
    rule = data.draw(st.sampled_from(SAFE_RULES), label="rule")
    phi = phi_for(rule, dag.n, data)
    results = []
    for _ in range(3):
        order = reveal_order(dag, data.draw(st.lists(st.integers(0, 50), min_size=1,
                                                     max_size=60), label="order"))
        e = engine(dag.n, rule, phi)
        by_rules = [d for m in order for d in e.insert(m)]
        closed = e.close()
        assert e.pending == 0 and e.pending_payloads == 0, "G empty after close"
        assert all(d.rule is DeliveryRule.FLUSH for d in closed)
        assert all(d.rule is not DeliveryRule.FLUSH for d in by_rules)
        assert e.close() == []
        seq = by_rules + closed
        check_sequence(dag, seq)
        results.append([(d.sender, d.seq, d.position) for d in seq])
    assert results[0] == results[1] == results[2]


@PROPERTY
@given(execution=executions(max_n=8, max_sends=30), data=st.data())
def test_a_member_that_delivered_a_prefix_earlier_agrees_with_one_that_closes_at_once(
    execution: Execution, data: st.DataObject
) -> None:
    """One engine delivers through the rules while the DAG grows (it saw a part first);
    the other gets the final DAG in another order; close leaves them equal. The rules'
    deliveries of the first are a prefix of the second's complete sequence."""
    dag = final_dag(execution, data)
    rule = data.draw(st.sampled_from(SAFE_RULES), label="rule")
    phi = phi_for(rule, dag.n, data)
    first = reveal_order(dag, data.draw(st.lists(st.integers(0, 50), min_size=1, max_size=60)))
    split = data.draw(st.integers(0, len(first)), label="split")
    early = engine(dag.n, rule, phi)
    delivered_early = [d for m in first[:split] for d in early.insert(m)]
    rest = [d for m in first[split:] for d in early.insert(m)]
    late = engine(dag.n, rule, phi)
    second = reveal_order(dag, data.draw(st.lists(st.integers(0, 50), min_size=1, max_size=60)))
    late_seq = [d for m in second for d in late.insert(m)] + late.close()
    early_seq = delivered_early + rest + early.close()
    def ids(seq: list[MessageDelivered]) -> list[tuple[int, int, int]]:
        return [(d.sender, d.seq, d.position) for d in seq]

    assert ids(early_seq) == ids(late_seq)
    assert ids(late_seq[: len(delivered_early)]) == ids(delivered_early)
    check_sequence(dag, late_seq)


GL_EXAMPLE = [  # n = 4, member 3 silent; GL-ToTo (phi 2.5) delivers (0, 1) as a prefix
    CausalMessage(0, 1, (), "0:1"),
    CausalMessage(0, 2, (), "0:2"),
    CausalMessage(1, 1, ((0, 2),), "1:1"),
    CausalMessage(1, 2, (), "1:2"),
    CausalMessage(1, 3, (), "1:3"),
]


def test_gl_toto_prefix_deliveries_are_not_repeated_by_close() -> None:
    e = engine(4, "gltoto", 2.5)
    early = [d for m in GL_EXAMPLE for d in e.insert(m)]
    assert [(d.sender, d.seq, d.rule) for d in early] == [(0, 1, DeliveryRule.GL_PREFIX)]
    assert e.pending == 5, "a GL-ToTo prefix stays in G until its activation closes"
    closed = e.close()
    assert [(d.sender, d.seq) for d in closed] == [(0, 2), (1, 1), (1, 2), (1, 3)]
    assert [d.position for d in early + closed] == [0, 1, 2, 3, 4]
    assert e.pending == 0


def test_close_delivers_the_roots_of_each_activation_in_processor_order() -> None:
    # lex waits for member 2, which never sends: nothing is delivered by the rules
    dag = [
        CausalMessage(0, 1, (), "a"),
        CausalMessage(1, 1, ((0, 1),), "b"),
        CausalMessage(0, 2, (), "c"),
        CausalMessage(1, 2, ((0, 2),), None),  # ack-only: consumed, never reported
        CausalMessage(1, 3, (), "d"),
    ]
    e = engine(3, "lex")
    assert [d for m in dag for d in e.insert(m)] == []
    closed = e.close()
    assert [d.payload for d in closed] == ["a", "c", "b", "d"]
    assert [d.activation for d in closed] == [0, 1, 1, 3]
    assert e.delivered_ack_only == 1 and e.delivered_vertices == 5
    assert e.pending == 0 and e.close() == []


def test_close_of_an_empty_engine_and_after_everything_was_delivered() -> None:
    e = engine(3, "gltoto")
    assert e.close() == []
    for m in (CausalMessage(0, 1, (), "a"), CausalMessage(1, 1, ((0, 1),), "b"),
              CausalMessage(2, 1, ((1, 1),), "c")):
        e.insert(m)
    rest = e.close()
    assert e.pending == 0
    assert e.position == 3
    assert all(d.rule is DeliveryRule.FLUSH for d in rest)


@pytest.mark.parametrize("rule", SAFE_RULES)
def test_close_is_the_same_whatever_the_rule_when_the_rules_decided_nothing(
    rule: OrderingRule,
) -> None:
    # two of five members speak, concurrently: no rule can decide without the others
    dag = [CausalMessage(0, 1, (), "x"), CausalMessage(1, 1, (), "y"),
           CausalMessage(0, 2, (), "z")]
    e = engine(5, rule)
    assert [d for m in dag for d in e.insert(m)] == []
    assert [d.payload for d in e.close()] == ["x", "y", "z"]
