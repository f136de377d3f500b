"""A cluster of full Nodes over the simulated network, on a virtual clock, with faults.

The very code the daemon runs (``amcast.protocols.node.Node``: wire, membership,
per-view reliable causal multicast and ToTo engine; sections 1-5 of the ToTo paper)
is driven by one deterministic event loop: the next event is the earliest of a datagram
arrival, a node timer (``next_timer``), a scheduled submission or a scheduled fault.
After every input the node's durable state goes to its simulated disk, its datagrams to
``SimNetwork`` and its events to the logs.

Faults, on top of the network's loss, duplication, reordering and delay
(``faults.Fault``): crash (the process is gone; its disk stays), restart (a new
incarnation from the disk), pause/resume (like SIGSTOP: arrivals queue in a bounded
socket buffer, timers do not fire), late start (join), graceful leave, partitions
(cut links, symmetric or one way), a full disk (the node's state record is refused:
it sends nothing until the newest record it was handed is written, as the daemon does;
``_persist``) and a clock step (the node's wall clock, which stamps and checks send
times, off by seconds or minutes for a while).

How a node reads the network: by default each arrival is received on its own and the
node's output pulled right after it. ``read_batching`` > 0 reads the way the daemon does
(``amcast.daemon.transport``, ``Daemon._on_datagrams``): an arrival at an idle node
wakes it ``U(0, read_batching)`` seconds later (the wake-up and the wait for a core);
everything that arrived by then is received in arrival order, up to ``READ_BATCH`` at a
time, and the output pulled once after each such batch (the daemon's one pump per loop
iteration). Arrivals at a paused node wait in its socket buffer and are read the same
way when it resumes. The engines must be correct under either; the sweeps run both.

Processes are ``(node, life)``: a restarted node is a new process. ``RunResult`` holds
every process's deliveries and installed views; ``checkers`` verify integrity,
agreement and virtual synchrony, total and causal order within and across views, no
delivery outside a primary view, that nothing a surviving sender accepted is lost or
duplicated, and liveness once the last fault has healed; ``own_ledger`` checks, event by
event, that a daemon counting its own messages in send order names the right ones.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import BackpressureError, DecodeError
from ..events import (
    BackpressureReleased,
    BatchDelivered,
    DatagramDropped,
    Event,
    FlushCompleted,
    MessagesInDoubt,
    OrderGap,
    ViewInstalled,
)
from ..membership.durable import DurableState
from ..node import Node
from ..node_config import NodeConfig
from ..ordering import DEFAULT_RULE
from ..swap.carry import CarriedTree
from ..vocabulary import DeliveryRule, ServiceLevel
from ..wire.codec import Kind
from ..wire.membership import ViewRecord
from .checkers import (
    Delivery,
    InstalledView,
    Proc,
    SentMessage,
    check_all,
)
from .faults import Fault
from .network import LinkFaults, NetworkConfig, SimNetwork
from .own_ledger import OwnLedger

DEFAULT_SERVICES: tuple[tuple[ServiceLevel, float], ...] = (
    (ServiceLevel.AGREED, 0.7),
    (ServiceLevel.CAUSAL, 0.15),
    (ServiceLevel.SAFE, 0.15),
)
PAUSE_BUFFER = 4096
"""Datagrams a paused node's socket buffer holds; later arrivals are lost."""
READ_BATCH = 256
"""Datagrams one read hands to the node (``read_batching``): the daemon's transport
reads at most this many per wake-up."""


def _swap_tree(node: Node, view_id: int) -> CarriedTree | None:
    """The swap tree ``node`` built for its view ``view_id`` (None: ToTo)."""
    session = node.membership.session
    if session is None or session.view_id != view_id or session.swap is None:
        return None
    return session.swap.carried


@dataclass(frozen=True, slots=True)
class Workload:
    messages_per_node: int = 20
    senders: int | None = None
    """The first ``senders`` nodes submit; ``None`` = all."""
    interval: float = 0.002
    """Mean seconds between one sender's submissions (exponential); 0 = saturate."""
    services: tuple[tuple[ServiceLevel, float], ...] = DEFAULT_SERVICES
    min_size: int = 16
    max_size: int = 200
    large_fraction: float = 0.05
    large_size: int = 5000
    """Size of the occasional large (fragmented) message, bytes."""


