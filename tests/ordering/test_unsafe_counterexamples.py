"""Counterexamples to rules of the paper as written; each one marks its rule unsafe.

ToTo (section 3, rule 1b as in Dolev, Kramer and Malki) requires Ntail(s) >= n - phi
for every source s. Ntail(s) counts processors with *any* message following s, so it
depends on messages after each processor's first one, which the votes do not. Two
processors holding the same votes can then disagree: one has seen later messages that
push Ntail(s) over the bar and delivers the source set early; the other has not, waits
for Ntail(G) = n, and the default rule delivers all of M_G, non-sources included. The
activations no longer line up and the total orders diverge.

n = 8, phi = 4. Candidates a (processor 0), c (6), d (7). Processors 1-4 follow a
(nvt(a) = 5), 4 also follows c (nvt(c) = 2), 5 follows d (nvt(d) = 2). With every
processor heard from: S_G = {a, c} (votes(a, c) = 4 <= phi), d has lost to a
(votes(a, d) = 5 > phi). S-ToTo delivers {a, c}. ToTo needs Ntail(c) >= 4, which holds
only where the second messages of 1 and 2 (following c) are already in G.
"""

from __future__ import annotations

import pytest
from amcast.protocols.errors import ConfigurationError
from amcast.protocols.ordering import (
    UNSAFE_RULES,
    CausalMessage,
    OrderingConfig,
    OrderingRule,
    TotalOrderEngine,
)
from amcast.protocols.simulation.safety import first_divergence

N = 8


def m(sender: int, seq: int, *acks: tuple[int, int]) -> CausalMessage:
    return CausalMessage(sender, seq, acks, payload=f"{sender}:{seq}")


A, C, D = m(0, 1), m(6, 1), m(7, 1)
FIRSTS = [A, C, D, m(1, 1, (0, 1)), m(2, 1, (0, 1)), m(3, 1, (0, 1)), m(4, 1, (0, 1), (6, 1))]
LAST_FIRST = m(5, 1, (7, 1))
SECONDS = [m(1, 2, (6, 1)), m(2, 2, (6, 1))]


def closing_rounds(top: dict[int, int]) -> list[CausalMessage]:
    """Two ack-only rounds in which every processor acknowledges everything."""
    out = []
    for _ in range(2):
        snapshot = dict(top)
        for p in range(N):
            top[p] = top.get(p, 0) + 1
            acks = tuple((q, s) for q, s in snapshot.items() if q != p and s)
            out.append(CausalMessage(p, top[p], acks, payload=None))
    return out


def deliveries(rule: OrderingRule, order: list[CausalMessage]) -> list[tuple[int, int]]:
    engine = TotalOrderEngine(range(N), OrderingConfig(rule=rule, phi=4, allow_unsafe=True))
    out = [d.id for msg in order for d in engine.insert(msg)]
    return out + [
        d.id
        for msg in closing_rounds({0: 1, 1: 2, 2: 2, 3: 1, 4: 1, 5: 1, 6: 1, 7: 1})
        for d in engine.insert(msg)
    ]


# p sees every first message before the second messages; q sees the seconds first.
ORDER_P = [*FIRSTS, LAST_FIRST, *SECONDS]
ORDER_Q = [*FIRSTS, *SECONDS, LAST_FIRST]


def test_original_toto_diverges() -> None:
    p = deliveries(OrderingRule.TOTO, ORDER_P)
    q = deliveries(OrderingRule.TOTO, ORDER_Q)
    assert sorted(p) == sorted(q)  # the same messages ...
    assert first_divergence(p, q) == 2  # ... in different orders
    assert p[:3] == [(0, 1), (6, 1), (7, 1)]  # p: default rule, d with a and c
    assert q[:3] == [(0, 1), (6, 1), (1, 1)]  # q: early {a, c}; d comes later


@pytest.mark.parametrize("rule", [OrderingRule.STOTO, OrderingRule.GTOTO, OrderingRule.GLTOTO])
def test_the_simplified_rules_agree_on_the_same_dag(rule: OrderingRule) -> None:
    assert deliveries(rule, ORDER_P) == deliveries(rule, ORDER_Q)


def test_toto_is_marked_unsafe_and_refused_without_allow_unsafe() -> None:
    assert OrderingRule.TOTO in UNSAFE_RULES
    with pytest.raises(ConfigurationError, match="unsafe"):
        OrderingConfig(rule="toto")
