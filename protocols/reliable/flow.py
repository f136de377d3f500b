"""Flow control: a bounded window of own unstable vertices and a bounded send queue.

Section 1 of the ToTo paper leaves buffers to the reliable layer; stability (every
member acknowledged a vertex) is what frees them. A node may have at most
``window_size`` own data vertices sent but unstable, and at most ``max_pending_bytes``
submitted but not yet sent. ``submit`` beyond either bound is refused with
``BackpressureError`` (nothing is dropped silently); the node reports
``BackpressureApplied`` once and ``BackpressureReleased`` when the window has room
again. Ack-only vertices are exempt from the window: they are what makes other members'
vertices stable, so blocking them could deadlock the group; their number is bounded by
the other members' windows.
"""

from __future__ import annotations


class SendWindow:
    def __init__(self, *, window_size: int, max_pending_bytes: int) -> None:
        self.window_size = window_size
        self.max_pending_bytes = max_pending_bytes
        self.blocked = False

    def can_send(self, unstable: int) -> bool:
        return unstable < self.window_size

    def admits(self, size: int, unstable: int, pending_bytes: int) -> bool:
        return unstable < self.window_size and pending_bytes + size <= self.max_pending_bytes

    def should_release(self, unstable: int, pending_bytes: int) -> bool:
        return (
            self.blocked
            and unstable < self.window_size
            and pending_bytes < self.max_pending_bytes
        )