@dataclass(slots=True)
class RunResult:
    seed: int
    n: int
    end_time: float
    sent: list[SentMessage]
    logs: dict[int, list[Delivery]]
    violations: dict[str, list[str]]
    nodes: dict[int, Node]
    network: SimNetwork
    drops: dict[str, int] = field(default_factory=dict)
    repair_latencies: list[float] = field(default_factory=list)
    """Delivery latency of causal messages at nodes that lost the first copy."""
    clean_latencies: list[float] = field(default_factory=list)
    """Delivery latency of causal messages at nodes that got the first copy."""
    views: dict[Proc, list[InstalledView]] = field(default_factory=dict)
    faults: list[Fault] = field(default_factory=list)
    all_nodes: list[Node] = field(default_factory=list)
    """Every Node that ran (crashed and restarted ones too), for counters."""

    @property
    def ok(self) -> bool:
        return not any(self.violations.values())


class Cluster:
    def __init__(
        self,
        n: int,
        *,
        seed: int,
        node_config: NodeConfig | None = None,
        network: NetworkConfig | None = None,
        bootstrap: str = "agreed",
        start: Iterable[int] | None = None,
        node_configs: dict[int, NodeConfig] | None = None,
        impostors: dict[int, int] | None = None,
        wall_clock: float | None = None,
        read_batching: float = 0.0,
        cores: Sequence[str] | None = None,
    ) -> None:
        """``bootstrap="agreed"`` starts every node in view 1 of all ``n`` members;
        ``"join"`` starts them with no view, so they form the first one themselves.
        ``start`` lists the nodes running at t = 0 (default: all; others join later).
        ``node_configs`` gives some nodes their own config (a misconfigured daemon).
        ``impostors`` maps extra endpoint ids to the node id they claim (a second daemon
        with a duplicate or an unlisted id); they start with ``start``'s others, later,
        via a ``start`` fault naming the endpoint. ``wall_clock`` (seconds) makes
        incarnations start at the simulated wall clock in milliseconds, as the daemon's
        do, instead of 0. ``read_batching`` (seconds): read arrivals in batches, as the
        daemon does (module docstring); 0 receives each on its own. ``cores``: the data
        path's core of each endpoint, ``native`` or ``pure`` (``cores[i % len(cores)]``
        for endpoint ``i``): its node decodes, seals, opens and guards against replays
        with it (``Node``'s ``core`` and ``seal``); ``None``: ``AMCAST_CORE`` and
        ``AMCAST_SEAL`` decide for every node."""
        if read_batching < 0:
            raise ValueError("read_batching must not be negative")
        if cores is not None and (not cores or any(c not in ("native", "pure") for c in cores)):
            raise ValueError(f"cores must name native or pure, not {cores!r}")
        self.cores = tuple(cores) if cores is not None else None
        self.n = n
        self.seed = seed
        self.members = list(range(n))
        """Node ids of the potential members."""
        self.impostors = dict(impostors or {})
        self.endpoints = self.members + sorted(self.impostors)
        """Everything attached to the simulated network: nodes and impostors."""
        self.node_configs = dict(node_configs or {})
        self.wall_clock = wall_clock
        self.rng = random.Random(seed)
        cfg = node_config or NodeConfig(group_key=b"simulation-group-key")
        self.config = cfg
        self.now = 0.0
        self.bootstrap = bootstrap
        self.disk: dict[int, bytes] = {}
        self.clock_offsets: dict[int, float] = {}
        """Nodes whose host clock is off now (``clock_step`` faults in force), seconds."""
        self.disk_full: dict[int, int] = {}
        """Nodes whose disk refuses writes now (``disk_full`` faults in force, by node)."""
        self.unwritten: dict[int, bytes] = {}
        """The newest state record a running node was handed and its disk refused."""
        self.life: dict[int, int] = dict.fromkeys(self.members + sorted(impostors or {}), -1)
        self.nodes: dict[int, Node] = {}
        self.all_nodes: list[Node] = []
        self._timers: dict[int, float | None] = {}
        self.paused: dict[int, float] = {}
        self._pause_queue: dict[int, list[bytes]] = {}
        self.read_batching = read_batching
        self._inbox: dict[int, tuple[int, list[bytes]]] = {}
        """Arrivals waiting for their node's wake-up (``read_batching``), with the number
        of that wake-up (a read that came first, at a resume, makes it a no-op)."""
        self._wakes = 0
        self._read_rng = random.Random(seed * 6151 + 11)
        self.reads: dict[int, int] = dict.fromkeys(self.endpoints, 0)
        """Reads per node (``read_batching``): fewer than its arrivals when it batched."""
        self.blocked_links: set[tuple[int, int]] = set()
        self.network = SimNetwork(network or NetworkConfig(), self.endpoints,
                                  random.Random(seed * 7919 + 1))
        self._heap: list[tuple[float, int, int, bytes]] = []
        self._actions: list[tuple[float, int, Callable[[], None]]] = []
        self._counter = 0
        self.sent: list[SentMessage] = []
        self.logs: dict[int, list[Delivery]] = {i: [] for i in self.endpoints}
        self.proc_logs: dict[Proc, list[Delivery]] = {}
        self._got: dict[Proc, set[bytes]] = {}
        self.views: dict[Proc, list[InstalledView]] = {}
        self.in_doubt: dict[Proc, set[bytes]] = {}
        self.beyond_cut: dict[Proc, set[bytes]] = {}
        """Of ``in_doubt``, those reported as beyond a cut the member knew."""
        self.gaps: dict[Proc, list[OrderGap]] = {}
        self.ended: dict[Proc, float] = {}
        self.closed_by_leaving: dict[Proc, int] = {}
        """Graceful leavers that completed the flush of their last view (that view)."""
        """Processes that crashed or left, with the time."""
        self._known: dict[int, int] = dict.fromkeys(self.endpoints, 0)  # causal past per node
        self._by_payload: dict[bytes, SentMessage] = {}
        self.safe_violations: list[str] = []
        self.own_ledger = OwnLedger()
        """Own messages per process as a daemon counts them (``own_ledger``)."""
        self.drops: dict[str, int] = {}
        self.blocked = dict.fromkeys(self.endpoints, False)
        self.other_events: dict[int, list[Event]] = {i: [] for i in self.endpoints}
        """Every event but deliveries, per node (drops, backpressure, views)."""
        self.track_losses = False
        self._lost_first: set[tuple[int, int, int]] = set()  # (dst, origin, seq)
        self.repair_latencies: list[float] = []
        self.clean_latencies: list[float] = []
        self.link_filter: Callable[[int, int, bytes], bool] | None = None
        """Tests: ``filter(src, dst, datagram)`` returning False drops that copy."""
        self.faults: list[Fault] = []
        self.last_fault_at = 0.0
        self._load_rng = random.Random(seed * 31 + 7)
        self._decode_cache: dict[bytes, Any] = {}
        self._submitted: dict[int, int] = dict.fromkeys(self.endpoints, 0)
        initial = None
        if bootstrap == "agreed":
            initial = ViewRecord.agreed(self.members)
        elif bootstrap != "join":
            raise ValueError(f"bootstrap must be 'agreed' or 'join', not {bootstrap!r}")
        for i in self.members if start is None else start:
            self._start(i, initial)

    def apply(self, fault: Fault) -> None:
        """Apply ``fault`` now (tests that react to what they see)."""
        self.faults.append(fault)
        self._apply(fault)

    def inject(self, dst: int, data: bytes, delay: float = 0.0) -> None:
        """Deliver ``data`` to ``dst`` after ``delay`` (a replayed or forged datagram)."""
        self._counter += 1
        heapq.heappush(self._heap, (self.now + delay, self._counter, dst, data))

    # ------------------------------------------------------------------ processes

    def proc(self, i: int) -> Proc:
        return Proc(i, self.life[i])

    def core_of(self, i: int) -> str | None:
        """Endpoint ``i``'s core (``cores``; ``None``: the environment's)."""
        return None if self.cores is None else self.cores[i % len(self.cores)]

    def _start(self, i: int, initial: ViewRecord | None = None) -> None:
        self.life[i] += 1
        node_id = self.impostors.get(i, i)
        durable = None
        if i in self.disk:
            durable = DurableState.decode(self.disk[i], node_id)
        clock = self.clock_offsets.get(i, 0.0)  # the host's clock, off during a clock_step
        floor = (0 if self.wall_clock is None
                 else int((self.wall_clock + self.now + clock) * 1000))
        listed = self.members if node_id in self.members else sorted([*self.members, node_id])
        node = Node(self.node_configs.get(i, self.config), node_id=node_id,
                    members=listed,
                    rng=random.Random(self.seed * 1000 + i + 7 * self.life[i]), now=self.now,
                    durable=durable, incarnation_floor=floor,
                    initial_view=None if i in self.impostors else initial,
                    # deterministic, and distinct for every start of every endpoint
                    session=random.Random(f"session/{self.seed}/{i}/{self.life[i]}").randbytes(16),
                    wall_offset=(self.wall_clock or 0.0) + clock,
                    core=self.core_of(i), seal=self.core_of(i))
        self.nodes[i] = node
        self.all_nodes.append(node)
        proc = self.proc(i)
        self.proc_logs[proc] = []
        self._got[proc] = set()
        self.views[proc] = []
        if initial is not None:
            self.views[proc].append(InstalledView(self.now, initial.view_id, initial.nodes, 0,
                                                  len(initial.potential),
                                                  _swap_tree(node, initial.view_id)))
        self._known[i] = 0
        self.blocked[i] = False
        self._after(i)

    def _end(self, i: int) -> None:
        self.ended[self.proc(i)] = self.now
        self.own_ledger.forget(self.proc(i))
        del self.nodes[i]
        self.unwritten.pop(i, None)  # a record in memory only dies with its process
        self._timers.pop(i, None)
        self.paused.pop(i, None)
        self._pause_queue.pop(i, None)
        self._inbox.pop(i, None)

    # ------------------------------------------------------------------ faults

    def schedule(self, fault: Fault) -> None:
        """Apply ``fault`` at its time (``faults.Fault``)."""
        self.faults.append(fault)
        self.last_fault_at = max(self.last_fault_at, fault.at + fault.duration)
        self._at(fault.at, lambda: self._apply(fault))

    def _at(self, t: float, action: Callable[[], None]) -> None:
        self._counter += 1
        heapq.heappush(self._actions, (t, self._counter, action))

    def _apply(self, fault: Fault) -> None:
        kind, nodes = fault.kind, fault.nodes
        if kind == "crash":
            for i in nodes:
                if i in self.nodes:
                    self._end(i)
        elif kind == "restart":
            for i in nodes:
                if i in self.nodes:
                    self._end(i)
                self._start(i)
        elif kind == "lose_state":  # its state directory lost: it starts with none
            for i in nodes:
                self.disk.pop(i, None)
                if i in self.nodes:
                    self._end(i)
                    self._start(i)
        elif kind == "start":
            for i in nodes:
                if i in self.nodes and self.nodes[i].leaving_started:
                    self._end(i)  # a leave that has not finished: it stops, then starts
                if i not in self.nodes:
                    self._start(i)
        elif kind == "pause":
            for i in nodes:
                if i in self.nodes:
                    self.paused[i] = self.now + fault.duration
                    self._pause_queue[i] = []
                    self._at(self.now + fault.duration, lambda i=i: self._resume(i))
        elif kind == "leave":
            for i in nodes:
                if i in self.nodes:
                    self.nodes[i].leave(self.now)
                    self._after(i)
                    deadline = self.now + fault.duration
                    self._at(deadline, lambda i=i: self._stop_leaver(i))
        elif kind == "partition":
            cut = fault.links(self.members)
            self.blocked_links |= cut
            self._at(self.now + fault.duration, lambda cut=cut: self._heal(cut))
        elif kind == "disk_full":
            for i in nodes:
                self.disk_full[i] = self.disk_full.get(i, 0) + 1
                self._at(self.now + fault.duration, lambda i=i: self._disk_freed(i))
        elif kind == "clock_step":
            for i in nodes:
                self._set_clock(i, fault.offset)
                self._at(self.now + fault.duration, lambda i=i: self._set_clock(i, 0.0))
        else:  # pragma: no cover - Fault validates its kind
            raise ValueError(kind)

    def _set_clock(self, i: int, offset: float) -> None:
        """Node ``i``'s host clock is ``offset`` seconds off from now on (``clock_step``):
        its running process sees it at once, a later start too."""
        if offset:
            self.clock_offsets[i] = offset
        else:
            self.clock_offsets.pop(i, None)
        node = self.nodes.get(i)
        if node is not None:
            node.wall_offset = (self.wall_clock or 0.0) + offset

    def _heal(self, cut: set[tuple[int, int]]) -> None:
        self.blocked_links -= cut

    def _disk_freed(self, i: int) -> None:
        left = self.disk_full[i] - 1
        if left:
            self.disk_full[i] = left
            return
        del self.disk_full[i]
        if i in self.nodes and i not in self.paused and i in self.unwritten:
            self._after(i)  # the daemon's own retry of the write, with no input needed

    def _persist(self, i: int) -> bool:
        """Write ``i``'s unwritten record unless its disk refuses it; ``False``: nothing
        of this step may be sent (``Daemon._persist_state``)."""
        if self.disk_full.get(i):
            return False
        self.disk[i] = self.unwritten.pop(i)
        return True

    def _resume(self, i: int) -> None:
        if i not in self.paused:
            return
        del self.paused[i]
        node = self.nodes[i]
        node.handle_timer(self.now)  # the process notices the time it lost first
        self._after(i)
        queue = self._pause_queue.pop(i, [])
        if self.read_batching > 0.0:  # what arrived before the pause is read first
            _, waiting = self._inbox.pop(i, (0, []))
            self._receive_batches(i, waiting + queue)
            return
        for data in queue:
            if i not in self.nodes:
                return
            node.receive_datagram(data, self.now)
            self._after(i)

    def _queue_read(self, i: int, data: bytes) -> None:
        """An arrival at ``i`` under ``read_batching``: read at its next wake-up."""
        pending = self._inbox.get(i)
        if pending is not None:  # a wake-up is due: read with the others
            if len(pending[1]) < PAUSE_BUFFER:  # the socket buffer's bound
                pending[1].append(data)
            return
        self._wakes += 1
        wake = self._wakes
        self._inbox[i] = (wake, [data])
        self._at(self.now + self._read_rng.uniform(0.0, self.read_batching),
                 lambda: self._wake(i, wake))

    def _wake(self, i: int, wake: int) -> None:
        pending = self._inbox.get(i)
        if pending is None or pending[0] != wake:
            return  # read already (a resume) or gone with its process
        del self._inbox[i]
        inbox = pending[1]
        if i in self.paused:  # stopped before it woke: still in the socket, ahead
            self._pause_queue[i] = (inbox + self._pause_queue[i])[:PAUSE_BUFFER]
            return
        self._receive_batches(i, inbox)

    def _receive_batches(self, i: int, arrivals: list[bytes]) -> None:
        """``arrivals`` received in order, the output pulled once per ``READ_BATCH``."""
        for start in range(0, len(arrivals), READ_BATCH):
            node = self.nodes.get(i)
            if node is None:
                return  # it left (``_after`` ended it)
            for data in arrivals[start:start + READ_BATCH]:
                node.receive_datagram(data, self.now, decoded=self._decoded(node, data))
            self.reads[i] += 1
            self._after(i)

    def _stop_leaver(self, i: int) -> None:
        if i in self.nodes and self.nodes[i].leaving_started:
            self._end(i)

    # ------------------------------------------------------------------ plumbing

    def _after(self, i: int) -> None:
        node = self.nodes.get(i)
        if node is None:
            return
        state = node.state_to_persist()
        if state is not None:  # supersedes an older record still unwritten
            self.unwritten[i] = state
        if i in self.unwritten and not self._persist(i):
            held = node.datagrams_to_send()  # as if lost: the protocols resend
            self.drops["state_unwritable"] = self.drops.get("state_unwritable", 0) + len(held)
            outgoing: list[bytes] = []
        else:
            outgoing = node.datagrams_to_send()
        for data in outgoing:
            arrivals, lost = self.network.multicast(i, data, self.now)
            if lost and self.track_losses:
                self._note_losses(i, data, lost)
            for at, dst in arrivals:
                if (i, dst) in self.blocked_links:
                    continue
                if self.link_filter is not None and not self.link_filter(i, dst, data):
                    continue
                self._counter += 1
                heapq.heappush(self._heap, (at, self._counter, dst, data))
        proc = self.proc(i)
        for ev in node.events():
            if isinstance(ev, BatchDelivered):
                self._delivered(i, proc, ev)
                continue
            self.other_events[i].append(ev)
            if isinstance(ev, BackpressureReleased):
                self.blocked[i] = False
            elif isinstance(ev, DatagramDropped):
                self.drops[ev.reason] = self.drops.get(ev.reason, 0) + 1
            elif isinstance(ev, ViewInstalled):
                view = node.view
                assert view is not None
                self.views[proc].append(InstalledView(self.now, ev.view, ev.members,
                                                      ev.previous, len(view.potential),
                                                      _swap_tree(node, ev.view)))
            elif isinstance(ev, MessagesInDoubt):
                self.in_doubt.setdefault(proc, set()).update(ev.payloads, ev.delivered_here)
                if ev.cut_known:
                    self.beyond_cut.setdefault(proc, set()).update(ev.payloads,
                                                                   ev.delivered_here)
                self.own_ledger.consume(proc, ev.delivered_elsewhere, "delivered elsewhere")
                self.own_ledger.consume(proc, ev.payloads, "in doubt")
            elif isinstance(ev, OrderGap):
                self.gaps.setdefault(proc, []).append(ev)
            elif (isinstance(ev, FlushCompleted) and node.leaving_started
                    and node.view is not None and ev.view == node.view.view_id):
                self.closed_by_leaving[proc] = ev.view
        if node.left and i in self.nodes:
            self._end(i)
            return
        self._timers[i] = node.next_timer()  # after the flush, which moves timers too

    def _decoded(self, node: Node, data: bytes) -> Any:
        """The datagram decoded once for every receiver (same key, same limits), or
        ``None`` to let the receiver decode (and count) a datagram that fails to decode."""
        if node.config is not self.config and node.config.keys() != self.config.keys():
            return None  # a node with other keys decodes (and drops) for itself
        cache = self._decode_cache
        # each core decodes for its own nodes (a mixed cluster: ``cores``)
        key: Any = data if self.cores is None else (tuple(node.core.values()), data)
        if key in cache:
            return cache[key]
        try:
            dg = node.unseal(data)
        except DecodeError:
            dg = None
        if len(cache) > 4096:
            cache.clear()
        cache[key] = dg
        return dg

    def _note_losses(self, src: int, data: bytes, lost: list[int]) -> None:
        dg = self.nodes[src].peek(data)
        if dg.kind is Kind.DATA:
            v = dg.vertices[0]  # type: ignore[union-attr]
            for dst in lost:
                self._lost_first.add((dst, v.origin, v.seq))

    def _delivered(self, i: int, proc: Proc, ev: BatchDelivered) -> None:
        known = self._known[i]
        node = self.nodes[i]
        view = node.view
        # delivered by a view's flush: a member's once it installed the next view, a
        # graceful leaver's as it closes its last view (it installs none after it)
        closing = view is None or view.view_id != ev.view or node.left
        if ev.service is ServiceLevel.SAFE and ev.rule is not DeliveryRule.FLUSH and not closing:
            late = []
            for j, other in self.nodes.items():
                released = other.released(ev.view)
                if released is not None and other.primary and released[ev.sender] < ev.seq:
                    late.append(j)
            if late:
                self.safe_violations.append(
                    f"node {i} delivered safe ({ev.sender}, {ev.seq}) of view {ev.view} "
                    f"before nodes {late} had it"
                )
        if ev.service is ServiceLevel.CAUSAL and i != ev.sender:
            latency = self.now - ev.send_ts
            if (i, ev.sender, ev.seq) in self._lost_first:
                self.repair_latencies.append(latency)
            else:
                self.clean_latencies.append(latency)
        if ev.sender == node.node_id:
            self.own_ledger.consume(proc, ev.payloads, f"delivery of own ({ev.view}, {ev.seq})")
        log = self.logs[i]
        plog = self.proc_logs[proc]
        self._got[proc].update(ev.payloads)
        for k, payload in enumerate(ev.payloads):
            position = None if ev.position is None else ev.position + k
            d = Delivery(ev.sender, payload, ev.service, position, self.now, ev.view)
            log.append(d)
            plog.append(d)
            m = self._by_payload.get(payload)
            if m is not None:
                known |= (1 << m.index) | m.past
        self._known[i] = known

    def submit(self, i: int, payload: bytes, service: ServiceLevel) -> bool:
        node = self.nodes[i]
        try:
            node.submit(payload, self.now, service=service)
        except BackpressureError:
            self.blocked[i] = True
            self._after(i)
            return False
        m = SentMessage(len(self.sent), i, payload, service, self._known[i], self.proc(i),
                        self.now)
        self.sent.append(m)
        self._by_payload[payload] = m
        self.own_ledger.submitted(m.proc, payload)
        self._known[i] |= 1 << m.index
        self._after(i)
        return True

    # ------------------------------------------------------------------ the loop

    def _next(self, extra: float = math.inf) -> tuple[float, str, int]:
        """The earliest pending event: (time, kind, node)."""
        t, kind, target = extra, "", -1
        if self._heap and self._heap[0][0] < t:
            t, kind = self._heap[0][0], "net"
        if self._actions and self._actions[0][0] < t:
            t, kind = self._actions[0][0], "action"
        paused = self.paused
        for i, nt in self._timers.items():
            if nt is not None and nt < t and i not in paused:
                t, kind, target = nt, "timer", i
        return t, kind, target

    def _step(self, t: float, kind: str, target: int) -> None:
        self.now = max(self.now, t)
        if kind == "net":
            _, _, dst, data = heapq.heappop(self._heap)
            node = self.nodes.get(dst)
            if node is None:
                return
            if dst in self.paused:
                queue = self._pause_queue[dst]
                if len(queue) < PAUSE_BUFFER:
                    queue.append(data)
                return
            if self.read_batching > 0.0:
                self._queue_read(dst, data)
                return
            node.receive_datagram(data, self.now, decoded=self._decoded(node, data))
            self._after(dst)
        elif kind == "action":
            _, _, action = heapq.heappop(self._actions)
            action()
        else:
            self.nodes[target].handle_timer(self.now)
            self._after(target)

    def run(self, workload: Workload, *, max_time: float = 30.0,
            settle: float = 0.0) -> RunResult:
        """Submit the workload, apply the scheduled faults, and stop once every live node
        delivered everything it should (or at ``max_time``); then check everything.
        ``settle``: keep running this long after the last fault before stopping early."""
        rng = self._load_rng  # a second run continues the workload (fresh payloads)
        senders = self.members[: workload.senders] if workload.senders else self.members
        remaining = dict.fromkeys(senders, workload.messages_per_node)
        next_submit = {i: self.now + self._gap(rng, workload) for i in senders}
        counters = self._submitted
        services = [s for s, _ in workload.services]
        weights = [w for _, w in workload.services]
        spins = 0
        last_t = -1.0
        check_at = 0.0
        while True:
            t_sub, who = math.inf, -1
            for i, at in next_submit.items():
                if (remaining[i] and at < t_sub and i in self.nodes and i not in self.paused
                        and not self.blocked[i]):
                    t_sub, who = at, i
            t, kind, target = self._next(t_sub)
            if t == t_sub and who >= 0:
                kind, target = "submit", who
            if not kind or t > max_time:
                break
            spins = spins + 1 if t == last_t else 0
            if spins > 100_000:
                raise RuntimeError(f"simulation stuck at t={t} on {kind} {target}")
            last_t = t
            if kind == "submit":
                self.now = max(self.now, t)
                i = target
                service = rng.choices(services, weights)[0]
                size = (workload.large_size if rng.random() < workload.large_fraction
                        else rng.randint(workload.min_size, workload.max_size))
                header = f"{i}:{self.life[i]}:{counters[i]}:".encode()
                body = rng.randbytes(max(0, size - len(header)))
                if self.submit(i, header + body, service):
                    counters[i] += 1
                    remaining[i] -= 1
                    next_submit[i] = self.now + self._gap(rng, workload)
            else:
                self._step(t, kind, target)
            if (self.now >= check_at and not any(remaining.values())
                    and self.now >= self.last_fault_at + settle and self._quiescent()):
                break
            if self.now >= check_at:
                check_at = self.now + 0.05
        return self.result()

    def _quiescent(self) -> bool:
        """Every live node is in the same primary view and every own message of every
        live node is delivered everywhere (nothing queued, nothing unstable)."""
        nodes = {i: nd for i, nd in self.nodes.items() if i not in self.impostors}
        if not nodes or self.paused or self._actions:
            return False
        views = {nd.view.view_id if nd.view else 0 for nd in nodes.values()}
        if len(views) != 1 or not all(nd.primary for nd in nodes.values()):
            return False
        view = next(iter(nodes.values())).view
        assert view is not None
        if {(m.node, m.incarnation) for m in view.members} != {
            (i, nd.incarnation) for i, nd in nodes.items()
        }:
            return False  # a crashed member is still in the view, or one is missing
        return all(nd.outstanding == 0 and nd.undelivered == 0 for nd in nodes.values())

    def result(self) -> RunResult:
        real = {p: log for p, log in self.proc_logs.items() if p.node not in self.impostors}
        violations = check_all(
            self.sent, real, {p: v for p, v in self.views.items() if p in real},
            ended=self.ended, in_doubt=self.in_doubt, beyond_cut=self.beyond_cut,
            live={self.proc(i) for i in self.nodes if i not in self.impostors},
            potential=tuple(self.members), last_fault_at=self.last_fault_at,
            expected_votes=self.config.expected_votes,
            closed_by_leaving=self.closed_by_leaving,
        )
        violations["safe_stability"] = self.safe_violations
        violations["own_accounting"] = self.own_ledger.violations
        return RunResult(
            self.seed, self.n, self.now, self.sent, self.logs, violations, self.nodes,
            self.network, dict(self.drops), self.repair_latencies, self.clean_latencies,
            dict(self.views), list(self.faults), list(self.all_nodes),
        )

    def advance(self, until: float) -> None:
        """Process arrivals, timers and faults (no submissions) up to virtual time ``until``."""
        while True:
            t, kind, target = self._next()
            if not kind or t > until:
                self.now = max(self.now, until)
                return
            self._step(t, kind, target)

    @staticmethod
    def _gap(rng: random.Random, workload: Workload) -> float:
        return rng.expovariate(1.0 / workload.interval) if workload.interval > 0 else 0.0


