"""End-to-end flow control (issue 13, item 1): the byte window, AIMD on loss, and a
member holding its releases for a slow consumer, on full Nodes in the simulator."""

from __future__ import annotations

from amcast.protocols.node_config import NodeConfig
from amcast.protocols.reliable.flow import SendWindow
from amcast.protocols.simulation.cluster import Cluster
from amcast.protocols.simulation.faults import Fault
from amcast.protocols.simulation.network import LinkFaults, NetworkConfig
from amcast.protocols.vocabulary import ServiceLevel

KEY = b"simulation-group-key"
A = ServiceLevel.AGREED


def window(**kw: int | float) -> SendWindow:
    args: dict[str, int | float] = dict(window_size=100, max_pending_bytes=1 << 20,
                                        window_bytes=64_000, min_bytes=4_000, increase=2_000,
                                        loss_holdoff=0.05)
    args.update(kw)
    return SendWindow(**args)  # type: ignore[arg-type]


def test_the_window_counts_vertices_and_bytes() -> None:
    w = window()
    assert w.can_send(0, 0)
    assert w.can_send(99, 63_999) and not w.can_send(100, 0) and not w.can_send(5, 64_000)
    assert w.can_send(0, 0) and w.admits(10, 1, 1_000, 0)
    assert not w.admits(10, 1, 1_000, (1 << 20) - 5)  # the send queue is full
    w.paused = True  # releases held for a slow consumer: no own data either
    assert not w.can_send(0, 0)


def test_loss_halves_the_byte_window_once_per_holdoff_and_stability_grows_it_back() -> None:
    w = window()
    w.on_loss(1, 1.0, 1)  # the only other member of the view: its word is the group's
    assert w.cwnd == 32_000 and w.losses == 1
    w.on_loss(1, 1.01, 1)  # the same loss event, heard again
    assert w.cwnd == 32_000
    w.on_loss(1, 1.06, 1)
    assert w.cwnd == 16_000
    for t in range(10):
        w.on_loss(1, 2.0 + t, 1)
    assert w.cwnd == 4_000  # never below the floor
    assert w.uncorroborated == 0
    before = w.cwnd
    w.on_stable(4_000)  # one window's worth stabilised: one increase
    assert w.cwnd == before + 2_000
    for _ in range(1000):
        w.on_stable(64_000)
    assert w.cwnd == 64_000  # never above the configured window


def test_the_default_byte_window_shares_the_receive_buffer_among_the_others() -> None:
    cfg = NodeConfig(insecure=True, receive_buffer_bytes=4 << 20, datagram_budget=1472)
    assert cfg.effective_window_bytes(5) == (4 << 20) // 4
    assert cfg.effective_window_bytes(1) == 4 << 20
    big = NodeConfig(insecure=True, receive_buffer_bytes=1 << 20, datagram_budget=65_000)
    assert big.effective_window_bytes(64) == 130_000  # at least two datagrams
    assert NodeConfig(insecure=True, window_bytes=12345).effective_window_bytes(8) == 12345


def _flood(c: Cluster, senders: list[int], until: float, size: int = 500) -> dict[int, int]:
    """Senders submit as fast as their windows admit (closed loop) until ``until``;
    return how many each sent (payloads are unique across calls)."""
    sent = dict.fromkeys(senders, 0)
    while c.now < until:
        for i in senders:
            while c.submit(i, f"{i}:{len(c.sent)}:".encode().ljust(size, b"x"), A):
                sent[i] += 1
        c.advance(c.now + 0.001)
    return sent


def test_unstable_bytes_never_exceed_the_byte_window_by_more_than_a_vertex() -> None:
    cfg = NodeConfig(group_key=KEY, datagram_budget=4000, window_bytes=20_000,
                     suspect_timeout=10.0)
    c = Cluster(3, seed=5, node_config=cfg)
    worst = 0
    while c.now < 0.1:
        for i in range(3):
            while c.submit(i, f"{i}:{len(c.sent)}:".encode().ljust(500, b"x"), A):
                pass
            worst = max(worst, c.nodes[i].stats.window_bytes_used)
        c.advance(c.now + 0.0005)
    assert 20_000 <= worst <= 20_000 + 4000
    c.advance(c.now + 2.0)
    assert c.result().ok
    assert all(len(c.logs[i]) == len(c.sent) for i in range(3))


def test_loss_shrinks_the_window_and_it_recovers() -> None:
    cfg = NodeConfig(group_key=KEY, datagram_budget=4000, window_bytes=40_000,
                     suspect_timeout=10.0)
    net = NetworkConfig(default=LinkFaults(loss=0.05))
    c = Cluster(3, seed=9, node_config=cfg, network=net)
    _flood(c, [0], until=0.3)
    st = c.nodes[0].stats
    assert st.window_losses > 0
    assert st.window_bytes < cfg.effective_window_bytes(3)
    c.advance(c.now + 3.0)
    assert c.result().ok


def test_a_member_holding_its_releases_stops_every_sender_and_loses_nothing() -> None:
    cfg = NodeConfig(group_key=KEY, datagram_budget=4000, window_bytes=20_000,
                     suspect_timeout=10.0)
    c = Cluster(4, seed=3, node_config=cfg)
    _flood(c, [0, 1, 2, 3], until=0.05)
    slow = c.nodes[3]
    slow.hold_deliveries(True, c.now)
    c._after(3)
    got = len(c.logs[3])
    sent_during = _flood(c, [0, 1, 2, 3], until=0.5)
    # nothing more released here; everyone's window closed within one window
    assert len(c.logs[3]) <= got + 1
    assert sent_during[3] == 0  # the holding member sends nothing either
    window = cfg.effective_window_bytes(4)
    for i in (0, 1, 2):
        assert sent_during[i] * 500 <= 2 * window + 4000
        assert c.nodes[i].stats.window_bytes_used <= window + 4000
    # once it lets go, everything flows and every member delivers the same sequence
    slow.hold_deliveries(False, c.now)
    c._after(3)
    _flood(c, [0, 1, 2, 3], until=0.6)
    c.advance(c.now + 2.0)
    result = c.result()
    assert result.ok, {k: v[:3] for k, v in result.violations.items() if v}
    sequences = [[d.payload for d in c.logs[i]] for i in range(4)]
    assert all(s == sequences[0] for s in sequences) and len(sequences[0]) == len(c.sent)
    assert c.drops == {}


def test_a_view_change_completes_while_a_member_holds_its_releases() -> None:
    cfg = NodeConfig(group_key=KEY, datagram_budget=4000, window_bytes=20_000)
    c = Cluster(4, seed=6, node_config=cfg, bootstrap="join")
    c.advance(1.0)
    _flood(c, [0, 1, 2, 3], until=1.05)
    c.nodes[3].hold_deliveries(True, c.now)
    c._after(3)
    c.apply(Fault(c.now, "crash", (1,)))
    c.advance(c.now + 2.0)
    views = {c.nodes[i].view.view_id for i in (0, 2, 3)}  # type: ignore[union-attr]
    assert len(views) == 1 and 1 not in c.nodes[0].view.nodes  # type: ignore[union-attr]
    c.nodes[3].hold_deliveries(False, c.now)
    c._after(3)
    c.advance(c.now + 2.0)
    result = c.result()
    assert result.ok, {k: v[:3] for k, v in result.violations.items() if v}
