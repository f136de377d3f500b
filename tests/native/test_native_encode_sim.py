"""Simulated clusters whose native nodes encode their datagrams natively are the same runs
as with the Python encoder.

A node on the native core writes the body of each data-plane datagram it sends with
``amcast_native.Encoder`` (``wire.native.make_encoder``); since that is byte for byte
what ``encode_plain`` writes (``test_encode_differential``), a run of the membership
sweep (crashes and restarts, pauses, joins, leaves, partitions, loss, duplication and
reordering) must deliver the same sequences at the same virtual times, install the same
views, drop the same datagrams for the same reasons and leave every node's counters and
rng where the Python encoder leaves them, for every seed. Every body the native encoder
writes in these runs is also compared with the reference's as it is sent. The sealer is
the native one (the simulator's) and, for a part of the seeds, the Python one (a daemon's
default, ``AMCAST_SEAL`` unset).

Skipped, with the reason, where the extension is not built (``make rust``)."""

from __future__ import annotations

from typing import Any

import pytest
from amcast.protocols import node as node_module
from amcast.protocols.wire import native as wire_native
from amcast.protocols.wire.codec import Datagram, Kind, encode_body
from amcast.protocols.wire.native import encode_plain, native_module

from .test_native_reliable_sim import run

pytestmark = pytest.mark.skipif(
    native_module() is None, reason="amcast_native is not built (make rust): only the Python "
    "core runs")


def checked_encoders(m: pytest.MonkeyPatch) -> list[int]:
    """Each native node's encoder compares every body with ``encode_plain``'s: [bodies
    the native side wrote itself]."""
    written = [0]
    make = wire_native.make_encoder

    def make_checked(core: str | None = None) -> Any:
        encode = make(core)
        if encode is encode_plain:
            return encode

        def checked(dg: Any) -> bytes:
            out: bytes = encode(dg)
            assert out == encode_plain(dg), dg
            if encode.encode(dg) is not None:
                written[0] += 1
            return out

        return checked

    m.setattr(node_module, "make_encoder", make_checked)
    return written


def python_encoder_run(seed: int, monkeypatch: pytest.MonkeyPatch) -> str:
    with monkeypatch.context() as m:
        m.setattr(node_module, "make_encoder", lambda core=None: encode_plain)
        return run(seed, "native", m, deep=True)


def python_sealer(m: pytest.MonkeyPatch) -> None:
    make = node_module.make_sealer
    m.setattr(node_module, "make_sealer",
              lambda *a, **k: make(*a, **{**k, "seal": "pure"}))


@pytest.mark.parametrize("block", range(6))
def test_native_encoding_is_the_python_encoders_run(
        block: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """60 seeds of the membership sweep, every node's counters and rng included."""
    for seed in range(200 + block * 10, 200 + block * 10 + 10):
        with monkeypatch.context() as m:
            written = checked_encoders(m)
            native = run(seed, "native", m, deep=True)
            assert written[0] > 0, seed
        assert native == python_encoder_run(seed, monkeypatch), seed


def test_native_encoding_with_the_python_sealer_is_the_same_run(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for seed in range(260, 270):
        with monkeypatch.context() as m:
            python_sealer(m)
            written = checked_encoders(m)
            native = run(seed, "native", m, deep=True)
            assert written[0] > 0, seed
        with monkeypatch.context() as m:
            python_sealer(m)
            assert native == python_encoder_run(seed, m), seed


def test_a_mix_of_native_and_pure_nodes_is_the_same_run(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for seed in (270, 271, 272):
        with monkeypatch.context() as m:
            checked_encoders(m)
            mixed = run(seed, "native", m, cores=("native", "pure"))
        with monkeypatch.context() as m:
            m.setattr(node_module, "make_encoder", lambda core=None: encode_plain)
            assert mixed == run(seed, "native", m, cores=("native", "pure")), seed


def test_the_comparison_sees_an_encoder_that_differs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A planted difference the runs stay correct with (every heartbeat acknowledges one
    less of its first member: stability and repairs move) is told apart."""
    make = wire_native.make_encoder
    seeds = range(200, 203)
    honest = [run(seed, "native", monkeypatch, deep=True) for seed in seeds]
    with monkeypatch.context() as m:
        m.setattr(node_module, "make_encoder", lambda core=None: _differs(make(core)))
        planted = [run(seed, "native", m, deep=True) for seed in seeds]
    assert all(a != b for a, b in zip(honest, planted, strict=True))


def _differs(encode: Any) -> Any:
    def out(dg: Any) -> bytes:
        if type(dg) is Datagram and dg.kind == Kind.HEARTBEAT and dg.acks:
            (node, seq), *rest = dg.acks
            return encode_body(Datagram(dg.kind, dg.sender, dg.view, dg.hb_seq, dg.nacks, (),
                                        ((node, max(0, seq - 1)), *rest)))
        body: bytes = encode(dg)
        return body

    return out