# ---------------------------------------------------------------------- sweeps


@dataclass(frozen=True, slots=True)
class SweepPoint:
    seed: int
    n: int
    loss: float
    duplicate: float
    reorder: float
    slow_node: bool = False
    asymmetric: bool = False


def sweep_points(seeds: Iterable[int], *, n_range: tuple[int, int] = (3, 8),
                 max_loss: float = 0.2, duplicate: float = 0.2, reorder: float = 0.2,
                 slow_every: int = 5, asymmetric_every: int = 7) -> list[SweepPoint]:
    """Seeds spread over cluster sizes and loss rates; every k-th has a slow node / bad link."""
    points = []
    lo, hi = n_range
    for k, seed in enumerate(seeds):
        n = lo + k % (hi - lo + 1)
        loss = max_loss * ((k * 7) % 11) / 10
        points.append(SweepPoint(seed, n, min(loss, max_loss), duplicate, reorder,
                                 slow_every > 0 and k % slow_every == 1,
                                 asymmetric_every > 0 and k % asymmetric_every == 3))
    return points


def point_network(point: SweepPoint) -> NetworkConfig:
    faults = LinkFaults(loss=point.loss, duplicate=point.duplicate, reorder=point.reorder)
    links = {}
    if point.asymmetric:
        links[(0, point.n - 1)] = replace(faults, loss=min(0.5, point.loss + 0.3), delay=0.002)
    return NetworkConfig(default=faults, links=links,
                         slow_node=point.n - 1 if point.slow_node else None)


