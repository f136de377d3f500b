"""The native reliable layer against the Python reference, trace by trace.

``amcast_native.ReliableLayer`` must behave as ``reliable.layer.ReliableLayer`` does: the
same released vertices in the same order, the same datagrams taken, the same
``next_timer``, counters, drops and refusals, and the same draws from the rng (the
simulations stay seed-identical). Each trace here is seeded: a few other members are
real Python layers that send, ack, heartbeat and nack among themselves; their datagrams
reach the two layers under test lost, duplicated and reordered, together with forged
nacks, repairs and bad vertices, while the layers under test send their own vertices,
run their timers at random virtual times, hold and release, freeze, close at a cut,
report availability and retire. After every step every return value and everything
observable of the two layers must be equal, rng states included.

Skipped, with the reason, where the extension is not built (``make rust``).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from typing import Any

import pytest
from amcast.protocols.errors import ProtocolViolation
from amcast.protocols.node_config import NodeConfig
from amcast.protocols.reliable import native as selection
from amcast.protocols.reliable.layer import ReliableCounters, ReliableLayer
from amcast.protocols.reliable.ratelimit import PeerLimiter
from amcast.protocols.reliable.repair import Lateness
from amcast.protocols.vocabulary import ServiceLevel
from amcast.protocols.wire.codec import Datagram, Fragment, Kind, Vertex

amcast_native = pytest.importorskip("amcast_native", reason="amcast_native is not built "
                                    "(make rust): only the Python layer runs")
NativeLayer = getattr(amcast_native, "ReliableLayer", None)
pytestmark = pytest.mark.skipif(NativeLayer is None, reason="amcast_native is built without "
                                "its reliable layer (make rust)")

SERVICES = (ServiceLevel.CAUSAL, ServiceLevel.AGREED, ServiceLevel.SAFE)


def config(rng: random.Random) -> NodeConfig:
    """Small windows and buffers, tight limits: the refusals happen."""
    return NodeConfig(
        group_key=b"sixteen byte key",
        receive_window=rng.choice([4, 8, 64]),
        max_held_vertices=rng.choice([3, 6, 1000]),
        max_nack_ranges=rng.choice([1, 2, 8]),
        max_repair_per_nack=rng.choice([1, 3, 50]),
        nack_burst=rng.choice([0, 2]),
        datagram_budget=1472,
        repair_burst_bytes=rng.choice([0, 1500]),
        lazy_ack_delay=rng.choice([0.01, 0.05]),
        nack_reorder_max=rng.choice([0.0, 0.02]),
    )


class Subject:
    """One layer under test with its own collaborators (same seeds for both)."""

    def __init__(self, cls: Any, view: int, me: int, members: tuple[int, ...],
                 cfg: NodeConfig, seed: int, shared: bool) -> None:
        self.rng = random.Random(seed)
        self.drops: list[tuple[str, str]] = []
        self.counters = ReliableCounters()
        self.lateness = Lateness(cfg.nack_reorder_max) if shared else None
        self.limiter = PeerLimiter(cfg.repair_limits(len(members))) if shared else None
        self.layer = cls(view, me, members, config=cfg, rng=self.rng, now=0.0,
                         drop=lambda r, d: self.drops.append((r, d)), counters=self.counters,
                         limiter=self.limiter, lateness=self.lateness)


def vertex_key(v: Vertex) -> tuple[Any, ...]:
    return (v.origin, v.seq, v.acks, v.service, v.send_ts, v.items)


def dg_key(dg: Datagram) -> tuple[Any, ...]:
    return (dg.kind, dg.sender, dg.view, dg.hb_seq, dg.nacks,
            tuple(vertex_key(v) for v in dg.vertices), dg.acks)


def bucket_state(limiter: PeerLimiter) -> Any:
    return {name: {peer: (b.tokens, b._at) for peer, b in table.items()}
            for name, table in (("n", limiter._nacks), ("r", limiter._repairs))}


def observe(s: Subject) -> dict[str, Any]:
    """Everything the node, the session and the membership layer can see of a layer."""
    layer = s.layer
    members = layer.members
    rel, acks = layer.releaser, layer.acks
    c = s.counters
    return {
        "counters": {k: getattr(c, k) for k in ReliableCounters.__slots__},
        "drops": list(s.drops),
        "rng": s.rng.getstate(),
        "lateness": vars(layer._nacks.lateness if isinstance(layer, ReliableLayer)
                         else layer.lateness),
        "limiter": bucket_state(layer.limiter),
        "next_timer": layer.next_timer(),
        "seq": layer.seq, "frozen": layer.frozen, "retired": layer.retired,
        "quiet": layer.quiet, "holding": layer.holding, "last_sent": layer.last_sent,
        "unstable": layer.unstable(), "acks_delta": layer.acks_delta(),
        "nack_reservation": layer.nack_reservation(),
        "held_count": rel.held_count, "released": dict(rel.released),
        "known": dict(rel.known), "limit": rel.limit, "final": rel.final,
        "gaps": [rel.has_gap(m) for m in members],
        "missing": [rel.missing(m, 5) for m in members],
        "held": [vertex_key(v) for v in rel.held_vertices()],
        "dirty": acks.dirty, "stable": [acks.stable(m) for m in members],
        "vectors": [dict(acks.vectors[m]) for m in members],
        "acks_held": [dict(acks.held[m]) for m in members],
        "store": {m: sorted(d) for m, d in layer.store.items()},
        "outq": [dg_key(d) for d in layer.outq],
    }


def outcome(call: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "ok", call()
    except ProtocolViolation as exc:
        return "violation", (exc.reason, exc.detail)
    except (KeyError, TypeError, ValueError) as exc:
        return type(exc).__name__, str(exc)


def normal(value: Any) -> Any:
    """A return value in comparable form (vertices and datagrams by content)."""
    if isinstance(value, list):
        return [normal(v) for v in value]
    if isinstance(value, Vertex):
        return vertex_key(value)
    if isinstance(value, Datagram):
        return dg_key(value)
    return value


class Trace:
    """One seeded trace driving ``pure`` and ``native`` side by side."""

    def __init__(self, seed: int, native_cls: Any = None) -> None:
        rng = self.rng = random.Random(seed)
        n = rng.randint(2, 5)
        ids = rng.sample([0, 1, 2, 3, 5, 8, 9, 16, 17, 33, 2**40], n)
        self.members = tuple(ids)
        self.me = rng.choice(ids)
        self.view = rng.randint(1, 9)
        self.cfg = config(rng)
        shared = rng.random() < 0.5
        sub_seed = rng.randrange(2**32)
        self.pure = Subject(ReliableLayer, self.view, self.me, self.members, self.cfg,
                            sub_seed, shared)
        self.native = Subject(native_cls or NativeLayer, self.view, self.me, self.members,
                              self.cfg, sub_seed, shared)
        if rng.random() < 0.5:
            prompt = frozenset(rng.sample(ids, rng.randint(0, n)))
            self.pure.layer.prompt_origins = prompt
            self.native.layer.prompt_origins = prompt
        self.sources = {
            m: ReliableLayer(self.view, m, self.members, config=self.cfg,
                             rng=random.Random(rng.random()), now=0.0,
                             drop=lambda r, d: None, counters=ReliableCounters())
            for m in ids if m != self.me}
        self.pool: list[Datagram] = []
        self.now = 0.0
        self.steps = 0
        self.closing_at = rng.randint(60, 160)
        """The step from which the view may change (freeze, cut, retire)."""

    # ------------------------------------------------------------------ both layers

    def both(self, name: str, *args: Any, release: bool = False) -> Any:
        results = []
        for s in (self.pure, self.native):
            result = outcome(lambda s=s: getattr(s.layer, name)(*args))
            if release and result[0] == "ok" and isinstance(result[1], list):
                for v in result[1]:
                    s.layer.on_release(v, self.now)
                s.layer.collect_garbage()
            results.append(result)
        pure, native = results
        assert normal(pure) == normal(native), (self.steps, name, args, pure, native)
        if release and pure[0] == "ok" and isinstance(pure[1], list):
            # received vertices come back as the very objects offered
            for a, b in zip(pure[1], native[1], strict=True):
                assert a.origin != self.me or vertex_key(a) == vertex_key(b)
        return pure[1] if pure[0] == "ok" else None

    def compare(self) -> None:
        a, b = observe(self.pure), observe(self.native)
        for key in a:
            assert a[key] == b[key], (self.steps, key, a[key], b[key])

    # ------------------------------------------------------------------ the others

    def source_send(self) -> None:
        rng = self.rng
        m = rng.choice(list(self.sources))
        src = self.sources[m]
        if rng.random() < 0.8:
            items: tuple[Any, ...] = tuple(
                rng.randbytes(rng.randint(0, 40)) if rng.random() < 0.8
                else Fragment(100, rng.randint(0, 50), rng.randbytes(rng.randint(1, 30)))
                for _ in range(rng.randint(1, 3)))
        else:
            items = ()
        v = src.new_vertex(rng.choice(SERVICES), items, self.now)
        src.on_release(v, self.now)
        self.spread(m)

    def source_timer(self) -> None:
        m = self.rng.choice(list(self.sources))
        src = self.sources[m]
        for v in src.handle_timer(self.now + self.rng.choice([0.0, 0.05, 1.0])):
            src.on_release(v, self.now)
        self.spread(m)

    def spread(self, m: int) -> None:
        for dg in self.sources[m].take_datagrams(self.now):
            self.pool.append(dg)
            for other, layer in self.sources.items():
                if other != m:
                    for v in layer.receive(dg, self.now):
                        layer.on_release(v, self.now)
                    layer.collect_garbage()

    def forged(self) -> Datagram:
        """A nack, repair or bad vertex from another member."""
        rng = self.rng
        m = rng.choice(list(self.sources))
        src = self.sources[m]
        choice = rng.random()
        if choice < 0.5:
            nacks = tuple(
                (node, first, first + rng.randint(0, 6))
                for node in rng.sample(self.members, rng.randint(1, len(self.members)))
                for first in [rng.randint(0, max(1, self.pure.layer.seq + 3))])
            return Datagram(Kind.NACK, m, self.view, src.seq, nacks)
        if choice < 0.8:
            stored = [v for d in src.store.values() for v in d.values()]
            if stored:
                vs = tuple(rng.sample(stored, min(len(stored), rng.randint(1, 3))))
                return Datagram(Kind.REPAIR, m, self.view, src.seq, (), vs)
        bad_ack = rng.choice([m, 10**6, rng.choice(self.members)])
        v = Vertex(m, src.seq + rng.randint(1, 3), ((bad_ack, 1),), ServiceLevel.AGREED,
                   self.now, (b"x",))
        return Datagram(Kind.DATA, m, self.view, v.seq, (), (v,))

    # ------------------------------------------------------------------ a step

    def step(self) -> None:
        rng = self.rng
        self.steps += 1
        self.now += rng.choice([0.0, 0.001, 0.003, 0.01, 0.05, 0.3])
        r = rng.random()
        if r < 0.22:
            self.source_send()
        elif r < 0.27:
            self.source_timer()
        elif r < 0.52 and self.pool:
            i = rng.randrange(len(self.pool))
            dg = self.pool[i] if rng.random() < 0.3 else self.pool.pop(i)
            if rng.random() < 0.85:  # else lost
                self.both("receive", dg, self.now, release=True)
        elif r < 0.57:
            self.both("receive", self.forged(), self.now, release=True)
        elif r < 0.65:
            if not self.pure.layer.frozen:
                items = tuple(rng.randbytes(rng.randint(0, 20))
                              for _ in range(rng.randint(0, 2)))
                service = rng.choice(SERVICES)
                acks = self.pure.layer.acks_delta() if rng.random() < 0.5 else None
                self.both("new_vertex", service, items, self.now, acks, release=False)
                for s in (self.pure, self.native):
                    v = s.layer.outq[-1].vertices[0]
                    s.layer.on_release(v, self.now)
                    s.layer.collect_garbage()
        elif r < 0.78:
            t = self.pure.layer.next_timer()
            at = t if t is not None and rng.random() < 0.6 else self.now
            self.now = max(self.now, at)
            self.both("handle_timer", self.now, release=True)
        elif r < 0.86:
            dgs = self.both("take_datagrams", self.now)
            for dg in dgs or ():
                for layer in self.sources.values():
                    if rng.random() < 0.8:
                        for v in layer.receive(dg, self.now):
                            layer.on_release(v, self.now)
                        layer.collect_garbage()
        elif r < 0.89:
            if rng.random() < 0.3:
                self.both("hold_releases", rng.random() < 0.3, release=True)
        elif r < 0.91:
            self.both("want_report", self.now)
        elif r < 0.93:
            self.both("unstable_bytes")
        elif r < 0.95:
            self.both("availability", rng.choice([-1, 0, 2, 100]))
            cut = {m: max(0, s + rng.randint(-1, 1))
                   for m, s in self.pure.layer.releaser.released.items()}
            self.both("exceeds", cut)
            self.both("holds", cut)
        elif self.steps < self.closing_at:
            pass
        elif r < 0.975:
            self.both("freeze")
        elif r < 0.99:
            cut = {m: max(0, s + rng.randint(0, 3))
                   for m, s in self.pure.layer.releaser.released.items()}
            self.both("close_at", cut, self.now, release=True)
        elif rng.random() < 0.5:
            self.both("retire")
        else:
            quiet = rng.random() < 0.5
            self.pure.layer.quiet = self.native.layer.quiet = quiet
        self.compare()


def run_trace(seed: int, steps: int = 150, native_cls: Any = None) -> Trace:
    trace = Trace(seed, native_cls)
    trace.compare()
    for _ in range(steps):
        trace.step()
    return trace


@pytest.mark.parametrize("block", range(20))
def test_native_and_pure_layers_agree_on_random_traces(block: int) -> None:
    for seed in range(block * 30, block * 30 + 30):
        run_trace(seed)


def test_the_traces_reach_every_kind_of_outcome() -> None:
    """The traces are not vacuous: across seeds they release and drop for every reason
    the layer has but a repair past the byte bucket."""
    reasons: set[str] = set()
    released = 0
    for seed in range(60):
        trace = run_trace(seed)
        reasons.update(r for r, _ in trace.pure.drops)
        released += trace.pure.counters.vertices_released
    assert released > 1000
    assert {"self_ack", "unknown_member", "nack_beyond_sent", "beyond_view_cut",
            "receive_buffer_full", "beyond_receive_window", "nack_rate_limited",
            "nack_range_truncated"} <= reasons, reasons


class Perturbed:
    """A native layer whose ``next_timer`` is off by a nanosecond once a timer is armed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._inner = NativeLayer(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "_inner":
            object.__setattr__(self, name, value)
        else:
            setattr(self._inner, name, value)

    def next_timer(self) -> float | None:
        t = self._inner.next_timer()
        return None if t is None else t + 1e-9


class DropsOneDatagram(Perturbed):
    def next_timer(self) -> float | None:
        return self._inner.next_timer()

    def take_datagrams(self, now: float) -> list[Datagram]:
        out: list[Datagram] = self._inner.take_datagrams(now)
        return out[:-1] if len(out) > 1 else out


@pytest.mark.parametrize("planted", [Perturbed, DropsOneDatagram])
def test_the_harness_detects_a_planted_difference(planted: type) -> None:
    with pytest.raises(AssertionError):
        for seed in range(20):
            run_trace(seed, native_cls=planted)


def test_the_set_order_matches_cpython() -> None:
    """The native layer iterates its sets of nodes in CPython's order (the rng draws and
    releases follow it)."""
    rng = random.Random(7)
    for _ in range(3000):
        values = [rng.choice([rng.randint(-3, 80), rng.randint(-2**62, 2**62)])
                  for _ in range(rng.randint(1, 20))]
        assert amcast_native.set_order(values) == list(set(values)), values


# ---------------------------------------------------------------------- refusals


def make(cls: Any, members: tuple[int, ...] = (1, 2, 3), me: int = 1) -> Subject:
    return Subject(cls, 1, me, members, NodeConfig(group_key=b"sixteen byte key"), 1, False)


@pytest.mark.parametrize("members,me", [((1, 2, 1), 1), ((1, 2), 3), ((1, 2**70), 1)])
def test_the_native_layer_refuses_what_it_cannot_be(members: tuple[int, ...], me: int) -> None:
    from amcast.protocols.errors import ConfigurationError
    with pytest.raises(ConfigurationError):
        make(NativeLayer, members, me)
    # the selection gives such a view the Python layer
    assert selection.layer_class("native", me, members) is ReliableLayer


def test_a_vertex_of_our_id_we_never_sent_is_refused_alike() -> None:
    """Another member hands us a vertex of our own id beyond what we sent (a forgery, or
    an impostor's under our id, relayed): dropped, never released, so our own next
    vertex is the only one with that id; one we did send comes back as a duplicate."""
    agreed = ServiceLevel.AGREED
    for cls in (ReliableLayer, NativeLayer):
        s = make(cls)
        forged = Vertex(1, 1, (), agreed, 0.0, (b"forged",))
        theirs = Vertex(2, 1, (), agreed, 0.0, (b"theirs",))
        out = s.layer.receive(Datagram(Kind.REPAIR, 2, 1, 1, (), (forged, theirs)), 0.1)
        assert [(v.origin, v.seq) for v in out] == [(2, 1)]
        assert s.drops == [("own_vertex_not_sent", "vertex (1, 1) from 2")]
        for v in out:
            s.layer.on_release(v, 0.1)
        own = s.layer.new_vertex(agreed, (b"ours",), 0.2)
        s.layer.on_release(own, 0.2)
        assert (own.origin, own.seq) == (1, 1)
        assert s.layer.receive(Datagram(Kind.REPAIR, 3, 1, 0, (), (own,)), 0.3) == []
        assert s.counters.duplicates == 1 and len(s.drops) == 1


def test_bad_input_is_refused_alike() -> None:
    pure, nat = make(ReliableLayer), make(NativeLayer)
    stranger = Datagram(Kind.HEARTBEAT, 9, 1, 0, (), (), ())
    assert pure.layer.foreign(stranger) == nat.layer.foreign(stranger) == "unknown_sender"
    v = Vertex(2, 1, ((7, 1),), ServiceLevel.AGREED, 0.0, (b"a",))
    odd = Datagram(Kind.DATA, 2, 1, 1, ((5, 1, 1),), (v,))
    assert pure.layer.foreign(odd) == nat.layer.foreign(odd) == "unknown_member"
    for s in (pure, nat):
        with pytest.raises(KeyError):
            s.layer.receive(stranger, 0.1)
        with pytest.raises(KeyError):
            s.layer.receive(Datagram(Kind.DATA, 2, 1, 1, (), (Vertex(9, 1, (), ServiceLevel.AGREED,
                                                                       0.0, (b"a",)),)), 0.1)
        with pytest.raises(KeyError):
            s.layer.close_at({1: 0, 2: 0}, 0.1)  # 3 missing from the cut
        with pytest.raises(KeyError):
            s.layer.holds({9: 1})
        with pytest.raises(KeyError):
            s.layer.releaser.has_gap(9)
        # a vertex acking an outsider or itself: a counted drop, the same words
        s.layer.receive(odd._replace() if hasattr(odd, "_replace") else
                        dataclasses.replace(odd, nacks=()), 0.2)
        s.layer.receive(Datagram(Kind.DATA, 2, 1, 1, (), (
            Vertex(2, 1, ((2, 1),), ServiceLevel.AGREED, 0.0, (b"a",)),)), 0.2)
    assert pure.drops == nat.drops == [
        ("unknown_member", "vertex (2, 1) acks node 7"),
        ("self_ack", "vertex (2, 1) acks its own sender")]
    assert pure.layer.exceeds({}) == nat.layer.exceeds({}) is False


def test_the_selection_follows_the_core(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(selection.RELIABLE_ENV, raising=False)
    assert selection.layer_class("native", 1, (1, 2)) is NativeLayer
    monkeypatch.setenv(selection.RELIABLE_ENV, "auto")
    assert selection.layer_class("native", 1, (1, 2)) is NativeLayer
    monkeypatch.setenv(selection.RELIABLE_ENV, "pure")
    assert selection.layer_class("native", 1, (1, 2)) is ReliableLayer
    monkeypatch.setenv(selection.RELIABLE_ENV, "native")
    assert selection.layer_class("native", 1, (1, 2)) is NativeLayer
    assert selection.layer_class("pure", 1, (1, 2)) is ReliableLayer
    assert selection.layer_core_for("native") == "native"
    monkeypatch.setenv(selection.RELIABLE_ENV, "rust")
    with pytest.raises(ValueError, match="AMCAST_RELIABLE"):
        selection.layer_class("native")
