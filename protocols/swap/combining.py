"""Combining multicast (section 5 of *Ordered Multicast and Distributed Swap*).

T has a fixed root r holding ``value(r)``, initially ⊥; edges point toward r. To
multicast m, a node sends swap(v, id(m), id(m)) (carrying m) to its parent. When
requests swap(u, a, b) and swap(w, c, d) meet at a non-root node y, b is the result of
w's swap: y multicasts <b, c's message> at once, and the two travel on as one request
swap(u, a, d). At the root, ``value(r)`` is the result of the request's head and
``value(r)`` becomes its tail. Several requests combine in arrival order.

"Meet" needs a notion of time in a sans-IO layer: a non-root node holds the requests it
receives for ``CombiningConfig.window`` seconds after the first one (0: only requests
handled at the same instant combine) and forwards them, combined, on ``tick(now)``
(``next_deadline`` says when). Every swap datagram goes from a child to its parent and
every request ends at the root: all swap traffic passes through the root, even with a
single sender (section 6.1). The root's own multicasts swap directly. With
``reply=True`` the node that finds a predecessor returns it to the message's origin,
which multicasts (``outbox.py``).

Joins (section 6.2) attach a leaf under any member; a leave (with the leaver holding no
request) hands its children to its parent, or, for the root, hands ``value(r)`` and the
root role to a child that adopts the other children.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass, replace

from .messages import BOTTOM, CombineSwap, MsgId, Send, SwapEvent, SwapReply
from .outbox import Outbox
from .tree import SpanningTree


@dataclass(frozen=True, slots=True)
class CombiningConfig:
    window: float = 0.0
    """How long a non-root node holds requests to combine them, seconds."""
    reply: bool = False
    """Return the predecessor to the origin, which multicasts (``outbox.py``)."""


class CombiningNode:
    def __init__(
        self,
        node_id: int,
        parent: int | None,
        config: CombiningConfig | None = None,
        value: MsgId | None = BOTTOM,
    ) -> None:
        self.id = node_id
        self.parent = parent
        self.config = config or CombiningConfig()
        self.value: MsgId | None = value
        """Meaningful at the root only."""
        self.pending: list[CombineSwap] = []
        self._deadline: float | None = None
        self.outbox = Outbox(node_id, self.config.reply)

    @property
    def is_root(self) -> bool:
        return self.parent is None

    def next_deadline(self) -> float | None:
        return self._deadline

    def swap(self, now: float, msg_id: MsgId, payload: bytes = b"") -> list[SwapEvent]:
        self.outbox.started(msg_id, payload)
        return self._accept(now, CombineSwap(self.id, msg_id, payload, msg_id, 0))

    def on_datagram(
        self, now: float, src: int, datagram: CombineSwap | SwapReply
    ) -> list[SwapEvent]:
        if isinstance(datagram, SwapReply):
            return [self.outbox.on_reply(datagram)]
        return self._accept(now, datagram)

    def _accept(self, now: float, request: CombineSwap) -> list[SwapEvent]:
        if self.is_root:
            return self._at_root(request)
        self.pending.append(request)
        if self._deadline is None:
            self._deadline = now + self.config.window
        return []

    def _at_root(self, request: CombineSwap) -> list[SwapEvent]:
        pred, self.value = self.value, request.tail
        r = request
        return [self.outbox.resolved(r.origin, r.head, r.payload, pred, r.hops, by_root=True)]

    def tick(self, now: float) -> list[SwapEvent]:
        """Forward the held requests, combined, once the window has passed."""
        if self._deadline is None or now < self._deadline:
            return []
        requests, self.pending, self._deadline = self.pending, [], None
        first = requests[0]
        events: list[SwapEvent] = []
        tail = first.tail
        for r in requests[1:]:
            events.append(
                self.outbox.resolved(r.origin, r.head, r.payload, tail, r.hops, via=first.head)
            )
            tail = r.tail
        combined = replace(first, tail=tail, hops=first.hops + 1)
        assert self.parent is not None
        events.append(Send(self.id, self.parent, combined))
        return events


def initial_nodes(
    tree: SpanningTree, root: int, config: CombiningConfig | None = None
) -> dict[int, CombiningNode]:
    return {n: CombiningNode(n, p, config) for n, p in tree.parents(root).items()}


def join(
    nodes: MutableMapping[int, CombiningNode], tree: SpanningTree, node_id: int, attach_to: int
) -> CombiningNode:
    tree.add_leaf(node_id, attach_to)
    config = nodes[attach_to].config
    nodes[node_id] = CombiningNode(node_id, attach_to, config)
    return nodes[node_id]


def leave(nodes: MutableMapping[int, CombiningNode], tree: SpanningTree, node_id: int) -> int:
    """Remove ``node_id`` (holding no request); returns who took its place."""
    u = nodes[node_id]
    if u.pending:
        raise ValueError(f"{node_id} still holds requests")
    children = [n for n in tree.neighbours(node_id) if n != u.parent]
    if u.parent is not None:
        into = u.parent
    elif children:
        into = children[0]
        if nodes[into].pending:
            raise ValueError(f"{into} still holds requests")
        nodes[into].parent, nodes[into].value = None, u.value
    else:
        raise ValueError("the last member cannot leave")
    for c in children:
        if c != into:
            nodes[c].parent = into
    tree.contract(node_id, into)
    del nodes[node_id]
    return into
