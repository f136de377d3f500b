"""Loss signals are judged per nacking member: one member's nacks (a key holder that
nacks everything, or a buggy member) cannot halve a sender's byte window below half its
maximum, nor make another member's occasional nack a corroborated loss; nacks from two
members at like rates still halve it down to the minimum; a genuinely lossy receiver
still gets everything, held back by stability. Unit tests of ``SendWindow``
and the layer's signals, then full Nodes in the simulator with forged nacks sealed with
the real group key."""

from __future__ import annotations

import random
from collections.abc import Callable

from amcast.protocols.node_config import NodeConfig
from amcast.protocols.reliable.flow import SendWindow
from amcast.protocols.reliable.layer import ReliableCounters, ReliableLayer
from amcast.protocols.simulation.cluster import Cluster
from amcast.protocols.simulation.network import LinkFaults, NetworkConfig
from amcast.protocols.vocabulary import ServiceLevel
from amcast.protocols.wire.auth import SESSION_BYTES, Authenticator
from amcast.protocols.wire.codec import Datagram, Kind, encode
from amcast.protocols.wire.keys import Keyring

KEY = b"simulation-group-key"
A = ServiceLevel.AGREED


def window() -> SendWindow:
    return SendWindow(window_size=100, max_pending_bytes=1 << 20, window_bytes=64_000,
                      min_bytes=4_000, increase=2_000, loss_holdoff=0.05)


# ---- the window -------------------------------------------------------------------------


def test_one_member_nacking_everything_takes_at_most_half_the_window() -> None:
    w = window()
    lowest = w.cwnd
    for ms in range(10_000):  # a nack every millisecond for 10 s, stability growing it
        w.on_loss(3, ms / 1000, 3)
        lowest = min(lowest, w.cwnd)
        if ms % 10 == 0:
            w.on_stable(8_000)
    assert w.solo_floor == 32_000 and lowest == 32_000
    assert w.uncorroborated == 10_000
    # it halves again each time stability grew the window past the bound, never more
    assert w.cwnd >= 32_000 and w.losses > 1


def test_two_members_reporting_loss_still_halve_it_to_the_minimum() -> None:
    w = window()
    for k in range(20):  # members 1 and 2 nack in turn, 30 ms apart
        w.on_loss(1 + k % 2, 1.0 + 0.03 * k, 3)
    assert w.cwnd == 4_000 and w.losses == 4  # 64k -> 4k (the first one alone: to 32k)
    assert w.uncorroborated == 1  # the first signal, before the second member's


def test_a_corroborating_nack_must_come_within_the_holdoff() -> None:
    w = window()
    for k in range(20):  # two members, but each alone: 0.2 s apart
        w.on_loss(1 + k % 2, 1.0 + 0.2 * k, 3)
    assert w.cwnd == 32_000 and w.uncorroborated == 20
    w.on_loss(2, 5.0, 3)  # alone still
    assert w.cwnd == 32_000
    w.on_loss(1, 5.04, 3)  # within loss_holdoff of member 2's: corroborated
    assert w.cwnd == 16_000 and w.uncorroborated == 21


def test_a_member_nacking_everything_cannot_vouch_for_an_occasional_nack() -> None:
    w = window()
    for ms in range(10_000):  # member 3: a nack every millisecond for 10 s
        w.on_loss(3, ms / 1000, 3)
        if ms % 500 == 250:  # member 2: an honest nack every half second
            w.on_loss(2, ms / 1000 + 0.0005, 3)
    assert w.cwnd == 32_000  # the outlier counts once, the occasional nack alone
    # two members nacking at like rates corroborate each other, the outlier aside
    for k in range(40):
        w.on_loss(1 + k % 2, 20.0 + 0.03 * k, 3)
    assert w.cwnd == 4_000


def test_the_only_other_member_of_the_view_is_the_whole_audience() -> None:
    w = window()
    for k in range(10):
        w.on_loss(1, 1.0 + 0.1 * k, 1)
    assert w.cwnd == 4_000 and w.uncorroborated == 0


