"""Deliver m after pred, with total order with gaps (sections 3 and 6.3 of *Ordered
Multicast and Distributed Swap*).

A member receives pairs <pred, m> from the unordered reliable multicast and delivers m
only after pred (a message whose predecessor is ⊥ is the first). Every id has at most
one successor, so the buffer keeps the waiting pairs by predecessor and, after each
delivery, looks up the successor of the last delivered id: the member's deliveries are
one chain, the same chain everywhere.

Failures are "total order with gaps" (section 6.3): if m0, m1, m2 are delivered at u
but v can never get m1's payload, v is told that messages may be missing between m0 and
m2, and messages delivered at both keep one order. Two ways to skip:

- ``learn_header(pred, id)``: the ordering header of a message whose payload is lost
  (from its multicaster, which knows every header it sent, or a member that delivered
  it). Its place in the chain is then known: the buffer reports a ``Gap`` naming it
  exactly and goes on. Order among common messages is unaffected.
- ``skip(now)``: nobody can tell the missing header (say its multicaster crashed). The
  member gives up on the chain head it has waited for longest: a ``Gap`` with
  ``missing=None`` ("one or more messages missing") and delivery resumes after it. This
  is the paper's weak promise: it is safe when only one chain is waiting; with several,
  the oldest is a heuristic, so callers skip only after a timeout well above the
  network's delay.

A message whose predecessor is already behind the member's position (delivered and
followed, or skipped) can no longer be placed: it is dropped and counted ``late``, and
so are its successors. Duplicates are ignored. A joiner starts from the position of the
member it attaches to (``transfer_from``): state transfer, our addition to section 6.2.
"""

from __future__ import annotations

from dataclasses import dataclass

from .messages import BOTTOM, MsgId, Ordered


@dataclass(frozen=True, slots=True)
class Delivered:
    member: int
    ordered: Ordered
    time: float


@dataclass(frozen=True, slots=True)
class Gap:
    """Messages may be missing between ``after`` and the next delivery; ``missing``
    names the one missing message when its header is known."""

    member: int
    after: MsgId | None
    missing: MsgId | None
    time: float


DeliveryEvent = Delivered | Gap


class DeliveryBuffer:
    def __init__(self, member: int) -> None:
        self.member = member
        self.last: MsgId | None = BOTTOM
        self._started = False
        """Whether the ⊥ slot is taken (something delivered or skipped)."""
        self._passed: set[MsgId] = set()
        self._waiting: dict[MsgId | None, tuple[float, Ordered]] = {}
        self._waiting_ids: set[MsgId] = set()
        self._lost_headers: dict[MsgId | None, MsgId] = {}
        self.late = 0

    def transfer_from(self, other: DeliveryBuffer) -> None:
        self.last, self._started = other.last, other._started
        self._passed = set(other._passed)

    @property
    def waiting(self) -> list[Ordered]:
        return [o for _, o in self._waiting.values()]

    def stalled_since(self) -> float | None:
        """When the longest-waiting message was received (None: nothing waits)."""
        return min((t for t, _ in self._waiting.values()), default=None)

    def _behind(self, pred: MsgId | None) -> bool:
        if pred == self.last:
            return False
        return self._started if pred is BOTTOM else pred in self._passed

    def receive(self, now: float, ordered: Ordered) -> list[DeliveryEvent]:
        mid = ordered.msg_id
        if mid in self._passed or mid in self._waiting_ids:
            return []
        if self._behind(ordered.pred) or ordered.pred in self._waiting:
            self.late += 1
            self._passed.add(mid)
            return []
        self._waiting[ordered.pred] = (now, ordered)
        self._waiting_ids.add(mid)
        return self._drain(now)

    def learn_header(self, now: float, pred: MsgId | None, msg_id: MsgId) -> list[DeliveryEvent]:
        if msg_id in self._passed or msg_id in self._waiting_ids or self._behind(pred):
            return []
        self._lost_headers[pred] = msg_id
        return self._drain(now)

    def skip(self, now: float) -> list[DeliveryEvent]:
        """Give up on the predecessor of the chain head waited for longest."""
        heads = [(t, o) for p, (t, o) in self._waiting.items() if p not in self._waiting_ids]
        if not heads:
            return []
        _, head = min(heads, key=lambda to: (to[0], to[1].msg_id))
        gap = Gap(self.member, self.last, None, now)
        self._waiting.pop(head.pred)
        self._waiting[self.last] = (now, head)
        return [gap, *self._drain(now)]

    def _drain(self, now: float) -> list[DeliveryEvent]:
        out: list[DeliveryEvent] = []
        while True:
            if self.last in self._waiting:
                _, ordered = self._waiting.pop(self.last)
                self._waiting_ids.discard(ordered.msg_id)
                out.append(Delivered(self.member, ordered, now))
                self._advance(ordered.msg_id)
            elif self.last in self._lost_headers:
                missing = self._lost_headers.pop(self.last)
                out.append(Gap(self.member, self.last, missing, now))
                self._advance(missing)
            else:
                return out

    def _advance(self, msg_id: MsgId) -> None:
        self._passed.add(msg_id)
        self.last = msg_id
        self._started = True
