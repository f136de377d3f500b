"""The swap simulator: every checker holds over many seeds, modes, shapes, faults and
membership changes, and each checker catches a planted violation."""

from __future__ import annotations

from dataclasses import replace

import pytest
from amcast.protocols.simulation import swap_checkers as sc
from amcast.protocols.simulation.network import LinkFaults, NetworkConfig
from amcast.protocols.simulation.swap_cluster import (
    Join,
    Leave,
    MulticastRecord,
    SwapDatagramRecord,
    SwapSimConfig,
    SwapTrace,
    run_trace,
)
from amcast.protocols.simulation.swap_sweep import simulate, sweep
from amcast.protocols.swap.arrow import ArrowNode
from amcast.protocols.swap.delivery import Delivered, Gap
from amcast.protocols.swap.messages import Multicast, Ordered

LOSSY = NetworkConfig(LinkFaults(loss=0.05, duplicate=0.05, reorder=0.3))
MODES = ("arrow", "combining", "hybrid")


def test_same_seed_same_run() -> None:
    cfg = SwapSimConfig(mode="combining", data=LOSSY)
    a, b, c = run_trace(cfg, 3), run_trace(cfg, 3), run_trace(cfg, 4)
    assert a.multicasts == b.multicasts and a.deliveries == b.deliveries
    assert a.multicasts != c.multicasts


@pytest.mark.parametrize("mode", MODES)
def test_sweep_clean_network(mode: str) -> None:
    cfg = SwapSimConfig(mode=mode, n=9, shape="balanced")  # type: ignore[arg-type]
    assert sweep(cfg, range(120)) == {}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", ["star", "path", "balanced"])
def test_sweep_lossy_reordering_network_gives_total_order_with_gaps(mode: str, shape: str) -> None:
    cfg = SwapSimConfig(mode=mode, n=8, shape=shape, data=LOSSY)  # type: ignore[arg-type]
    assert sweep(cfg, range(40)) == {}
    gaps = sum(isinstance(e, Gap) for e in
               (e for s in range(5) for v in run_trace(cfg, s).deliveries.values() for e in v))
    assert gaps > 0  # the loss did reach the members, as named gaps


@pytest.mark.parametrize("mode", MODES)
def test_sweep_reply_variant(mode: str) -> None:
    cfg = SwapSimConfig(mode=mode, n=8, data=LOSSY, reply=True)  # type: ignore[arg-type]
    assert sweep(cfg, range(60)) == {}
    trace = run_trace(cfg, 0)
    assert any(r.reply for r in trace.swaps)
    assert all(r.event.at == r.event.ordered.msg_id[0] for r in trace.multicasts)


@pytest.mark.parametrize("mode", MODES)
def test_sweep_messages_that_vanish_are_skipped_the_same_way_everywhere(mode: str) -> None:
    """A multicast lost by every member, header and all (its sender failed between the
    swap and the multicast): members skip it once the network drains, "one or more
    messages missing", and common messages keep one order across later epochs."""
    leaves = (Leave(4), Leave(0))
    cfg = SwapSimConfig(mode=mode, n=8, vanish=0.05, data=LOSSY,  # type: ignore[arg-type]
                        changes=(Join(8, 3), *leaves))
    assert sweep(cfg, range(25)) == {}
    assert sweep(replace(cfg, reply=True), range(25)) == {}
    trace = run_trace(cfg, 2)
    unnamed = [e for v in trace.deliveries.values() for e in v
               if isinstance(e, Gap) and e.missing is None]
    assert trace.vanished and unnamed


@pytest.mark.parametrize("mode", MODES)
def test_sweep_with_joins_and_leaves(mode: str) -> None:
    leaves = (Leave(4), Leave(0), Leave(3), Leave(1))  # 0 is the sink or root, 1 is in R
    cfg = SwapSimConfig(mode=mode, changes=(Join(7, 3), *leaves, Join(8, 7)))  # type: ignore[arg-type]
    assert sweep(cfg, range(30)) == {}
    trace = run_trace(cfg, 1)
    assert 7 in trace.final_members and 4 not in trace.final_members
    assert trace.deliveries[8] and trace.deliveries[4]


