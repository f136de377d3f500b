"""The swap orderings inside one view of the Node (sections 3 to 6 of *Ordered Multicast
and Distributed Swap*): ``protocol.ordering = arrow | combining | hybrid`` in place of
the ToTo engine, over the same reliable layer, membership and delivery pipeline.

Theory of operation. A view's session owns one ``SwapOrdering``. Its tree is the
view record's (``ViewRecord.tree``, ``carry.py``): the previous view's tree with the
joiners attached as leaves and the leavers contracted into a neighbour (section 6.2),
computed by the view's coordinator and read by every member from the install, a joiner
included; a view without one (the first) takes the configured shape over the sorted
ids (the lowest id the root). The tree's root is the arrow's sink, the combining root
and the hybrid's first virtual-root member; the hybrid's virtual root R travels with
the tree. The swap object starts at ⊥ in every view, the links pointing at the root:
the flush of virtual synchrony ends the old view's order, so only the tree carries over.

- *Sending* (the reply variant, ``outbox.py``: the origin multicasts, so its vertex
  stays in its own reliable stream). Before the session makes an ordered vertex it
  needs the vertex's predecessor: ``header(now)`` starts swap((me, k)) for the next
  swap id k of this view (one request of this member at a time) and returns ``(k,
  pred)`` once the swap resolved (at once for a lone arrow sender, the sink: no
  datagram). The vertex then carries ``<pred, (me, k)>`` in the session's framing of
  its items (``frame``: a first item holding the header; a fragment rides as a framed
  bytes item), the wire's vertex layout unchanged. The swap datagrams travel over
  ``link.SwapLinks`` (reliable FIFO per link, a SWAP datagram kind).
- *Ordering* (the ToTo engine's seam: ``insert``, ``close``, ``pending``). Every
  causally released ordered vertex feeds <pred, id> to a ``delivery.DeliveryBuffer``;
  its deliveries are one chain, the same at every member, handed back as
  ``MessageDelivered`` in chain order. Causal and ack-only vertices take no place.
- *FIFO and causal order: swaps in a row.* A member starts its next swap once the
  previous one is resolved (one request of its own in flight), without waiting for
  that vertex's delivery (``IN_A_ROW``: every mode), and no causal vertex waits in its
  hold-back (the ordered past of a causal message sent before is then delivered); the
  vertex carries only messages submitted before the swap started (everything their
  sender had delivered comes first: a delivered message's chain is complete back to
  ⊥, and a swap started after a delivery returns an id that ends up after it). Its
  swap k + 1 ends up after its swap k in every mode: arrow, at swap k's start the
  member became a sink holding (me, k), so swap k + 1 is local or follows the arrows to
  requests queued after (me, k) (a distributed queue, each node's requests in the order
  it issued them); combining, swap k + 1's request climbs the path of the request
  that carried (me, k), behind it on FIFO links, and a node holding both combines them
  in arrival order; hybrid, the same up to R, then the arrow's queue inside R. Only a
  view's close can break it (``close``): a request or a reply lost with a member that
  leaves the view cuts the chain, and one origin's swaps k and k + 1 may then wait in
  two fragments; the close skips fragments in an order that keeps every origin's ids
  in their order (``DeliveryBuffer.skip(fifo=True)``: they are pieces of the one
  order the lost requests would have completed, which kept them). With the plain
  lowest-head skip the hybrid broke causal order on membership sweep seed 1360
  (``tests/swap/test_pipelined_swaps.py``, docs/swap.md "FIFO").
- *A causal message*'s hold-back waits for the ordered vertices of its causal past as
  with ToTo.
- *View change: total order with gaps (section 6.3).* A message whose vertex was not
  sent when the view froze stays queued at its sender and is swapped again in the next
  view (its id of the old view is never used). Its old swap may have been resolved and
  become another message's predecessor: that fragment of the chain waits for a
  predecessor that never comes. ``close`` (the flush agreed the final DAG: every member
  completing the view holds the same vertices) drains the chain and then skips
  (``DeliveryBuffer.skip``: the waiting fragment with the lowest head id among those
  that keep every origin's ids in order goes on, after a gap) until nothing waits: the
  same decisions at every survivor. Each message delivered right after such a hole is
  in ``gap_before`` (the session reports a ``SwapGap``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgpack

from ..errors import ProtocolViolation
from ..ordering.messages import CausalMessage, MessageDelivered
from ..vocabulary import DeliveryRule
from ..wire.codec import Fragment, Item, SwapDatagram
from . import arrow, carry, combining, hybrid
from .combining import CombiningConfig
from .delivery import Delivered, DeliveryBuffer, DeliveryEvent
from .hybrid import HybridConfig
from .link import SwapLinks, decode, encode
from .messages import Multicast, Ordered, Send, SwapEvent
from .tree import SpanningTree

ORDERINGS = ("toto", "arrow", "combining", "hybrid")
SWAP_ORDERINGS = ("arrow", "combining", "hybrid")
IN_A_ROW = frozenset({"arrow", "combining", "hybrid"})
"""The orderings whose member starts its next swap once the previous one is resolved,
without waiting for that vertex's delivery (module docstring, "FIFO")."""
HEADER_RESERVE = 48
"""Bytes an ordered vertex's items give up for the swap header and a framed fragment."""