# ---- the layer's signals ----------------------------------------------------------------

MEMBERS = (1, 2, 3)
VIEW = 3


def _origin() -> ReliableLayer:
    layer = ReliableLayer(VIEW, 1, MEMBERS, config=NodeConfig(insecure=True),
                          rng=random.Random(1), now=0.0, drop=lambda r, d: None,
                          counters=ReliableCounters())
    for i in range(10):
        v = layer.new_vertex(A, (bytes([i]) * 500,), 0.0)
        layer.on_release(v, 0.0)
    layer.take_datagrams(0.0)
    return layer


def test_a_nack_of_own_data_is_one_loss_signal_of_its_sender() -> None:
    layer = _origin()
    nacks = ((1, 3, 4), (1, 6, 6), (2, 1, 1))  # two ranges of ours, one of member 2's
    layer.receive(Datagram(Kind.NACK, 3, VIEW, 0, nacks), 0.01)
    assert layer.counters.loss_signals == {3: 2}  # one per datagram; 2 others in the view
    assert layer.counters.own_losses == 2


def test_nacks_that_are_no_loss_signal_record_none() -> None:
    layer = _origin()
    layer.receive(Datagram(Kind.NACK, 3, VIEW, 0, ((2, 1, 1),)), 0.01)  # not our data
    layer.receive(Datagram(Kind.NACK, 2, VIEW, 0, ((1, 5, 99),)), 0.01)  # never sent
    assert layer.counters.loss_signals == {}


# ---- full Nodes, forged nacks with the real key -----------------------------------------


def _cluster(n: int, seed: int, network: NetworkConfig | None = None) -> tuple[Cluster, int]:
    cfg = NodeConfig(group_key=KEY, datagram_budget=4000, window_bytes=40_000,
                     suspect_timeout=10.0)
    return Cluster(n, seed=seed, node_config=cfg, network=network), 40_000


def _nack_as(c: Cluster, auth: Authenticator, claimed: int, target: int) -> bytes:
    """A NACK claiming to come from ``claimed`` for ``target``'s latest 16 vertices."""
    node = c.nodes[target]
    session = node.membership.session
    assert session is not None and node.view is not None
    latest = session.reliable.seq
    nacks = ((target, max(1, latest - 15), latest),)
    return encode(Datagram(Kind.NACK, claimed, node.view.view_id, 0, nacks), auth,
                  int(c.now * 1000))


def _own_session(c: Cluster, claimed: int) -> Authenticator:
    """The claimed member's own sealing session: the member itself nacks."""
    return c.nodes[claimed]._auth


def _posing(c: Cluster, claimed: int) -> Authenticator:
    """A session of its own per claimed id: a key holder posing as that member."""
    return Authenticator(Keyring.single(KEY), bytes([claimed]) * SESSION_BYTES)


def _flood_under_nacks(c: Cluster, claimed: list[int], until: float,
                       sessions: Callable[[Cluster, int], Authenticator] = _own_session,
                       ) -> tuple[int, int]:
    """Node 0 submits as fast as its window admits; every 2 ms nacks of node 0's latest
    vertices claiming the ids of ``claimed`` in turn, sealed by ``sessions``, go to every
    member but the claimed one. Returns node 0's lowest byte window and messages sent."""
    auths = {who: sessions(c, who) for who in claimed}
    lowest, sent, k = c.nodes[0].stats.window_bytes, 0, 0
    while c.now < until:
        while c.submit(0, f"0:{len(c.sent)}:".encode().ljust(500, b"x"), A):
            sent += 1
        if round(c.now * 1000) % 2 == 0:
            who = claimed[k % len(claimed)]
            k += 1
            data = _nack_as(c, auths[who], who, 0)
            for dst in c.nodes:
                if dst != who:
                    c.inject(dst, data)
        c.advance(c.now + 0.001)
        lowest = min(lowest, c.nodes[0].stats.window_bytes)
    return lowest, sent