@pytest.mark.parametrize("sender", [0, 3, 6])
def test_single_sender_arrow_costs_at_most_the_way_to_the_sink(sender: int) -> None:
    cfg = SwapSimConfig(mode="arrow", shape="path", senders=(sender,), messages=20)
    trace = simulate(cfg, 5)
    assert trace.violations == []
    assert len(trace.swaps) == abs(sender - 3)  # the path's centre is the initial sink
    if sender == 3:
        assert trace.swaps == []  # no swap datagram at all
    replied = simulate(replace(cfg, reply=True), 5)
    assert replied.violations == [] and len(replied.swaps) == len(trace.swaps) + (sender != 3)


def test_single_sender_combining_pays_the_root_every_time() -> None:
    cfg = SwapSimConfig(mode="combining", shape="path", senders=(6,), messages=20, window=0.0)
    trace = simulate(cfg, 5)
    assert trace.violations == [] and len(trace.swaps) == 20 * 3


# -- planted violations: each checker catches its own --------------------------------

M1, M2 = (1, 0), (2, 0)


def clean() -> SwapTrace:
    trace = run_trace(SwapSimConfig(mode="combining", n=5), 1)
    assert sc.check(trace) == []
    return trace


def test_planted_two_sinks_at_rest() -> None:
    trace = SwapTrace("arrow", sink_samples=[(0.0, 1, 0), (1.0, 2, 1), (2.0, 2, 0)])
    assert len(sc.one_sink(trace)) == 1


def test_planted_too_many_hops() -> None:
    trace = clean()
    r = trace.multicasts[0]
    trace.multicasts[0] = replace(r, event=replace(r.event, hops=r.hop_bound + 1))
    assert len(sc.swap_hops(trace)) == 1


def test_planted_single_sender_traffic() -> None:
    trace = SwapTrace("arrow", single_sender_budget=0,
                      swaps=[SwapDatagramRecord(0.0, 1, 2, False)])
    assert len(sc.single_sender_quiet(trace)) == 1


def test_planted_traffic_around_the_root() -> None:
    trace = clean()
    trace.swaps.append(SwapDatagramRecord(0.0, 1, 3, False))
    assert len(sc.through_root(trace)) == 1
    trace = clean()
    r = trace.multicasts[-1]
    trace.multicasts[-1] = replace(r, event=replace(r.event, by_root=False, via=None))
    assert sc.through_root(trace)


def test_planted_order_disagreement() -> None:
    trace = clean()
    events = trace.deliveries[2]
    events[0], events[1] = events[1], events[0]
    assert sc.total_order(trace) and sc.predecessor_first(trace)


def test_planted_missing_duplicate_and_spurious_gap() -> None:
    trace = clean()
    trace.deliveries[1].pop()
    trace.deliveries[2].append(trace.deliveries[2][0])
    trace.deliveries[3].insert(0, Gap(3, None, None, 0.0))
    found = sc.agreement(trace)
    assert len(found) == 3, found


def test_planted_predecessor_not_first() -> None:
    trace = SwapTrace("arrow", deliveries={0: [
        Delivered(0, Ordered(None, M1), 0.0), Delivered(0, Ordered((7, 7), M2), 0.0)]})
    assert len(sc.predecessor_first(trace)) == 1
    trace.deliveries[0].insert(1, Gap(0, M1, None, 0.0))  # after "one or more missing": fine
    assert sc.predecessor_first(trace) == []


def test_a_broken_arrow_that_does_not_flip_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_flip(self: ArrowNode, now: float, src: int, datagram: object) -> list[object]:
        if self.link == self.id:  # resolves, but stays the sink with a stale value
            return [Multicast(self.id, Ordered(self.value, datagram.msg_id), datagram.hops)]  # type: ignore[attr-defined]
        return ArrowNode.__dict__["_orig"](self, now, src, datagram)

    monkeypatch.setattr(ArrowNode, "_orig", ArrowNode.on_datagram, raising=False)
    monkeypatch.setattr(ArrowNode, "on_datagram", no_flip)
    bad = sweep(SwapSimConfig(mode="arrow"), range(5))
    assert bad and any("one_sink" in v for vs in bad.values() for v in vs)


def test_multicast_record_shape() -> None:
    trace = clean()
    assert all(isinstance(r, MulticastRecord) for r in trace.multicasts)
