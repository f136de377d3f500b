"""The engine's fast paths against the rules as the paper states them.

``rules.gltoto`` (GL-ToTo's three questions in one pass) must answer exactly what
``gtoto_early``, ``default_rule`` and ``gl_prefix`` answer, on any vote state; and an
engine must decide exactly what a reference engine decides that evaluates every rule
with those functions and removes ack-only roots by scanning every chain to a fixpoint.
"""

from __future__ import annotations

import random

import pytest
from amcast.protocols.ordering import OrderingConfig, OrderingRule, TotalOrderEngine, rules
from amcast.protocols.ordering.messages import DeliveryRule
from amcast.protocols.ordering.votes import ActivationVotes, bits
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.ordering.causal_dags import Execution, executions, reveal_order


def _reference_gltoto(v: ActivationVotes, phi: float, delivered: int) -> tuple[DeliveryRule, int]:
    chosen = rules.gtoto_early(v, phi)
    if chosen is not None:
        return DeliveryRule.EARLY, chosen
    chosen = rules.default_rule(v)
    if chosen is not None:
        return DeliveryRule.DEFAULT, chosen
    return DeliveryRule.GL_PREFIX, rules.gl_prefix(v, phi, delivered)


def _random_votes(rng: random.Random) -> tuple[ActivationVotes, float, int]:
    """Any vote state, consistent or not: the fused function must agree on all of them."""
    n = rng.randint(1, 9)
    v = ActivationVotes(n)
    full = (1 << n) - 1
    v.voted = rng.randint(0, full) if rng.random() < 0.8 else full
    v.candidates = rng.randint(0, full) & (v.voted if rng.random() < 0.8 else full)
    dense = rng.random()
    v.voters = [
        sum(1 << k for k in range(n) if (v.voted >> k) & 1 and rng.random() < dense)
        for _ in range(n)
    ]
    phi = rng.choice([rng.randint(0, 2 * n) / 2, n / 2, rng.uniform(0, n)])
    delivered = rng.randint(0, full) & v.candidates if rng.random() < 0.3 else 0
    return v, phi, delivered


def test_fused_gltoto_answers_what_the_three_rules_answer() -> None:
    rng = random.Random(20240613)
    for _ in range(20_000):
        v, phi, delivered = _random_votes(rng)
        assert rules.gltoto(v, phi, delivered) == _reference_gltoto(v, phi, delivered)


class _ReferenceEngine(TotalOrderEngine):
    """The engine with every rule evaluated from scratch by the paper's functions, the
    candidates below a vertex found by a plain walk (no memo, no fast path), and
    ack-only roots removed by scanning every chain until nothing changes."""

    def _candidates_below(self, vertex):  # type: ignore[no-untyped-def]
        mask, seen, stack = 0, set(), [vertex]
        while stack:
            top = stack.pop()
            if top.delivered or id(top) in seen:
                continue
            seen.add(id(top))
            if top.pending == 0:
                mask |= 1 << top.index
            else:
                stack.extend(top.preds)
        return mask

    def _evaluate_gltoto(self) -> list:  # type: ignore[type-arg]
        return self._evaluate()

    def _close_activation(self, delivered: int) -> None:
        for c in bits(delivered):
            self._leave(c)
        if self._ack_roots_leave:
            changed = True
            while changed:
                changed = False
                for c, chain in enumerate(self._chains):
                    while chain and chain[0].pending == 0 and chain[0].message.payload is None:
                        self._drop_ack(c)
                        changed = True
        self.activation += 1
        self._gl_delivered = 0
        self._votes.reset()
        for chain in self._chains:
            if chain:
                self._cast_vote(chain[0])


def _state(e: TotalOrderEngine) -> tuple[int, ...]:
    return (e.activation, e.position, e.delivered_vertices, e.delivered_ack_only, e.pending,
            e.pending_payloads, e.ntail)


@pytest.mark.slow
@settings(max_examples=300, derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(execution=executions(min_n=2), data=st.data())
def test_engine_decides_as_the_reference_engine(execution: Execution, data: st.DataObject) -> None:
    priorities = data.draw(st.lists(st.integers(0, 50), min_size=1, max_size=60))
    order = reveal_order(execution, priorities)
    n = execution.n
    for rule in OrderingRule:
        for leave in (False, True):
            phi = data.draw(st.integers(3, 2 * n - 1), label="2*phi") / 2
            if rule in (OrderingRule.TOTO, OrderingRule.STOTO):
                phi = max(phi, n / 2)
            config = OrderingConfig(rule=rule, phi=phi, allow_unsafe=True, ack_roots_leave=leave)
            fast, reference = TotalOrderEngine(range(n), config), _ReferenceEngine(range(n), config)
            for m in order:
                assert fast.insert(m) == reference.insert(m), (rule.value, leave, m)
                assert _state(fast) == _state(reference)
            assert fast.close() == reference.close()
            assert _state(fast) == _state(reference)