SLOW = NetworkConfig(default=LinkFaults(delay=0.01))
"""10 ms links: the window regrows by one datagram budget per round trip, a few per
``loss_holdoff``, so a halving every holdoff keeps it low (on fast links it regrows
between halvings and the attack costs little)."""


def test_one_member_nacking_everything_keeps_every_window_at_least_half_open() -> None:
    c, window_bytes = _cluster(4, seed=11, network=SLOW)
    c.advance(0.2)
    lowest, sent = _flood_under_nacks(c, [3], until=1.2)
    assert lowest >= window_bytes // 2  # before: halved every 50 ms, to 9.6 KB
    assert c.nodes[0].stats.window_losses_uncorroborated > 100  # the nacks did reach it
    assert sent > 0
    c.advance(c.now + 2.0)
    result = c.result()
    assert result.ok, {k: v[:3] for k, v in result.violations.items() if v}
    assert all(len(c.logs[i]) == len(c.sent) for i in range(4))


def test_nacks_from_two_members_still_halve_the_window_past_the_bound() -> None:
    c, window_bytes = _cluster(4, seed=11, network=SLOW)
    c.advance(0.2)
    lowest, _ = _flood_under_nacks(c, [2, 3], until=1.2)
    assert lowest < window_bytes // 4  # corroborated: halved every holdoff, as before
    c.advance(c.now + 2.0)
    assert c.result().ok


def test_a_key_holder_posing_as_every_member_is_no_loss_signal_of_theirs() -> None:
    """Nacks claiming each live member's id in turn, each from a session of its own:
    the members' own sessions speak for their ids, so none of it counts as their loss
    (before, such a key holder halved every sender's window at will)."""
    c, window_bytes = _cluster(4, seed=11, network=SLOW)
    c.advance(0.2)
    lowest, sent = _flood_under_nacks(c, [1, 2, 3], until=1.2, sessions=_posing)
    assert lowest >= window_bytes // 2 and sent > 0
    assert c.nodes[0].stats.loss_signals_unbound > 100  # the nacks did reach it
    c.advance(c.now + 2.0)
    assert c.result().ok


def test_one_session_speaking_for_two_ids_is_refused() -> None:
    c, _ = _cluster(4, seed=13)
    c.advance(0.2)
    for k in range(3):
        c.submit(0, f"0:{k}:".encode(), A)
    c.advance(0.3)
    auth = _posing(c, 3)
    for who in (3, 2):  # the same session claims 3, then 2
        c.inject(1, _nack_as(c, auth, who, 0))
    c.advance(c.now + 0.01)
    assert c.nodes[1].stats.drops.get("session_sender_mismatch", 0) == 1


def test_a_lossy_receiver_alone_still_gets_everything_held_back_by_stability() -> None:
    lossy = LinkFaults(loss=0.1)
    net = NetworkConfig(links={(0, 3): lossy})  # only member 3 loses node 0's datagrams
    c, window_bytes = _cluster(4, seed=5, network=net)
    c.advance(0.2)
    worst = 0
    while c.now < 1.0:
        while c.submit(0, f"0:{len(c.sent)}:".encode().ljust(500, b"x"), A):
            pass
        worst = max(worst, c.nodes[0].stats.window_bytes_used)
        c.advance(c.now + 0.001)
    st = c.nodes[0].stats
    assert st.window_losses >= 1 and st.window_losses_uncorroborated > 0
    assert st.window_bytes >= window_bytes // 2
    # stability is end to end: what member 3 has not acknowledged bounds node 0
    assert worst <= window_bytes + 4000
    c.advance(c.now + 2.0)
    result = c.result()
    assert result.ok, {k: v[:3] for k, v in result.violations.items() if v}
    assert all(len(c.logs[i]) == len(c.sent) for i in range(4))
