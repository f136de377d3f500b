"""What the daemon accepted from its clients and has not delivered yet: queue and ledger.

Theory of operation. A client's ``send`` frame becomes one or more envelopes
(``amcast.socket_protocol``). The daemon *accepts* the frame whole or refuses it whole
(an ``error`` frame with the frame's ``id``); an accepted envelope goes to the engine
(``Node.submit``) at once, or waits in the ``SubmitQueue`` while the engine's send
window is full.

- ``SubmitQueue``: FIFO of envelopes not yet handed to the engine, bounded in *bytes*
  (``api.submit_queue_bytes``): each envelope costs its length plus ``ITEM_COST`` for
  the Python objects around it. While it is not empty the daemon stops reading every
  client (backpressure at the socket), so it only holds frames that were already read
  when the window filled; a frame past the cap is refused with ``overloaded``.
- ``Ledger``: per client, the accepted send frames (id, message count, messages
  delivered so far) in acceptance order. A client's messages are delivered in the order
  it sent them, so each of this daemon's deliveries of that client's envelopes consumes
  the oldest entries. At shutdown, what is left is reported frame by frame
  (``undelivered``, ``first`` = the first message not delivered). Its size is bounded
  by what is accepted and not delivered: the engine's send window and pending bytes
  plus the submit queue's byte cap (an entry is at least one envelope of those bytes).
"""

from __future__ import annotations

from collections import deque
from typing import Any

ITEM_COST = 200
"""Bytes charged per queued envelope on top of its length (tuple, entry, deque slot)."""


class Entry:
    """One accepted send frame: ``ref`` (its id or None), ``count``, ``done`` messages."""

    __slots__ = ("count", "done", "ref")

    def __init__(self, ref: Any, count: int) -> None:
        self.ref = ref
        self.count = count
        self.done = 0


class Ledger:
    """Accepted send frames per client, oldest first (see the module docstring)."""

    __slots__ = ("_by_client", "messages")

    def __init__(self) -> None:
        self._by_client: dict[int, deque[Entry]] = {}
        self.messages = 0  # accepted, neither delivered here nor withdrawn (all clients)

    def accepted(self, client: int, ref: Any, count: int) -> Entry:
        entry = Entry(ref, count)
        dq = self._by_client.get(client)
        if dq is None:
            self._by_client[client] = dq = deque()
        dq.append(entry)
        self.messages += count
        return entry

    def delivered(self, client: int, count: int) -> None:
        """This daemon delivered ``count`` more messages of ``client`` (in send order)."""
        dq = self._by_client.get(client)
        if dq is None:
            return  # the client is gone
        while count and dq:
            head = dq[0]
            take = min(count, head.count - head.done)
            head.done += take
            count -= take
            self.messages -= take
            if head.done < head.count:
                return
            dq.popleft()
        while dq and dq[0].done >= dq[0].count:  # withdrawn ones
            dq.popleft()

    def withdraw(self, entry: Entry, count: int) -> None:
        """``count`` messages of ``entry`` will never be delivered (already reported)."""
        take = min(count, entry.count - entry.done)
        entry.count -= take
        self.messages -= take

    def forget(self, client: int) -> None:
        dq = self._by_client.pop(client, None)
        if dq is not None:
            self.messages -= sum(e.count - e.done for e in dq)

    def pending(self, client: int) -> list[tuple[Any, int, int]]:
        """``(ref, first, count)`` of each of ``client``'s frames not delivered completely:
        messages ``first..count-1`` of the frame are not delivered."""
        dq = self._by_client.get(client, ())
        return [(e.ref, e.done, e.count) for e in dq if e.done < e.count]

    def fail_oldest(self, client: int, count: int) -> list[tuple[Any, int, int]]:
        """Withdraw ``client``'s ``count`` oldest undelivered messages; return, per frame
        they belong to, ``(ref, first, n)``: messages ``first..first+n-1`` of it."""
        out: list[tuple[Any, int, int]] = []
        dq = self._by_client.get(client)
        if dq is None:
            return out
        for entry in dq:
            if count <= 0:
                break
            take = min(count, entry.count - entry.done)
            if take <= 0:
                continue
            out.append((entry.ref, entry.done, take))
            entry.done += take
            self.messages -= take
            count -= take
        while dq and dq[0].done >= dq[0].count:
            dq.popleft()
        return out

    def entries(self) -> int:
        return sum(len(dq) for dq in self._by_client.values())


class SubmitQueue:
    """FIFO of envelopes waiting for the engine's window, bounded in bytes."""

    __slots__ = ("_items", "cap", "messages", "nbytes")

    def __init__(self, cap: int) -> None:
        self._items: deque[tuple[Any, ...]] = deque()
        self.cap = cap
        self.nbytes = 0
        self.messages = 0

    def __bool__(self) -> bool:
        return bool(self._items)

    def __len__(self) -> int:
        return len(self._items)

    @staticmethod
    def cost(envelope: bytes) -> int:
        return len(envelope) + ITEM_COST

    def fits(self, nbytes: int) -> bool:
        return self.nbytes + nbytes <= self.cap

    def push(self, item: tuple[Any, ...]) -> None:
        """``item[0]`` is the envelope, ``item[2]`` its message count."""
        self._items.append(item)
        self.nbytes += len(item[0]) + ITEM_COST
        self.messages += item[2]

    def head(self) -> tuple[Any, ...]:
        return self._items[0]

    def pop(self) -> tuple[Any, ...]:
        item = self._items.popleft()
        self.nbytes -= len(item[0]) + ITEM_COST
        self.messages -= item[2]
        return item

    def clear(self) -> list[tuple[Any, ...]]:
        items = list(self._items)
        self._items.clear()
        self.nbytes = 0
        self.messages = 0
        return items
