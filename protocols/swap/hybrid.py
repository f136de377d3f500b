"""The hybrid of section 6.1 of *Ordered Multicast and Distributed Swap*: a combining
tree whose root is a group R of nodes running the arrow protocol (a "virtual root").

R is a connected part of the spanning tree T; its arrow links run over T's edges inside
R and lead to one sink of R holding ⊥. Every node outside R is a combining node whose
parent is its next hop toward R. A combined request swap(u, a, b) that reaches a member
x of R starts an arrow swap there: x becomes a sink holding b and the request carries
m_a along the arrows to the previous sink, whose value is a's predecessor. Requests
from below combine on the way up as in section 5; inside R they spread over many
members, so the root is no longer one node: with R = T this is the arrow multicast,
with |R| = 1 it is the combining multicast.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from .arrow import ArrowNode
from .arrow import relink as arrow_relink
from .combining import CombiningConfig, CombiningNode
from .messages import ArrowSwap, Datagram, MsgId, SwapEvent, SwapReply
from .tree import SpanningTree


@dataclass(frozen=True, slots=True)
class HybridConfig:
    root_group: tuple[int, ...]
    sink: int | None = None
    """The member of R holding ⊥ at the start (default: R's first)."""
    combining: CombiningConfig = field(default_factory=CombiningConfig)


class HybridNode:
    def __init__(self, node_id: int, arrow: ArrowNode | None, combining: CombiningNode | None):
        assert (arrow is None) != (combining is None)
        self.id = node_id
        self.arrow = arrow
        self.combining = combining

    def next_deadline(self) -> float | None:
        return self.combining.next_deadline() if self.combining else None

    def swap(self, now: float, msg_id: MsgId, payload: bytes = b"") -> list[SwapEvent]:
        if self.arrow is not None:
            return self.arrow.swap(now, msg_id, payload)
        assert self.combining is not None
        return self.combining.swap(now, msg_id, payload)

    def on_datagram(self, now: float, src: int, datagram: Datagram) -> list[SwapEvent]:
        if self.arrow is not None:
            if isinstance(datagram, ArrowSwap | SwapReply):
                return self.arrow.on_datagram(now, src, datagram)
            d = datagram
            return self.arrow.swap(now, d.head, d.payload, tail=d.tail, hops=d.hops,
                                   origin=d.origin)
        assert self.combining is not None and not isinstance(datagram, ArrowSwap)
        return self.combining.on_datagram(now, src, datagram)

    def tick(self, now: float) -> list[SwapEvent]:
        return self.combining.tick(now) if self.combining else []


def initial_nodes(tree: SpanningTree, config: HybridConfig) -> dict[int, HybridNode]:
    group = set(config.root_group)
    if not group:
        raise ValueError("the virtual root needs at least one member")
    sink = config.sink if config.sink is not None else config.root_group[0]
    # arrows inside R toward the sink (R must be connected in T)
    link = {sink: sink}
    queue = deque([sink])
    while queue:
        u = queue.popleft()
        for v in tree.neighbours(u):
            if v in group and v not in link:
                link[v] = u
                queue.append(v)
    if set(link) != group:
        raise ValueError("the virtual root must be a connected part of the tree")
    # parents outside R: the next hop toward R
    parent: dict[int, int] = {}
    queue = deque(sorted(group))
    seen = set(group)
    while queue:
        u = queue.popleft()
        for v in tree.neighbours(u):
            if v not in seen:
                seen.add(v)
                parent[v] = u
                queue.append(v)
    nodes: dict[int, HybridNode] = {}
    for n in tree.nodes:
        if n in group:
            arrow = ArrowNode(n, link[n], virtual_root=True, reply=config.combining.reply)
            nodes[n] = HybridNode(n, arrow, None)
        else:
            nodes[n] = HybridNode(n, None, CombiningNode(n, parent[n], config.combining))
    return nodes


def join(
    nodes: dict[int, HybridNode], tree: SpanningTree, node_id: int, attach_to: int
) -> HybridNode:
    """Section 6.2's join: a combining leaf under ``attach_to`` (in R or not)."""
    tree.add_leaf(node_id, attach_to)
    other = nodes[attach_to].combining
    if other is not None:
        config = other.config
    else:
        arrow = nodes[attach_to].arrow
        config = CombiningConfig(reply=arrow is not None and arrow.outbox.reply)
    nodes[node_id] = HybridNode(node_id, None, CombiningNode(node_id, attach_to, config))
    return nodes[node_id]


def leave(nodes: dict[int, HybridNode], tree: SpanningTree, node_id: int) -> int:
    """``node_id`` leaves with its links quiet and holding no request. Outside R its
    children move to its parent (section 5's tree). In R, the arrow's leave hands its
    links and sink role to an R neighbour (``arrow.relink``), and its children outside R
    move to that neighbour; the last member of R hands the virtual root to a child,
    which becomes an arrow sink holding the value. Returns who took its place."""
    me = nodes[node_id]
    neighbours = tree.neighbours(node_id)
    children = [c for c in neighbours
                if (cc := nodes[c].combining) is not None and cc.parent == node_id]
    if any(nodes[c].combining.pending for c in children):  # type: ignore[union-attr]
        raise ValueError("a child still holds requests")
    if me.combining is not None:
        if me.combining.pending:
            raise ValueError(f"{node_id} still holds requests")
        into = me.combining.parent
        assert into is not None
    else:
        assert me.arrow is not None
        arrows = {n: a for n, h in nodes.items() if (a := h.arrow) is not None}
        in_group = [n for n in neighbours if n in arrows]
        if in_group:
            into = arrow_relink(arrows, node_id, in_group)
        elif children:
            into = children[0]
            reply = me.arrow.outbox.reply
            nodes[into] = HybridNode(into, ArrowNode(into, into, me.arrow.value,
                                                     virtual_root=True, reply=reply), None)
        else:
            raise ValueError("the last member cannot leave")
    for c in children:
        child = nodes[c].combining
        if c != into and child is not None:
            child.parent = into
    tree.contract(node_id, into)
    del nodes[node_id]
    return into
