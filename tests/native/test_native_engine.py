"""Differential tests of the ToTo engine: the native one (``amcast_native``,
``native/src/ordering``) and the Python reference (``protocols/ordering/engine.py``) are
fed the same random causal DAGs, with invalid messages mixed in, and must give the same
deliveries (every field, in the same order), the same ``ProtocolViolation`` reasons and
details, and the same counters after every insertion and at ``close``.

Skipped, with the reason, where the extension is not built (``make rust``)."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
from amcast.protocols.errors import ConfigurationError, ProtocolViolation
from amcast.protocols.ordering import (
    CausalMessage,
    DeliveryRule,
    MessageDelivered,
    OrderingConfig,
    OrderingRule,
    TotalOrderEngine,
)
from amcast.protocols.ordering.native import engine_class, engine_core, make_engine

try:
    from amcast_native import TotalOrderEngine as NativeEngine
except ImportError:  # not built, or built before the engine
    NativeEngine = None

pytestmark = pytest.mark.skipif(
    NativeEngine is None, reason="amcast_native is not built with its engine (make rust): only "
    "the Python engine runs")

Engine = Any
Record = tuple[Any, ...]


def state(e: Engine) -> Record:
    return (e.activation, e.position, e.delivered_vertices, e.delivered_ack_only, e.pending,
            e.pending_payloads, e.ntail, e.n, e.phi, e.rule, e.members)


def delivery(d: MessageDelivered) -> Record:
    assert type(d) is MessageDelivered and type(d.rule) is DeliveryRule
    return (d.sender, d.seq, d.payload, d.position, d.activation, d.rule, d.ntail, d.unseen,
            d.nvt)


def step(e: Engine, action: Callable[[], list[MessageDelivered]]) -> Record:
    try:
        out = action()
    except ProtocolViolation as exc:
        return ("violation", exc.reason, exc.detail, state(e))
    return ("ok", tuple(delivery(d) for d in out), state(e))


def random_phi(rng: random.Random, rule: OrderingRule, n: int) -> float | None:
    if rng.random() < 0.4 or n < 3:
        return None
    if rule in (OrderingRule.TOTO, OrderingRule.STOTO):
        return rng.choice([n / 2, (n + 1) // 2, n / 2 + 0.5, n - 1, n - 0.5])
    return rng.choice([1.5, 2, n / 2, n - 1, n - 0.5, rng.uniform(1.01, n - 0.01)])


def random_messages(rng: random.Random, members: list[int], count: int,
                    invalid: float) -> list[CausalMessage]:
    """A causal insertion order: each message acks some already inserted ones; with
    probability ``invalid`` a message the engine must refuse (and then ignore)."""
    inserted = {m: 0 for m in members}
    ack_only = rng.choice([0.0, 0.2, 0.5, 0.8])
    density = rng.choice([0.2, 0.5, 0.9])
    out = []
    for _ in range(count):
        sender = rng.choice(members)
        acks = [(node, rng.randint(max(1, top - 2), top) if rng.random() < 0.7 else
                 rng.randint(1, top))
                for node, top in inserted.items() if top and rng.random() < density]
        rng.shuffle(acks)
        if acks and rng.random() < 0.2:
            acks.append(rng.choice(acks))  # a repeated ack
        seq = inserted[sender] + 1
        payload = None if rng.random() < ack_only else f"m{sender}.{seq}"
        if rng.random() < invalid:
            kind = rng.randrange(6)
            if kind == 0:
                sender = max(members) + rng.randint(1, 3)
            elif kind == 1:
                seq = rng.choice([seq + rng.randint(1, 3), max(0, seq - rng.randint(1, 3)),
                                  2**70, -2**70])
            elif kind == 2:
                acks.insert(rng.randrange(len(acks) + 1), (-1 - rng.randrange(3), 1))
            elif kind == 3:
                node = rng.choice(members)
                unseen = inserted[node] + 1 + (node == sender)
                acks.insert(rng.randrange(len(acks) + 1), (node, unseen))
            elif kind == 4:
                bad = (rng.choice(members), rng.choice([0, -3, 2**65]))
                acks.insert(rng.randrange(len(acks) + 1), bad)
            else:
                acks.append((2**80, 1))
            out.append(CausalMessage(sender, seq, tuple(acks), payload))
            continue
        out.append(CausalMessage(sender, seq, tuple(acks), payload))
        inserted[sender] = seq
    return out


def run(factory: Callable[..., Engine], members: list[int], config: OrderingConfig,
        messages: list[CausalMessage], close_at: set[int]) -> list[Record]:
    e = factory(members, config)
    records = [("init", state(e))]
    for k, m in enumerate(messages):
        records.append(step(e, lambda m=m: e.insert(m)))
        if k in close_at:
            records.append(step(e, e.close))
    records.append(step(e, e.close))
    return records


def scenario(seed: int) -> tuple[list[int], OrderingConfig, list[CausalMessage], set[int]]:
    rng = random.Random(seed)
    n = rng.choice([1, 2, 3, 3, 4, 5, 5, 6, 7, 8, 10, 13, 16, 31, 64, 65, 100, 128])
    base = rng.choice([0, 1, 100, 2**40])
    members = sorted(rng.sample(range(base, base + 3 * n + 1), n))
    rule = rng.choice(list(OrderingRule))
    config = OrderingConfig(rule=rule, phi=random_phi(rng, rule, n), allow_unsafe=True,
                            ack_roots_leave=rng.random() < 0.6)
    count = rng.randint(1, 40 if n > 16 else 120)
    messages = random_messages(rng, members, count, rng.choice([0.0, 0.0, 0.05, 0.2]))
    close_at = {rng.randrange(count) for _ in range(rng.choice([0, 0, 1, 2]))}
    return members, config, messages, close_at


def first_difference(a: list[Record], b: list[Record]) -> tuple[int, Record, Record] | None:
    for k, (x, y) in enumerate(zip(a, b, strict=True)):
        if x != y:
            return k, x, y
    return None


@pytest.mark.parametrize("block", range(20))
def test_native_and_pure_engines_agree_on_random_dags(block: int) -> None:
    for seed in range(block * 100, (block + 1) * 100):
        members, config, messages, close_at = scenario(seed)
        pure = run(TotalOrderEngine, members, config, messages, close_at)
        native = run(NativeEngine, members, config, messages, close_at)
        assert first_difference(pure, native) is None, (seed, first_difference(pure, native))


def test_a_planted_difference_is_caught() -> None:
    """The comparison is not vacuous: an engine that misreports one delivery's nvt, or
    one refusal's detail, differs."""

    class Planted(TotalOrderEngine):
        planted = False

        def insert(self, message: CausalMessage) -> list[MessageDelivered]:
            out = super().insert(message)
            if self.position >= 3 and out and not self.planted:
                self.planted = True
                d = out[-1]
                out[-1] = MessageDelivered(d.sender, d.seq, d.payload, d.position,
                                           d.activation, d.rule, d.ntail, d.unseen, d.nvt + 1)
            return out

    config = OrderingConfig(rule=OrderingRule.LEX)
    members = [1, 2, 3]
    messages = random_messages(random.Random(7), members, 60, 0.0)
    assert first_difference(run(TotalOrderEngine, members, config, messages, set()),
                            run(NativeEngine, members, config, messages, set())) is None
    planted = first_difference(run(Planted, members, config, messages, set()),
                               run(NativeEngine, members, config, messages, set()))
    assert planted is not None
    wrong = TotalOrderEngine(members, config)
    native = NativeEngine(members, config)
    bad = CausalMessage(1, 2)
    assert step(wrong, lambda: wrong.insert(bad)) == step(native, lambda: native.insert(bad))
    assert step(wrong, lambda: wrong.insert(CausalMessage(1, 3))) != \
        step(native, lambda: native.insert(CausalMessage(1, 4)))


