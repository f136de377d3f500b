"""Safety of every ToTo variant over random causal DAGs revealed in different orders.

Several processors see the same DAG, each in its own causally consistent order (one of
them only a causally closed part of it). For every variant: no duplicates, causal
order, pairwise prefix-consistent sequences, and identical sequences at the processors
that saw everything. Unsafe variants keep their hand-made counterexample in
``test_unsafe_counterexamples.py``; here the same check is run on them and must find a
violation, which shows the check can fail.
"""

from __future__ import annotations

import bisect

import pytest
from amcast.protocols.ordering import UNSAFE_RULES, OrderingConfig, OrderingRule, TotalOrderEngine
from amcast.protocols.simulation import safety
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.ordering.causal_dags import Execution, executions, reveal_order

SETTINGS = settings(
    max_examples=400,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

SAFE_RULES = [r for r in OrderingRule if r not in UNSAFE_RULES]


def phi_for(rule: OrderingRule, n: int, data: st.DataObject) -> float:
    if rule in (OrderingRule.TOTO, OrderingRule.STOTO, OrderingRule.LEX):
        return data.draw(st.integers(n, 2 * n - 1), label="2*phi") / 2
    return data.draw(st.integers(3, 2 * n - 1), label="2*phi") / 2


def run(execution: Execution, rule: OrderingRule, phi: float, orders: list,
        ack_roots_leave: bool = False) -> dict:
    sequences = {}
    for proc, order in enumerate(orders):
        engine = TotalOrderEngine(
            range(execution.n), OrderingConfig(rule=rule, phi=phi, allow_unsafe=True,
                                               ack_roots_leave=ack_roots_leave)
        )
        delivered = []
        for m in order:
            delivered += [d.id for d in engine.insert(m)]
        sequences[proc] = delivered
    return sequences


def violations(execution: Execution, sequences: dict, full: list[int]) -> list[str]:
    payload_seqs: dict[int, list[int]] = {}
    for m in execution.messages:
        if m.payload is not None:
            bisect.insort(payload_seqs.setdefault(m.sender, []), m.seq)
    found = safety.duplicates(sequences)
    found += safety.prefix_violations(sequences)
    found += safety.causal_violations(sequences, execution.clocks.__getitem__, payload_seqs)
    complete = [sequences[p] for p in full]
    if any(s != complete[0] for s in complete):
        found.append(f"complete processors disagree: {complete}")
    return found


def draw_orders(execution: Execution, data: st.DataObject) -> list:
    orders = []
    for _ in range(3):
        priorities = data.draw(st.lists(st.integers(0, 50), min_size=1, max_size=60))
        orders.append(reveal_order(execution, priorities))
    cut = data.draw(st.integers(0, len(execution.messages)), label="partial observer")
    orders.append(orders[-1][:cut])
    return orders


def check_safe_rules(execution: Execution, data: st.DataObject,
                     ack_roots_leave: bool = False) -> None:
    orders = draw_orders(execution, data)
    for rule in SAFE_RULES:
        phi = phi_for(rule, execution.n, data)
        sequences = run(execution, rule, phi, orders, ack_roots_leave)
        found = violations(execution, sequences, full=[0, 1, 2])
        assert not found, f"{rule.value} phi={phi}: {found}"


@pytest.mark.slow
@SETTINGS
@given(execution=executions(), data=st.data())
def test_safe_variants_stay_safe_when_ack_only_roots_leave_at_once(
    execution: Execution, data: st.DataObject
) -> None:
    """The Node's engines (``ack_roots_leave``): an ack-only vertex never becomes a
    candidate; the same DAGs, revealed in different orders, still give one order."""
    check_safe_rules(execution, data, ack_roots_leave=True)


@pytest.mark.slow
@SETTINGS
@given(execution=executions(), data=st.data())
def test_safe_variants_keep_total_causal_order_and_agreement(
    execution: Execution, data: st.DataObject
) -> None:
    check_safe_rules(execution, data)


def _unsafe_rule_check(rule: OrderingRule):  # type: ignore[no-untyped-def]
    @settings(SETTINGS, max_examples=2000, phases=[Phase.generate])
    @given(execution=executions(), data=st.data())
    def check(execution: Execution, data: st.DataObject) -> None:
        orders = draw_orders(execution, data)
        sequences = run(execution, rule, phi_for(rule, execution.n, data), orders)
        assert not violations(execution, sequences, full=[0, 1, 2])

    return check


@pytest.mark.parametrize("rule", list(UNSAFE_RULES))
def test_the_same_check_finds_the_unsafe_rules_out(rule: OrderingRule) -> None:
    with pytest.raises(AssertionError):
        _unsafe_rule_check(rule)()


@settings(max_examples=60, derandomize=True, database=None, deadline=None)
@given(execution=executions(max_sends=25), data=st.data())
def test_complete_processors_deliver_everything_that_the_rules_can(
    execution: Execution, data: st.DataObject
) -> None:
    """A final ack-only round from every processor lets every rule deliver every message
    sent before it (liveness of the default rule: Ntail(G) = n eventually)."""
    orders = draw_orders(execution, data)[:1]
    n = execution.n
    for rule, leave in [(r, leave) for r in SAFE_RULES for leave in (False, True)]:
        phi = phi_for(rule, n, data)
        engine = TotalOrderEngine(range(n), OrderingConfig(rule=rule, phi=phi,
                                                           ack_roots_leave=leave))
        delivered = [d.id for m in orders[0] for d in engine.insert(m)]
        # every processor acknowledges everything, twice (the second round's first
        # messages follow the whole first round, so it closes every activation)
        from amcast.protocols.ordering import CausalMessage

        top = [0] * n
        for m in execution.messages:
            top[m.sender] = max(top[m.sender], m.seq)
        for _ in range(n + 1):
            snapshot = list(top)
            for p in range(n):
                acks = tuple((q, snapshot[q]) for q in range(n) if q != p and snapshot[q])
                top[p] += 1
                delivered += [
                    d.id for d in engine.insert(CausalMessage(p, top[p], acks, payload=None))
                ]
        expected = {m.id for m in execution.messages if m.payload is not None}
        assert set(delivered) == expected, (rule.value, leave)


@pytest.mark.slow
@settings(SETTINGS, max_examples=300)
@given(execution=executions(min_n=2, max_n=2), data=st.data())
def test_safe_variants_with_two_members(execution: Execution, data: st.DataObject) -> None:
    """Views of two members happen (a 3-node cluster after a crash): every safe rule stays
    safe at n = 2 (G-ToTo and GL-ToTo with phi 1.5)."""
    check_safe_rules(execution, data)
    check_safe_rules(execution, data, ack_roots_leave=True)
