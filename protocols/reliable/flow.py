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
data) halves ``cwnd``, at most once per ``loss_holdoff``; each stabilised byte grows it
again by ``increase / cwnd`` (one datagram budget per window's worth, additive
increase), up to the configured maximum: TCP's AIMD, per sender, with nacks as the loss
signal.

Loss signals are judged per nacking member. A nack is a claim, not a measurement: a
member holding the key (compromised, or buggy) can nack everything it receives, and if
every such nack halved every sender's window, that one member would keep the whole
group near ``min_bytes``. So ``on_loss`` takes the member that nacked, and a halving
goes down to ``min_bytes`` only when the loss is *corroborated*: another member also
nacked our data within the last ``loss_holdoff``, and the two report loss at
comparable rates (or the member is the only other one of the view: then it is the
whole audience). A member alone halves the window at most down to ``solo_floor``, half
the configured maximum: whatever one member says, every sender keeps at least half its
window (``uncorroborated`` counts its signals). The rates are each member's loss
signals, decayed with a half-life of ``RATE_HALF_LIFE``; two members whose rates differ
more than ``OUTLIER_RATIO`` times do not corroborate each other. Without that, a member
nacking everything would turn every other member's occasional honest nack into a
corroborated loss; with it, the outlier's word counts once, at ``solo_floor``, and the
others' losses count as they would without it.

This is the bounded worst *representative* receiver of multicast congestion control
(PGMCC, TFMCC follow the worst receiver; here its say is capped), and it costs a
genuinely lossy receiver nothing it needs: the window only bounds what a sender may
have *unstable*, and stability is end to end, so a receiver that really falls behind
(it acknowledges late, or its losses wait for repair) still holds every sender within
one window of what it has acknowledged, with or without its nacks. The halving on loss
is for congestion shared by several receivers, and that shows as nacks from several
members at like rates (suppression spreads the nacks of one loss among them). The
sender id of a nack is only as good as the group key: a key holder claiming several
members' ids passes for several members.
"""

from __future__ import annotations

RATE_HALF_LIFE = 1.0
"""Seconds that halve a member's loss-signal score (its recent rate of loss signals)."""

OUTLIER_RATIO = 8.0
"""Two members whose scores differ more than this many times do not corroborate each
other: one of them nacks far more than the other (a member nacking everything)."""


class SendWindow:
    def __init__(self, *, window_size: int, max_pending_bytes: int, window_bytes: int,
                 min_bytes: int, increase: int, loss_holdoff: float) -> None:
        self.window_size = window_size
        self.max_pending_bytes = max_pending_bytes
        self.max_bytes = window_bytes
        self.min_bytes = min(min_bytes, window_bytes)
        self.cwnd = window_bytes
        """Bytes of own unstable data allowed now (between ``min_bytes`` and ``max_bytes``)."""
        self.solo_floor = max(self.min_bytes, window_bytes // 2)
        """The least ``cwnd`` that one member's loss signals alone can bring it to."""
        self.increase = increase
        self.loss_holdoff = loss_holdoff
        self._calm_until = float("-inf")
        self._heard: dict[int, tuple[float, float]] = {}
        """Member -> (when its latest loss signal came, its score then): its loss
        signals, each decayed with ``RATE_HALF_LIFE``. At most one entry per member that
        nacked within the last ``64 * RATE_HALF_LIFE`` seconds (older ones are dropped
        when another member's signal comes)."""
        self.blocked = False
        self.paused = False
        """Releases are held for a slow local consumer: no own data either (the holding
        member must not go on sending what it stops others from sending)."""
        self.losses = 0
        """Loss events that halved the window."""
        self.uncorroborated = 0
        """Loss signals from one member alone (no other member nacked our data within
        ``loss_holdoff``, in a view with more than one other member): they halve the
        window at most to ``solo_floor``."""

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

    def on_loss(self, member: int, now: float, others: int) -> None:
        """``member`` missed our data (it nacked it), in a view where ``others`` members
        besides us could have: halve the byte window, down to ``min_bytes`` if the loss
        is corroborated, else at most to ``solo_floor`` (module docstring)."""
        heard = self._heard
        last = heard.get(member)
        score = 1.0 if last is None else 1.0 + _decayed(last, now)
        heard[member] = (now, score)
        floor = self.min_bytes
        if others > 1 and not self._corroborated(member, score, now):
            self.uncorroborated += 1
            floor = self.solo_floor
        if now < self._calm_until or self.cwnd <= floor:
            return
        self._calm_until = now + self.loss_holdoff
        self.cwnd = max(floor, self.cwnd // 2)
        self.losses += 1

    def _corroborated(self, member: int, score: float, now: float) -> bool:
        """Another member nacked our data within ``loss_holdoff``, at a rate comparable
        to ``member``'s (neither is an outlier against the other)."""
        heard = self._heard
        if len(heard) < 2:
            return False
        horizon = now - self.loss_holdoff
        forget = now - 64 * RATE_HALF_LIFE
        found = False
        for m, last in list(heard.items()):
            at = last[0]
            if at <= forget:
                del heard[m]
            elif m != member and at > horizon and not found:
                other = _decayed(last, now)
                low, high = (other, score) if other < score else (score, other)
                found = high <= OUTLIER_RATIO * low
        return found

    def on_stable(self, nbytes: int) -> None:
        """``nbytes`` of own data became stable: grow the byte window additively."""
        if nbytes > 0 and self.cwnd < self.max_bytes:
            grow = max(1, self.increase * nbytes // self.cwnd)
            self.cwnd = min(self.max_bytes, self.cwnd + grow)


def _decayed(last: tuple[float, float], now: float) -> float:
    """A member's score ``(at, score)`` decayed from ``at`` to ``now``."""
    at, score = last
    return score * 0.5 ** ((now - at) / RATE_HALF_LIFE) if now > at else score