def test_the_same_configuration_errors() -> None:
    for members, config in (([1, 1], None), ([], None),
                            ([1, 2, 3], OrderingConfig(rule=OrderingRule.STOTO, phi=1.0))):
        with pytest.raises(ConfigurationError) as pure:
            TotalOrderEngine(members, config)
        with pytest.raises(ConfigurationError) as native:
            NativeEngine(members, config)
        assert str(pure.value) == str(native.value)
    with pytest.raises(ConfigurationError, match="at most 128"):
        NativeEngine(list(range(129)))
    with pytest.raises(ConfigurationError, match="64-bit"):
        NativeEngine([1, 2**70])


def test_the_defaults_and_payloads_pass_through() -> None:
    native, pure = NativeEngine([5, 9]), TotalOrderEngine([5, 9])
    assert state(native) == state(pure) and native.config == pure.config
    payload = object()
    out = native.insert(CausalMessage(5, 1, (), payload))
    out += native.insert(CausalMessage(9, 1, ((5, 1),), None))
    out += native.close()
    assert [d.payload for d in out] == [payload] and out[0].payload is payload


def test_selection_follows_the_core(monkeypatch: pytest.MonkeyPatch) -> None:
    assert engine_class("pure") is TotalOrderEngine
    assert engine_class("native") is NativeEngine and engine_class("auto") is NativeEngine
    assert engine_class("native", n=129) is TotalOrderEngine  # too large for the masks
    monkeypatch.setenv("AMCAST_CORE", "pure")
    assert engine_core(make_engine([1, 2])) == "pure"
    monkeypatch.setenv("AMCAST_CORE", "native")
    assert engine_core(make_engine([1, 2])) == "native"
    assert engine_core(make_engine([1, 2], core="pure")) == "pure"
    with pytest.raises(ValueError, match="expected one of"):
        engine_class("rust")


@pytest.mark.parametrize("n", [2, 4, 8, 16])
def test_native_and_pure_engines_agree_on_simulated_broadcasts(n: int) -> None:
    """The DAGs of the simulator's causal broadcast (compact acks, ack-only messages),
    every processor's release order, under every rule."""
    from amcast.protocols.simulation.causal_broadcast import Topology, Workload, simulate

    trace = simulate(Workload(n=n, rate=40.0, duration=1.0), Topology(lans=2, gateway=0.005),
                     seed=n)
    for rule in OrderingRule:
        for leave in (False, True):
            config = OrderingConfig(rule=rule, allow_unsafe=True, ack_roots_leave=leave)
            for p in range(n):
                messages = [m for _, m in trace.releases[p]]
                pure = run(TotalOrderEngine, list(range(n)), config, messages, set())
                native = run(NativeEngine, list(range(n)), config, messages, set())
                assert first_difference(pure, native) is None, (rule, leave, p)