def settings_text(rule: str, ordering: str, shape: str, fanout: int, root_group: int) -> str:
    """What the members must agree on, as the membership ``Settings.rule`` text."""
    if ordering == "toto":
        return rule
    extra = f"/{root_group}" if ordering == "hybrid" else ""
    return f"{ordering}:{shape}/{fanout}{extra}"


def build_tree(members: tuple[int, ...], shape: str, fanout: int) -> SpanningTree:
    return SpanningTree.shaped(sorted(members), shape, fanout)  # type: ignore[arg-type]


def carried(members: tuple[int, ...], tree: tuple[int, ...], shape: str, fanout: int,
            root_group: int) -> carry.CarriedTree:
    """A view's tree: the view record's, or the shape over the sorted ids (none)."""
    if tree:
        return carry.decode(members, tree)
    return carry.initial(members, shape, fanout, root_group)


def tree_problem(view: Any) -> str | None:
    """Why ``view``'s swap tree (a ``ViewRecord``'s) is not a rooted spanning tree of its
    members with a connected R holding the root (``carry.decode``), or ``None``."""
    try:
        carry.decode(view.nodes, view.tree)
    except ValueError as exc:
        return str(exc)
    return None


def view_tree(known: Any, members: tuple[int, ...], *, shape: str, fanout: int,
              root_group: int) -> tuple[int, ...]:
    """The membership layer's ``tree_for``: the tree of the view of ``members`` that
    succeeds ``known`` (a ``ViewRecord`` or None), as ``ViewRecord.tree``."""
    prev = None
    if known is not None:
        prev = carried(known.nodes, known.tree, shape, fanout, root_group)
    return carry.encode(carry.next_tree(prev, members, shape, fanout, root_group), members)


