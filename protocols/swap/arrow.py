"""Arrow multicast (section 4 of *Ordered Multicast and Distributed Swap*), with the
joins and leaves of section 6.2.

Every node v of the spanning tree T holds ``link(v)``, itself or a tree neighbour, and
``value(v)``, meaningful only at a *sink* (``link(v) = v``). Following the links from
any node leads to a sink; initially one sink holds ⊥. To multicast m, node v starts
swap(id(m)): it sends the request (carrying m) to ``link(v)`` and becomes a sink holding
id(m). A node that receives the request from u flips its link to u; if it was not a
sink it forwards the request along its old link, otherwise its value is m's immediate
predecessor and it multicasts <value, m> at once (the paper's multicast variant; with
``reply=True`` it returns the value to the origin, which multicasts: ``outbox.py``).
A request crosses at most diameter(T) links, and a node that sends alone stays the
sink after its first message: its later swaps are local and cost no datagram. While k
requests are in flight there are 1 + k sinks (every origin becomes one before its
request finds the old one); at rest there is exactly one.

Joins and leaves (section 6.2) are local. A joiner attaches as a leaf of any member and
points its link at it. A leave needs the leaver's links quiet (the paper's "lock the
neighbours"; the caller guarantees no request is in flight to or from it) and is an
edge contraction of u into a neighbour v. The paper's text, as printed, sets
``link(u) = v`` and ``link(v) = u`` (u and v point at each other and no sink is left)
and redirects the neighbours with ``link(w) = v``. We implement the intent, keeping
exactly one sink: every other neighbour w with ``link(w) = u`` now points at v (its new
neighbour); if u was the sink, v becomes the sink with ``value(v) = value(u)``;
otherwise, if v pointed at u, v takes over u's link (a neighbour of u, now of v). The
default v is ``link(u)`` (any neighbour when u is the sink), so the arrows still lead
to the one sink.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import replace

from .messages import BOTTOM, ArrowSwap, MsgId, Send, SwapEvent, SwapReply
from .outbox import Outbox
from .tree import SpanningTree


class ArrowNode:
    """One node's arrow state: ``link`` and ``value`` (section 4)."""

    def __init__(
        self,
        node_id: int,
        link: int,
        value: MsgId | None = BOTTOM,
        virtual_root: bool = False,
        reply: bool = False,
    ) -> None:
        self.id = node_id
        self.link = link
        self.value: MsgId | None = value
        self.virtual_root = virtual_root
        """Set in the hybrid: its resolutions count as the (virtual) root's."""
        self.outbox = Outbox(node_id, reply)

    @property
    def is_sink(self) -> bool:
        return self.link == self.id

    def swap(
        self,
        now: float,
        msg_id: MsgId,
        payload: bytes = b"",
        tail: MsgId | None = None,
        hops: int = 0,
        origin: int | None = None,
    ) -> list[SwapEvent]:
        """Start swap(``tail``) for m (``tail`` defaults to id(m); the hybrid passes the
        last id of a combined request, its ``origin`` and the ``hops`` it already
        crossed)."""
        swapped_in = msg_id if tail is None else tail
        origin = self.id if origin is None else origin
        if origin == self.id:
            self.outbox.started(msg_id, payload)
        if self.is_sink:
            pred, self.value = self.value, swapped_in
            return [self._resolved(origin, msg_id, payload, pred, hops)]
        dst, self.link, self.value = self.link, self.id, swapped_in
        return [Send(self.id, dst, ArrowSwap(origin, msg_id, payload, hops + 1))]

    def on_datagram(
        self, now: float, src: int, datagram: ArrowSwap | SwapReply
    ) -> list[SwapEvent]:
        if isinstance(datagram, SwapReply):
            return [self.outbox.on_reply(datagram)]
        nxt, self.link = self.link, src
        if nxt == self.id:
            pred, self.value = self.value, BOTTOM  # no longer a sink: value is stale
            d = datagram
            return [self._resolved(d.origin, d.msg_id, d.payload, pred, d.hops)]
        return [Send(self.id, nxt, replace(datagram, hops=datagram.hops + 1))]

    def _resolved(
        self, origin: int, msg_id: MsgId, payload: bytes, pred: MsgId | None, hops: int
    ) -> SwapEvent:
        return self.outbox.resolved(origin, msg_id, payload, pred, hops,
                                    by_root=self.virtual_root)


def initial_nodes(tree: SpanningTree, sink: int, reply: bool = False) -> dict[int, ArrowNode]:
    """Every link points toward ``sink``, which holds ⊥."""
    parents = tree.parents(sink)
    return {
        n: ArrowNode(n, n if p is None else p, reply=reply) for n, p in parents.items()
    }


def sinks(nodes: MutableMapping[int, ArrowNode]) -> list[int]:
    return sorted(n for n, node in nodes.items() if node.is_sink)


def join(
    nodes: MutableMapping[int, ArrowNode], tree: SpanningTree, node_id: int, attach_to: int
) -> ArrowNode:
    """Section 6.2: ``node_id`` links itself as a leaf next to ``attach_to`` and points at it."""
    tree.add_leaf(node_id, attach_to)
    nodes[node_id] = ArrowNode(node_id, attach_to, reply=nodes[attach_to].outbox.reply)
    return nodes[node_id]


def leave(
    nodes: MutableMapping[int, ArrowNode], tree: SpanningTree, node_id: int, into: int | None = None
) -> int:
    """Section 6.2's leave (as corrected in the module docstring), with u's links quiet.
    Returns the neighbour ``node_id`` was contracted into."""
    v_id = relink(nodes, node_id, tree.neighbours(node_id), into)
    tree.contract(node_id, v_id)
    del nodes[node_id]
    return v_id


def relink(
    nodes: Mapping[int, ArrowNode],
    node_id: int,
    neighbours: Sequence[int],
    into: int | None = None,
) -> int:
    """The arrows' part of a leave: hand ``node_id``'s links (and its sink role) to one
    of its arrow ``neighbours``; the caller removes it from the tree."""
    u = nodes[node_id]
    if not neighbours:
        raise ValueError("the last member cannot leave")
    v_id = into if into is not None else (neighbours[0] if u.is_sink else u.link)
    if v_id not in neighbours:
        raise ValueError(f"{v_id} is not a neighbour of {node_id}")
    v = nodes[v_id]
    for w in neighbours:
        if w != v_id and nodes[w].link == node_id:
            nodes[w].link = v_id
    if v.link == node_id:
        if u.is_sink:
            v.link, v.value = v_id, u.value
        elif u.link == v_id:
            raise ValueError(f"{node_id} and {v_id} point at each other: links not quiet")
        else:
            v.link = u.link
    return v_id