def run_point(point: SweepPoint, workload: Workload, node_config: NodeConfig | None = None,
              *, max_time: float = 60.0, read_batching: float = 0.0) -> RunResult:
    cluster = Cluster(point.n, seed=point.seed, node_config=node_config,
                      network=point_network(point), read_batching=read_batching)
    return cluster.run(workload, max_time=max_time)


def run_cluster_simulation(
    seeds: Sequence[int],
    *,
    n_range: tuple[int, int] = (3, 8),
    max_loss: float = 0.2,
    duplicate: float = 0.2,
    reorder: float = 0.2,
    messages_per_node: int = 10,
    rule: str = DEFAULT_RULE.value,
    slow_node: bool = True,
    asymmetric: bool = True,
    max_time: float = 60.0,
    read_batching: float = 0.0,
    progress: Callable[[str], None] | None = None,
) -> dict:
    """Run one cluster per seed and check every safety property; return a report dict.

    ``progress`` (if given) receives a line every tenth of the sweep and on each failure.
    ``read_batching``: nodes read arrivals in batches, as the daemon does (``Cluster``).
    """
    cfg = NodeConfig(group_key=b"simulation-group-key", rule=rule)
    workload = Workload(messages_per_node=messages_per_node)
    points = sweep_points(seeds, n_range=n_range, max_loss=max_loss, duplicate=duplicate,
                          reorder=reorder, slow_every=5 if slow_node else 0,
                          asymmetric_every=7 if asymmetric else 0)
    failures: list[str] = []
    totals = {"messages": 0, "datagrams": 0, "lost": 0, "retransmissions": 0, "views": 0}
    step = max(1, len(points) // 10)
    for k, point in enumerate(points, 1):
        result = run_point(point, workload, cfg, max_time=max_time,
                           read_batching=read_batching)
        totals["messages"] += len(result.sent)
        totals["datagrams"] += result.network.stats.multicasts
        totals["lost"] += result.network.stats.lost
        totals["retransmissions"] += sum(nd.stats.retransmissions for nd in result.all_nodes)
        totals["views"] += sum(nd.stats.views_installed for nd in result.all_nodes)
        for prop, found in result.violations.items():
            for violation in found[:3]:
                failures.append(f"seed {point.seed} n={point.n} loss={point.loss:.2f}: "
                                f"{prop}: {violation}")
        if progress and (k % step == 0 or k == len(points) or not result.ok):
            state = "ok" if result.ok else "VIOLATION"
            progress(f"{k}/{len(points)} seeds (seed {point.seed}, n={point.n}, "
                     f"loss {point.loss:.0%}): {state}; {len(failures)} violations so far")
    return {
        "title": f"cluster simulation: {len(points)} seeds, n {n_range[0]}..{n_range[1]}, "
                 f"loss 0..{max_loss:.0%}, dup {duplicate:.0%}, reorder {reorder:.0%}, "
                 f"rule {rule}" + batching_title(read_batching),
        "figures": {
            "seeds": len(points),
            "seeds failed": len({f.split(' ')[1] for f in failures}),
            "messages submitted": totals["messages"],
            "datagrams multicast": totals["datagrams"],
            "copies lost": totals["lost"],
            "retransmissions": totals["retransmissions"],
            "views installed after the first": totals["views"],
        },
        "notes": failures[:50] or ["integrity, validity, agreement, virtual synchrony, total "
                                   "order, causal order, safe stability and own-message "
                                   "accounting held on every seed"],
        "ok": not failures,
    }


def batching_title(read_batching: float) -> str:
    """How the sweep's nodes read, for its title (nothing for the default)."""
    if read_batching <= 0.0:
        return ""
    return f", reads batched as a daemon's (wake-up within {read_batching * 1000:g} ms)"
