"""Batching, fragmentation and reassembly of application messages.

Section 1 of the ToTo paper makes every multicast message a DAG vertex; to keep the
ordering cost per vertex and not per message, ``Batcher`` packs consecutive submitted
messages of one service level into one vertex up to the room the datagram budget leaves
after the header. A message too large for an empty vertex is cut into fragments, one
per vertex; a sender's fragments of one message occupy consecutive sequence numbers, so
a receiver reassembles them per (sender, delivery stream) with ``Reassembler`` and
delivers the message with its last fragment, at the same total-order position
everywhere. Fragments carry ``(total_len, offset)``: a reassembly buffer is bounded by
the declared length, itself bounded by the maximum message size.
"""

from __future__ import annotations

from collections import deque

from ..errors import ProtocolViolation
from ..vocabulary import ServiceLevel
from ..wire.codec import Fragment, Item
from ..wire.limits import FRAGMENT_OVERHEAD, ITEM_OVERHEAD


class Batcher:
    def __init__(self) -> None:
        self.queue: deque[tuple[bytes, ServiceLevel]] = deque()
        """Messages not yet wholly sent, oldest first (read it, never write: ``add``)."""
        self._offset = 0  # bytes of the head message already sent as fragments
        self.pending_bytes = 0
        self.completed: list[tuple[bytes, ServiceLevel]] = []
        """Messages whose last byte went into a vertex since the caller last emptied it."""

    def __bool__(self) -> bool:
        return bool(self.queue)

    @property
    def queued(self) -> int:
        """Messages queued (the head one may be partly sent as fragments)."""
        return len(self.queue)

    def add(self, payload: bytes, service: ServiceLevel) -> None:
        self.queue.append((payload, service))
        self.pending_bytes += len(payload)

    def next_vertex(self, room: int, limit: int = 0) -> tuple[ServiceLevel, tuple[Item, ...]]:
        """Items of the next vertex, using at most ``room`` bytes and, when ``limit`` is
        positive, at most the first ``limit`` messages; the queue must be non-empty."""
        queue = self.queue
        payload, service = queue[0]
        if self._offset or len(payload) + ITEM_OVERHEAD > room:
            size = room - FRAGMENT_OVERHEAD
            if size < 1:
                raise ValueError("datagram budget leaves no room for a fragment")
            offset = self._offset
            chunk = payload[offset : offset + size]
            end = offset + len(chunk)
            self.pending_bytes -= len(chunk)
            if end == len(payload):
                queue.popleft()
                self._offset = 0
                self.completed.append((payload, service))
            else:
                self._offset = end
            return service, (Fragment(len(payload), offset, chunk),)
        items: list[Item] = []
        used = 0
        while queue:
            payload, kind = queue[0]
            cost = len(payload) + ITEM_OVERHEAD
            if kind is not service or used + cost > room or (limit and len(items) >= limit):
                break
            queue.popleft()
            items.append(payload)
            self.completed.append((payload, kind))
            used += cost
            self.pending_bytes -= len(payload)
        return service, tuple(items)

    def restart_partial(self) -> None:
        """A view ended in the middle of a fragmented message: send it whole again (its
        fragments in the old view are never delivered: delivery needs the last one)."""
        if self._offset:
            self.pending_bytes += self._offset
            self._offset = 0

    def requeue_front(self, messages: list[tuple[bytes, ServiceLevel]]) -> None:
        """Put messages back at the head of the queue, in the given order."""
        if not messages:
            return
        self.restart_partial()
        for payload, service in reversed(messages):
            self.queue.appendleft((payload, service))
            self.pending_bytes += len(payload)


class Reassembler:
    """Reassembles fragmented messages of one delivery stream, per sender."""

    def __init__(self) -> None:
        self._partial: dict[int, tuple[int, bytearray]] = {}

    def add(self, sender: int, frag: Fragment) -> bytes | None:
        state = self._partial.get(sender)
        if frag.offset == 0:
            if state is not None:
                del self._partial[sender]
                raise ProtocolViolation("fragment_restart", f"sender {sender} restarted a message")
            if len(frag.chunk) == frag.total_len:
                return frag.chunk
            self._partial[sender] = (frag.total_len, bytearray(frag.chunk))
            return None
        if state is None or state[0] != frag.total_len or len(state[1]) != frag.offset:
            self._partial.pop(sender, None)
            raise ProtocolViolation("fragment_out_of_order", f"sender {sender} at {frag.offset}")
        buf = state[1]
        buf += frag.chunk
        if len(buf) == frag.total_len:
            del self._partial[sender]
            return bytes(buf)
        return None

    @property
    def buffered_bytes(self) -> int:
        return sum(len(buf) for _, buf in self._partial.values())
