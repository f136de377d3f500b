"""Who acks a lone message at once (``session.prompt_ackers``/``prompt_origins``) and the
lazy ack of the others (``NodeConfig.lazy_ack_delay``); a member that sends no data of its
own acks prompt data after ``quiet_ack_delay`` instead of ``ack_delay``."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from amcast.protocols.errors import ConfigurationError
from amcast.protocols.ordering import OrderingConfig
from amcast.protocols.session import prompt_ackers, prompt_origins

from tests.reliable.test_layer import CFG, Peer


@pytest.mark.parametrize(("n", "expected"), [(2, 1), (3, 1), (4, 2), (5, 2), (8, 4),
                                             (16, 8), (17, 8), (64, 32)])
def test_prompt_ackers_are_enough_votes_and_few_enough_unseen(n: int, expected: int) -> None:
    phi = OrderingConfig(rule="gltoto").resolve_phi(n)
    k = prompt_ackers(n, phi)
    assert k == expected
    assert 1 + k > phi, "the sender and the prompt ackers are more than phi votes"
    assert n - 1 - k <= phi, "the lazy ones are at most phi unseen members"


@pytest.mark.parametrize("n", [3, 4, 5, 8, 9, 16, 33, 64])
def test_no_phi_needs_fewer_prompt_ackers_than_the_default(n: int) -> None:
    """A lone message costs (1 + k)(n - 1) receptions; k is at least ceil((n - 1)/2) for
    every phi GL-ToTo allows (1 < phi < n), and the default phi = n/2 attains it."""
    def fewest(phi: float) -> int:  # from the two conditions, not from prompt_ackers
        return next(k for k in range(n) if 1 + k > phi and n - 1 - k <= phi)

    least = math.ceil((n - 1) / 2)
    grid = [1 + (n - 1) * i / 400 for i in range(1, 400)]
    assert min(fewest(phi) for phi in grid) == least
    assert all(prompt_ackers(n, phi) == fewest(phi) for phi in grid)
    default = OrderingConfig(rule="gltoto").resolve_phi(n)
    assert prompt_ackers(n, default) == least


@pytest.mark.parametrize("n", [2, 3, 4, 7, 8, 16])
def test_every_sender_has_exactly_k_prompt_ackers_other_than_itself(n: int) -> None:
    members = tuple(range(10, 10 + n))
    phi = OrderingConfig(rule="gltoto").resolve_phi(n)
    k = prompt_ackers(n, phi)
    prompt = {m: prompt_origins(members, m, phi) for m in members}
    for sender in members:
        ackers = [m for m in members if sender in prompt[m]]
        assert len(ackers) == k and sender not in ackers
    assert prompt_origins(members, 99, phi) == frozenset()  # not a member


def test_a_member_acks_a_prompt_sender_at_once_and_the_others_lazily() -> None:
    a, b, c = Peer(1), Peer(2), Peer(3)
    b.layer.prompt_origins = frozenset({1})  # b acks 1 at once, 3 lazily
    b.receive(c.send(0.0), 0.0)
    assert b.layer.next_timer() == pytest.approx(CFG.lazy_ack_delay)
    b.receive(a.send(0.001), 0.001)  # a prompt sender's data brings the ack forward
    assert b.layer.next_timer() == pytest.approx(0.001 + CFG.quiet_ack_delay)
    (v,) = b.timer(0.001 + CFG.quiet_ack_delay)
    assert v.ack_only and set(v.acks) == {(1, 1), (3, 1)}  # one ack covers both
    assert b.layer.next_timer() != pytest.approx(CFG.lazy_ack_delay)


def test_a_lazy_sender_is_acked_after_the_lazy_delay() -> None:
    b, c = Peer(2), Peer(3)
    b.layer.prompt_origins = frozenset({1})
    b.receive(c.send(0.0), 0.0)
    assert b.timer(CFG.lazy_ack_delay / 2) == []
    (v,) = b.timer(CFG.lazy_ack_delay)
    assert v.ack_only and v.acks == ((3, 1),)


def test_a_member_that_only_receives_acks_a_prompt_sender_in_the_same_step() -> None:
    assert CFG.quiet_ack_delay == 0.0 < CFG.ack_delay
    a, b = Peer(1), Peer(2)
    b.layer.prompt_origins = frozenset({1})
    b.receive(a.send(0.0), 0.0)
    assert b.layer.next_timer() == 0.0  # due now: the runner's pump sends it at once
    (v,) = b.timer(0.0)
    assert v.ack_only and v.acks == ((1, 1),)


def test_a_member_sending_its_own_data_keeps_ack_delay_until_it_falls_quiet() -> None:
    a, b = Peer(1), Peer(2)
    b.layer.prompt_origins = frozenset({1})
    b.send(0.0)  # b's own data: the next ack may ride on b's next data vertex
    b.receive(a.send(0.002), 0.002)
    assert b.layer.next_timer() == pytest.approx(0.002 + CFG.ack_delay)
    (v,) = b.timer(0.002 + CFG.ack_delay)
    assert v.ack_only
    # an ack-only vertex is not data: b counts as sending for a heartbeat interval
    t = CFG.heartbeat_interval - 0.0001
    b.receive(a.send(t), t)
    assert b.timer(t) == []  # not yet: b sent data less than an interval ago
    (v,) = b.timer(t + CFG.ack_delay)
    assert v.ack_only
    t = CFG.heartbeat_interval + 0.0001  # nothing of b's own for a heartbeat interval
    b.receive(a.send(t), t)
    (v,) = b.timer(t + CFG.quiet_ack_delay)
    assert v.ack_only and v.acks == ((1, 3),)  # a's third data vertex


def test_quiet_ack_delay_equal_to_ack_delay_is_one_wait_for_every_member() -> None:
    cfg = replace(CFG, quiet_ack_delay=CFG.ack_delay)
    a, b = Peer(1, cfg), Peer(2, cfg)
    b.layer.prompt_origins = frozenset({1})
    b.receive(a.send(0.0), 0.0)
    assert b.layer.next_timer() == pytest.approx(cfg.ack_delay)


def test_the_lazy_wait_does_not_depend_on_being_quiet() -> None:
    b, c = Peer(2), Peer(3)
    b.layer.prompt_origins = frozenset({1})
    b.receive(c.send(0.0), 0.0)  # b never sent: quiet, yet 3 is not its prompt sender
    assert b.layer.next_timer() == pytest.approx(CFG.lazy_ack_delay)


def test_quiet_ack_delay_must_not_be_negative() -> None:
    with pytest.raises(ConfigurationError, match="quiet_ack_delay"):
        replace(CFG, quiet_ack_delay=-0.001)