class SwapOrdering:
    def __init__(self, view_id: int, members: tuple[int, ...], node_id: int, *,
                 ordering: str, shape: str, fanout: int, root_group: int, window: float,
                 rto: float, drop: Callable[[str, str], None],
                 tree: tuple[int, ...] = ()) -> None:
        self.view_id = view_id
        self.node_id = node_id
        self.ordering = ordering
        group_size = root_group if ordering == "hybrid" else 1
        self.carried = carried(members, tree, shape, fanout, group_size)
        self.tree = self.carried.spanning()
        root = self.carried.root
        cfg = CombiningConfig(window=window, reply=True)
        self.node: Any
        if ordering == "arrow":
            self.node = arrow.initial_nodes(self.tree, root, reply=True)[node_id]
        elif ordering == "combining":
            self.node = combining.initial_nodes(self.tree, root, cfg)[node_id]
        elif ordering == "hybrid":
            self.node = hybrid.initial_nodes(
                self.tree, HybridConfig(self.carried.group, root, cfg))[node_id]
        else:
            raise ValueError(f"unknown swap ordering {ordering!r}")
        self.links = SwapLinks(node_id, view_id, rto, drop)
        self._drop = drop
        self.buffer = DeliveryBuffer(node_id)
        self.phi = len(members) / 2
        self._k = 0
        """The last swap id this member started in this view."""
        self._asked: int | None = None
        self._ready: tuple[int, Ordered] | None = None
        self._vertices: dict[tuple[int, int], Any] = {}
        """Waiting ordered vertices by swap id."""
        self._now = 0.0
        self._own_placed = 0
        """The last own swap id delivered here (in chain order)."""
        self.limit = 0
        """How many queued messages the pending vertex may carry."""
        self._position = 0
        self.gap_before: set[tuple[int, int]] = set()
        """(origin, seq) of vertices delivered right after a hole in the chain."""
        self.swaps = 0
        self.local_swaps = 0

    # ------------------------------------------------------------------ sending

    def header(self, now: float, queued: int, unheld: bool) -> tuple[int, Ordered] | None:
        """``(k, <pred, (me, k)>)`` for the next ordered vertex, or None while its swap
        is in flight. A swap starts here when none is (the previous one resolved: in
        ``IN_A_ROW`` modes the next one goes after it without more, otherwise this
        member's previous vertex must also have taken its place in the order here;
        FIFO, module docstring) and no causal vertex waits in the hold-back
        (``unheld``: the ordered vertices in the causal past of the causal ones sent
        before are placed, so they go before this one); the vertex may then carry only
        the first ``queued`` messages (``limit``), those submitted before the swap
        started (so it goes after everything their sender had delivered: causal
        order)."""
        self._now = now
        if (self._ready is None and self._asked is None and unheld
                and (self._in_a_row() or self._own_placed >= self._k)):
            self.limit = queued
            self._k += 1
            self._asked = self._k
            self.swaps += 1
            self._handle(self.node.swap(now, (self.node_id, self._k), b""), now)
            if self._ready is not None:
                self.local_swaps += 1
        return self._ready

    def _in_a_row(self) -> bool:
        """Whether this member's next swap may start before its previous vertex is
        delivered here (swaps in a row: ``IN_A_ROW``, module docstring)."""
        return self.ordering in IN_A_ROW

    def frame(self, items: tuple[Item, ...]) -> tuple[Item, ...]:
        """The items of the vertex that consumes ``header``'s answer."""
        assert self._ready is not None
        k, ordered = self._ready
        self._ready = None
        pred = [] if ordered.pred is None else list(ordered.pred)
        if len(items) == 1 and isinstance(items[0], Fragment):
            f = items[0]
            head = msgpack.packb([k, 1, *pred])
            return (head, msgpack.packb([f.total_len, f.offset, f.chunk]))
        return (msgpack.packb([k, 0, *pred]), *items)

    @staticmethod
    def unframe(items: tuple[Item, ...]) -> tuple[Item, ...]:
        """The application items of an ordered vertex (``frame`` undone)."""
        head = msgpack.unpackb(items[0]) if isinstance(items[0], bytes) else None
        if not isinstance(head, list) or len(head) < 2:
            raise ProtocolViolation("bad_swap_header", "no header")
        if head[1] == 1:
            body = items[1]
            if not isinstance(body, bytes):
                raise ProtocolViolation("bad_swap_header", "fragment")
            total, offset, chunk = msgpack.unpackb(body)
            return (Fragment(total, offset, chunk),)
        return items[1:]

    # ------------------------------------------------------------------ swap datagrams

    def receive(self, dg: SwapDatagram, now: float) -> None:
        self._now = now
        for src, msg in self.links.receive(dg):
            d = decode(msg)
            if d is None:
                self._drop("bad_swap", f"from node {src}")
                continue
            try:
                events = self.node.on_datagram(now, src, d)
            except (KeyError, AssertionError, ValueError):  # impossible for an honest peer
                self._drop("bad_swap", f"unexpected {type(d).__name__} from node {src}")
                continue
            self._handle(events, now)

    def _handle(self, events: list[SwapEvent], now: float) -> None:
        for ev in events:
            if isinstance(ev, Send):
                self.links.send(ev.dst, encode(ev.datagram), now)
            elif isinstance(ev, Multicast):
                o = ev.ordered
                if o.msg_id == (self.node_id, self._asked):
                    self._ready = (o.msg_id[1], o)
                    self._asked = None

    def next_deadline(self) -> float | None:
        a = self.links.next_deadline()
        b = None if self.ordering == "arrow" else self.node.next_deadline()
        if a is None:
            return b
        return a if b is None else min(a, b)

    def tick(self, now: float) -> None:
        self._now = now
        self.links.tick(now)
        if self.ordering != "arrow":
            self._handle(self.node.tick(now), now)

    def take_datagrams(self) -> list[SwapDatagram]:
        return self.links.take()

    # ------------------------------------------------------------------ ordering seam

    @property
    def pending(self) -> int:
        return len(self._vertices)

    @property
    def pending_payloads(self) -> int:
        return len(self._vertices)

    def insert(self, message: CausalMessage) -> list[MessageDelivered]:
        v = message.payload
        if v is None:
            return []
        items = v.items
        head = msgpack.unpackb(items[0]) if items and isinstance(items[0], bytes) else None
        if (not isinstance(head, list) or len(head) not in (2, 4)
                or not all(type(x) is int and x >= 0 for x in head)):
            raise ProtocolViolation("bad_swap_header", f"vertex {message.id}")
        msg_id = (message.sender, head[0])
        pred = (head[2], head[3]) if len(head) == 4 else None
        if msg_id in self._vertices:
            raise ProtocolViolation("bad_swap_header", f"swap id {msg_id} twice")
        self._vertices[msg_id] = v
        return self._delivered(self.buffer.receive(self._now, Ordered(pred, msg_id)),
                               DeliveryRule.DEFAULT)

    def _delivered(self, events: list[DeliveryEvent],
                   rule: DeliveryRule) -> list[MessageDelivered]:
        out = []
        gap = False
        for ev in events:
            if not isinstance(ev, Delivered):
                gap = True
                continue
            mid = ev.ordered.msg_id
            v = self._vertices.pop(mid)
            if mid[0] == self.node_id:
                self._own_placed = mid[1]
            if gap:
                self.gap_before.add((v.origin, v.seq))
                gap = False
            out.append(MessageDelivered(v.origin, v.seq, v, self._position, 0, rule, 0, 0, 0))
            self._position += 1
        return out

    def close(self) -> list[MessageDelivered]:
        """The view's final DAG is agreed: deliver the fragments left, each after a gap,
        lowest head first among those that keep every origin's ids in order (swaps in a
        row leave one origin's vertices in several fragments: module docstring; the
        choice depends on the fragments only, the same at every member holding the
        DAG)."""
        out: list[MessageDelivered] = []
        while self.buffer.waiting:
            events = self.buffer.skip(self._now, fifo=True)
            if not events:  # no chain head: impossible for ids that each name one pred
                break
            out += self._delivered(events, DeliveryRule.FLUSH)
        return out
