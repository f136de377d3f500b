"""A virtual-time simulator for ordering by distributed swap (*Ordered Multicast and
Distributed Swap*, sections 2 to 6): arrow, combining or hybrid swap nodes on a
spanning tree, the <pred, m> pairs carried by the project's simulated multicast
network, and a ``DeliveryBuffer`` per member.

The paper's model (section 2) gives the swap layer a reliable FIFO unicast: swap
datagrams cross one tree link after ``delay + U(0, jitter)`` of ``swap_link`` and never
overtake each other on a link (loss, duplication and reordering of ``swap_link`` are
not used). The <pred, m> multicasts go through ``SimNetwork`` with ``data``'s faults:
duplicates and reordering are absorbed by the buffers; a lost copy is never repaired,
which is how failures reach the members as "total order with gaps" (section 6.3): when
the network drains, each member learns the ordering header of every copy it lost from
its multicaster, and reports the gap where it was. A multicast that vanishes
(``vanish``: its sender failed before sending it) leaves no header anywhere: the
members skip it ("one or more missing") once the network has drained.

A run is a sequence of epochs. In each, every sender multicasts ``messages`` messages
at exponential intervals and the network drains; between epochs one membership change
of section 6.2 happens (a join as a leaf, or a leave), with the links quiet, as the
paper's leave requires; a joiner takes the delivery position of the member it attaches
to (state transfer). Everything a checker needs goes into a ``SwapTrace``; ``check``
runs every checker of ``swap_checkers`` on it, and ``simulate`` does so on every run.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, field
from typing import Any, Literal

from ..swap import arrow, combining, hybrid
from ..swap.arrow import ArrowNode
from ..swap.combining import CombiningConfig
from ..swap.delivery import DeliveryBuffer, DeliveryEvent
from ..swap.hybrid import HybridConfig
from ..swap.messages import (
    ArrowSwap,
    MsgId,
    Multicast,
    Ordered,
    Send,
    SwapEvent,
    SwapReply,
)
from ..swap.tree import Shape, SpanningTree
from .network import LinkFaults, NetworkConfig, SimNetwork

Mode = Literal["arrow", "combining", "hybrid"]


@dataclass(frozen=True, slots=True)
class Join:
    node: int
    attach_to: int


@dataclass(frozen=True, slots=True)
class Leave:
    node: int


@dataclass(frozen=True, slots=True)
class SwapSimConfig:
    mode: Mode = "arrow"
    n: int = 7
    shape: Shape = "balanced"
    fanout: int = 2
    senders: tuple[int, ...] | None = None
    """Who multicasts (None: every member of the epoch)."""
    messages: int = 4
    """Per sender and epoch."""
    rate: float = 400.0
    """Per sender, messages per second (exponential gaps)."""
    sink: int | None = None
    """Arrow: the initial sink; combining: the root (default: the tree's centre)."""
    root_group: tuple[int, ...] = ()
    """Hybrid: the virtual root R (default: the centre and up to two neighbours)."""
    window: float = 0.001
    """Combining: how long a node holds requests to combine them."""
    reply: bool = False
    """The reply variant: the predecessor goes back to the origin, which multicasts."""
    swap_link: LinkFaults = field(default_factory=LinkFaults)
    data: NetworkConfig = field(default_factory=NetworkConfig)
    vanish: float = 0.0
    """Probability that a multicast reaches nobody and its header is known to nobody (its
    sender failed between the swap and the multicast): members skip it when the network
    drains, "one or more messages missing"."""
    changes: tuple[Join | Leave, ...] = ()


@dataclass(frozen=True, slots=True)
class SwapDatagramRecord:
    time: float
    src: int
    dst: int
    toward_root: bool
    """Combining and hybrid: the datagram goes to the sender's parent or inside R."""
    reply: bool = False
    """A ``SwapReply`` to a message's origin (the reply variant)."""


@dataclass(frozen=True, slots=True)
class MulticastRecord:
    time: float
    event: Multicast
    hop_bound: int
    """diameter(T) when it was resolved."""


@dataclass(frozen=True, slots=True)
class ChangeRecord:
    """One join or leave (section 6.2) in a ``SwapTrace``: ``node``, and per node its tree
    neighbours and its protocol pointer (arrow: link; combining: parent) before and after."""

    node: int
    join: bool
    before: dict[int, tuple[frozenset[int], int | None]]
    after: dict[int, tuple[frozenset[int], int | None]]


def _pointer(node: object) -> int | None:
    """An arrow node's link, a combining node's parent (the hybrid's: whichever it runs)."""
    inner = getattr(node, "arrow", None) or getattr(node, "combining", None) or node
    return getattr(inner, "link", getattr(inner, "parent", None))


@dataclass
class SwapTrace:
    mode: Mode
    senders_per_epoch: list[tuple[int, ...]] = field(default_factory=list)
    initial_sink: int = 0
    single_sender_budget: int | None = None
    """Arrow with one sender throughout: the swap datagrams it may cost (the distance from
    the sender to the initial sink; 0 when it is the sink)."""
    swaps: list[SwapDatagramRecord] = field(default_factory=list)
    multicasts: list[MulticastRecord] = field(default_factory=list)
    sink_samples: list[tuple[float, int, int]] = field(default_factory=list)
    """(time, sinks, arrow requests in flight) after every step, arrow and hybrid."""
    deliveries: dict[int, list[DeliveryEvent]] = field(default_factory=dict)
    start: dict[int, MsgId | None] = field(default_factory=dict)
    """Each member's delivery position when it started (⊥, or a joiner's transfer)."""
    joined_after: dict[int, int] = field(default_factory=dict)
    """member -> index in ``multicasts`` from which it must deliver (joiners)."""
    final_members: tuple[int, ...] = ()
    data_loss: bool = False
    sent_at: dict[MsgId, float] = field(default_factory=dict)
    """When each message's swap started (its ordering latency ends at its multicast)."""
    vanished: set[MsgId] = field(default_factory=set)
    """Messages that reached nobody (``SwapSimConfig.vanish``)."""
    violations: list[str] = field(default_factory=list)
    changes: list[ChangeRecord] = field(default_factory=list)
    """Every join and leave: who, and each node's tree neighbours and pointer around it."""


class _Sim:
    def __init__(self, config: SwapSimConfig, seed: int) -> None:
        self.config = config
        self.rng = random.Random(seed)
        members = list(range(config.n))
        self.tree = SpanningTree.shaped(members, config.shape, config.fanout)
        centre = self.tree.center()
        self.sink = config.sink if config.sink is not None else centre
        self.nodes: dict[int, Any]
        self.group: set[int] = set()
        if config.mode == "arrow":
            self.nodes = arrow.initial_nodes(self.tree, self.sink, config.reply)
        elif config.mode == "combining":
            self.nodes = combining.initial_nodes(
                self.tree, self.sink, CombiningConfig(config.window, config.reply)
            )
        else:
            group = config.root_group or (centre, *self.tree.neighbours(centre)[:2])
            self.group = set(group)
            hc = HybridConfig(tuple(group), None, CombiningConfig(config.window, config.reply))
            self.nodes = hybrid.initial_nodes(self.tree, hc)
        self.buffers = {m: DeliveryBuffer(m) for m in members}
        self.net = SimNetwork(config.data, members, self.rng)
        self.trace = SwapTrace(config.mode, initial_sink=self.sink)
        self.trace.data_loss = config.vanish > 0 or config.data.default.loss > 0 or any(
            f.loss > 0 for f in config.data.links.values()
        )
        self.trace.deliveries = {m: [] for m in members}
        self.trace.start = {m: None for m in members}
        self.heap: list[tuple[float, int, int, str, tuple[Any, ...]]] = []
        self.seq = 0
        self.link_free: dict[tuple[int, int], float] = {}
        self.in_flight = 0
        self.ticks: set[tuple[int, float]] = set()
        self.lost: dict[int, set[MsgId]] = {m: set() for m in members}
        self.headers: dict[MsgId, Ordered] = {}
        self.counter: dict[int, int] = {}
        self.now = 0.0

    # -- plumbing ---------------------------------------------------------------------
    def push(self, time: float, kind: str, *args: Any, prio: int = 0) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (time, prio, self.seq, kind, args))

    def parent_of(self, node: int) -> int | None:
        inner = getattr(self.nodes[node], "combining", self.nodes[node])
        return getattr(inner, "parent", None)

    def route(self, events: list[SwapEvent]) -> None:
        for ev in events:
            if isinstance(ev, Send):
                self.send(ev)
            else:
                self.multicast(ev)
        self.schedule_ticks()

    def send(self, ev: Send) -> None:
        f = self.config.swap_link
        arrival = self.now + f.delay + self.rng.uniform(0.0, f.jitter)
        key = (ev.src, ev.dst)
        arrival = max(arrival, self.link_free.get(key, 0.0) + 1e-9)
        self.link_free[key] = arrival
        toward = self.parent_of(ev.src) == ev.dst or (
            ev.src in self.group and ev.dst in self.group
        )
        reply = isinstance(ev.datagram, SwapReply)
        self.trace.swaps.append(SwapDatagramRecord(self.now, ev.src, ev.dst, toward, reply))
        if isinstance(ev.datagram, ArrowSwap):
            self.in_flight += 1
        self.push(arrival, "swap", ev.src, ev.dst, ev.datagram)

    def multicast(self, ev: Multicast) -> None:
        bound = self.tree.diameter()
        self.trace.multicasts.append(MulticastRecord(self.now, ev, bound))
        if self.config.vanish and self.rng.random() < self.config.vanish:
            self.trace.vanished.add(ev.ordered.msg_id)
            return
        self.headers[ev.ordered.msg_id] = ev.ordered
        self.net.members = tuple(self.buffers)
        arrivals, lost = self.net.multicast(ev.at, b"", self.now)
        self.push(self.now, "data", ev.at, ev.ordered)
        for t, dst in arrivals:
            self.push(t, "data", dst, ev.ordered)
        for dst in lost:
            self.lost[dst].add(ev.ordered.msg_id)

    def schedule_ticks(self) -> None:
        for n, node in self.nodes.items():
            deadline = node.next_deadline() if hasattr(node, "next_deadline") else None
            if deadline is not None and (n, deadline) not in self.ticks:
                self.ticks.add((n, deadline))
                self.push(deadline, "tick", n, prio=1)

    def sample_sinks(self) -> None:
        if self.config.mode == "combining":
            return
        arrows: list[ArrowNode] = [
            n if isinstance(n, ArrowNode) else n.arrow
            for n in self.nodes.values()
            if isinstance(n, ArrowNode) or n.arrow is not None
        ]
        count = sum(1 for a in arrows if a.is_sink)
        self.trace.sink_samples.append((self.now, count, self.in_flight))

    def deliver(self, member: int, events: list[DeliveryEvent]) -> None:
        self.trace.deliveries[member].extend(events)

    # -- the run ----------------------------------------------------------------------
    def epoch(self, start: float) -> None:
        members = sorted(self.buffers)
        wanted = self.config.senders
        senders = tuple(m for m in members if wanted is None or m in wanted)
        self.trace.senders_per_epoch.append(senders)
        for s in senders:
            t = start
            for _ in range(self.config.messages):
                t += self.rng.expovariate(self.config.rate)
                k = self.counter.get(s, 0)
                self.counter[s] = k + 1
                self.push(t, "send", s, (s, k))
        while self.heap:
            time, _, _, kind, args = heapq.heappop(self.heap)
            self.now = time
            self.step(kind, args)
            self.sample_sinks()
        for member, buffer in self.buffers.items():
            for mid in sorted(self.lost[member]):
                h = self.headers[mid]
                self.deliver(member, buffer.learn_header(self.now, h.pred, h.msg_id))
            self.lost[member].clear()
            while skipped := buffer.skip(self.now):  # what is left waits for a header nobody has
                self.deliver(member, skipped)

    def step(self, kind: str, args: tuple[Any, ...]) -> None:
        if kind == "send":
            sender, mid = args
            if sender in self.nodes:
                self.trace.sent_at[mid] = self.now
                payload = f"m{mid[0]}.{mid[1]}".encode()
                self.route(self.nodes[sender].swap(self.now, mid, payload))
        elif kind == "swap":
            src, dst, datagram = args
            if isinstance(datagram, ArrowSwap):
                self.in_flight -= 1
            self.route(self.nodes[dst].on_datagram(self.now, src, datagram))
        elif kind == "tick":
            (node,) = args
            self.ticks = {t for t in self.ticks if t[0] != node or t[1] > self.now}
            if node in self.nodes:
                self.route(self.nodes[node].tick(self.now))
        elif kind == "data":
            member, ordered = args
            if member in self.buffers:
                self.deliver(member, self.buffers[member].receive(self.now, ordered))

    def _links(self) -> dict[int, tuple[frozenset[int], int | None]]:
        return {n: (frozenset(self.tree.neighbours(n)), _pointer(self.nodes[n]))
                for n in self.tree.nodes}

    def change(self, change: Join | Leave) -> None:
        before = self._links()
        self._change(change)
        self.trace.changes.append(ChangeRecord(change.node, isinstance(change, Join), before,
                                               self._links()))

    def _change(self, change: Join | Leave) -> None:
        mode = self.config.mode
        if isinstance(change, Join):
            module = {"arrow": arrow, "combining": combining, "hybrid": hybrid}[mode]
            module.join(self.nodes, self.tree, change.node, change.attach_to)
            buffer = DeliveryBuffer(change.node)
            buffer.transfer_from(self.buffers[change.attach_to])
            self.buffers[change.node] = buffer
            self.lost[change.node] = set()
            self.trace.deliveries[change.node] = []
            self.trace.start[change.node] = buffer.last
            self.trace.joined_after[change.node] = len(self.trace.multicasts)
        else:
            if mode == "arrow":
                arrow.leave(self.nodes, self.tree, change.node)
            elif mode == "combining":
                combining.leave(self.nodes, self.tree, change.node)
            else:
                hybrid.leave(self.nodes, self.tree, change.node)
            del self.buffers[change.node]
        self.sample_sinks()

    def run(self) -> SwapTrace:
        start = 0.0
        self.epoch(start)
        for change in self.config.changes:
            start = self.now + 0.01
            self.change(change)
            self.epoch(start)
        self.trace.final_members = tuple(sorted(self.buffers))
        senders = {s for epoch in self.trace.senders_per_epoch for s in epoch}
        if self.config.mode == "arrow" and len(senders) == 1:
            way = SpanningTree.shaped(
                list(range(self.config.n)), self.config.shape, self.config.fanout
            ).distance(next(iter(senders)), self.sink)
            self.trace.single_sender_budget = way + (1 if self.config.reply and way else 0)
        return self.trace


def run_trace(config: SwapSimConfig, seed: int) -> SwapTrace:
    """One run, unchecked."""
    return _Sim(config, seed).run()
