"""Flow control: a window of own unstable data, counted in vertices and in bytes, that
shrinks on loss, and a bounded send queue.

Section 1 of the ToTo paper leaves buffers to the reliable layer; stability (every
member acknowledged a vertex) is what frees them, so the window is end to end: a member
that does not acknowledge (it is slow, or it holds back releases because one of its
clients reads slowly, ``ReliableLayer.hold_releases``) stops every sender within one
window. A node may have at most ``window_size`` own vertices and ``cwnd`` bytes of own
data vertices sent but unstable, and at most ``max_pending_bytes`` submitted but not yet
sent. ``submit`` beyond either bound is refused with ``BackpressureError`` (nothing is
dropped silently); the node reports ``BackpressureApplied`` once and
``BackpressureReleased`` when the window has room again. Ack-only vertices are exempt
from the byte window: they are what makes other members' vertices stable, so blocking
them could deadlock the group; their number is bounded by the other members' windows.

Bytes: the datagrams of every sender's window may sit in a receiver's socket buffer at
once (a receiver descheduled for a moment), so the byte window defaults to the receive
buffer shared among the other members (``NodeConfig.effective_window_bytes``): no
sender can overrun a receiver that keeps up on average. Loss (another member nacks our
data) halves ``cwnd``, at most once per ``loss_holdoff``, down to ``min_bytes``; each
stabilised byte grows it again by ``increase / cwnd`` (one datagram budget per window's
worth, additive increase), up to the configured maximum: TCP's AIMD, per sender, with
nacks as the loss signal.
"""

from __future__ import annotations


class SendWindow:
    def __init__(self, *, window_size: int, max_pending_bytes: int, window_bytes: int,
                 min_bytes: int, increase: int, loss_holdoff: float) -> None:
        self.window_size = window_size
        self.max_pending_bytes = max_pending_bytes
        self.max_bytes = window_bytes
        self.min_bytes = min(min_bytes, window_bytes)
        self.cwnd = window_bytes
        """Bytes of own unstable data allowed now (between ``min_bytes`` and ``max_bytes``)."""
        self.increase = increase
        self.loss_holdoff = loss_holdoff
        self._calm_until = float("-inf")
        self.blocked = False
        self.paused = False
        """Releases are held for a slow local consumer: no own data either (the holding
        member must not go on sending what it stops others from sending)."""
        self.losses = 0
        """Loss events that halved the window."""

    def can_send(self, unstable: int, unstable_bytes: int) -> bool:
        """Room for one more vertex (always, when nothing of ours is in flight)."""
        return (not self.paused and unstable < self.window_size
                and (unstable_bytes == 0 or unstable_bytes < self.cwnd))

    def admits(self, size: int, unstable: int, unstable_bytes: int, pending_bytes: int) -> bool:
        return (self.can_send(unstable, unstable_bytes)
                and pending_bytes + size <= self.max_pending_bytes)

    def should_release(self, unstable: int, unstable_bytes: int, pending_bytes: int) -> bool:
        return (self.blocked and self.can_send(unstable, unstable_bytes)
                and pending_bytes < self.max_pending_bytes)

    def on_loss(self, now: float) -> None:
        """Another member missed our data (it nacked it): halve the byte window."""
        if now < self._calm_until:
            return
        self._calm_until = now + self.loss_holdoff
        self.cwnd = max(self.min_bytes, self.cwnd // 2)
        self.losses += 1

    def on_stable(self, nbytes: int) -> None:
        """``nbytes`` of own data became stable: grow the byte window additively."""
        if nbytes > 0 and self.cwnd < self.max_bytes:
            grow = max(1, self.increase * nbytes // self.cwnd)
            self.cwnd = min(self.max_bytes, self.cwnd + grow)
