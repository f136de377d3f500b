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
- ``skip(now)``: nobody can tell the missing header (say its sender failed between
  the swap and the multicast). The member gives up: a ``Gap`` with ``missing=None``
  ("one or more messages missing") and delivery resumes at the waiting chain head with
  the lowest id; with ``fifo`` (the Node's view close, whose members send swaps in a
  row: ``engine.py``) the lowest among the heads whose chain may go first with every
  origin's ids (origin, n) in increasing n: a chain holding an (o, j) while another
  holds an (o, i) with i < j waits. The choice depends only on the set of waiting
  messages, so members that skip holding the same fragments skip the same way and keep
  one order: skip only once the multicast has drained (every member holds what it will
  ever get). A member that skips early and then receives the missing message places it
  after its position (below), where members that did not skip delivered it earlier:
  the one order of common messages is then lost, which is why the skip is the
  caller's decision.

A skip leaves chain ends whose successor is unknown (the skipped fragments may be in
the wrong order among themselves). The next message naming such an end as its
predecessor continues the order: it is placed right after the member's position,
behind another unnamed gap; every member holding the same fragments does the same. A
message whose predecessor's successor has already been delivered or reported can no
longer be placed: it is dropped and counted ``late``, and so are its successors.
Duplicates are ignored. A joiner starts from the position of the
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
        self._followed: set[MsgId | None] = set()
        """Ids (and ⊥) whose successor has been delivered or reported: their slot is
        filled, so another message claiming it is late."""
        self._moved: set[MsgId] = set()
        """Placed by a skip or after a chain end: not the true successor of the position."""
        self.late = 0

    def transfer_from(self, other: DeliveryBuffer) -> None:
        self.last, self._started = other.last, other._started
        self._passed = set(other._passed)
        self._followed = set(other._followed)

    @property
    def waiting(self) -> list[Ordered]:
        return [o for _, o in self._waiting.values()]

    def stalled_since(self) -> float | None:
        """When the longest-waiting message was received (None: nothing waits)."""
        return min((t for t, _ in self._waiting.values()), default=None)

    def _passed_pred(self, pred: MsgId | None) -> bool:
        """``pred`` is behind the position (not the last delivery itself)."""
        if pred == self.last:
            return False
        return self._started if pred is BOTTOM else pred in self._passed

    def _place(self, now: float, pred: MsgId | None) -> tuple[MsgId | None, list[DeliveryEvent]]:
        """Where a message or header with predecessor ``pred`` goes: under ``pred``, or,
        for the successor of a chain end left behind by a skip (its slot is empty, and
        nothing else can follow it), right after the position, behind a gap."""
        free = self.last not in self._waiting and self.last not in self._lost_headers
        if self._passed_pred(pred) and pred not in self._followed and free:
            return self.last, [Gap(self.member, self.last, None, now)]
        return pred, []

    def receive(self, now: float, ordered: Ordered) -> list[DeliveryEvent]:
        mid = ordered.msg_id
        if mid in self._passed or mid in self._waiting_ids:
            return []
        key, gap = self._place(now, ordered.pred)
        if self._passed_pred(key) or key in self._waiting or key in self._lost_headers:
            self.late += 1
            self._passed.add(mid)
            self._followed.add(mid)  # its successors are late too
            return []
        if key != ordered.pred:
            self._moved.add(mid)
        self._waiting[key] = (now, ordered)
        self._waiting_ids.add(mid)
        return gap + self._drain(now)

    def learn_header(self, now: float, pred: MsgId | None, msg_id: MsgId) -> list[DeliveryEvent]:
        if msg_id in self._passed or msg_id in self._waiting_ids:
            return []
        key, gap = self._place(now, pred)
        if self._passed_pred(key) or key in self._waiting or key in self._lost_headers:
            return []
        if key != pred:
            self._moved.add(msg_id)
        self._lost_headers[key] = msg_id
        return gap + self._drain(now)

    def skip(self, now: float, fifo: bool = False) -> list[DeliveryEvent]:
        """Give up on a missing predecessor: resume at the chain head with the lowest id
        (``fifo``: the lowest of the heads whose chain may go first, ``_fifo_heads``).

        The chains are made of the waiting messages and the known headers of lost ones; a
        head is an element whose predecessor is not an element."""
        ids = self._waiting_ids | set(self._lost_headers.values())
        heads: list[tuple[MsgId, MsgId | None]] = [
            (o.msg_id, p) for p, (_, o) in self._waiting.items() if p not in ids
        ]
        heads += [(m, p) for p, m in self._lost_headers.items() if p not in ids]
        if not heads:
            return []
        if fifo:
            heads = self._fifo_heads(heads)
        head, pred = min(heads, key=lambda hp: hp[0])
        gap = Gap(self.member, self.last, None, now)
        if head in self._waiting_ids:
            self._waiting[self.last] = self._waiting.pop(pred)
        else:
            self._lost_headers[self.last] = self._lost_headers.pop(pred)
        self._moved.add(head)
        return [gap, *self._drain(now)]

    def _fifo_heads(
        self, heads: list[tuple[MsgId, MsgId | None]]
    ) -> list[tuple[MsgId, MsgId | None]]:
        """The heads whose chain may go first with every origin's ids in their order (an
        id is (origin, n), n counting that origin's messages up): those whose chain
        holds no (o, j) while another chain holds an (o, i) with i < j. All heads if
        none may (no order of the chains keeps every origin's: impossible for chains cut
        out of one order that kept them)."""
        lowest: list[dict[int, int]] = []
        highest: list[dict[int, int]] = []
        for head, _ in heads:
            low: dict[int, int] = {}
            high: dict[int, int] = {}
            at: MsgId | None = head
            while at is not None:
                o, n = at
                low[o] = min(low.get(o, n), n)
                high[o] = max(high.get(o, n), n)
                nxt = self._waiting.get(at)
                at = nxt[1].msg_id if nxt is not None else self._lost_headers.get(at)
            lowest.append(low)
            highest.append(high)
        free = [
            hp for i, hp in enumerate(heads)
            if not any(j != i and n > lowest[j].get(o, n)
                       for j in range(len(heads)) for o, n in highest[i].items())
        ]
        return free or heads

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
        if msg_id in self._moved:
            self._moved.discard(msg_id)
        else:
            self._followed.add(self.last)
        self._passed.add(msg_id)
        self.last = msg_id
        self._started = True
