"""A seeded, virtual-time causal broadcast among n processors: the DAG the engine sees.

Theory of operation (ToTo paper, sections 1, 2 and 7). Every processor sends data
messages as a Poisson process; a message is broadcast to all others, each copy with its
own random delay drawn from the topology (a bus, or two LANs joined by a slow gateway),
so copies overtake each other. A receiver releases a message once its sender's previous
message and everything it acknowledges have been released (causal delivery), and only
then lets the engine see it. A message acknowledges what its sender released since its
previous message (compact acks); a processor that holds released data messages it has
not acknowledged and sends nothing for ``ack_delay`` emits an ack-only message
(ack-only messages never trigger one), so the last messages get their votes.

The network is reliable here (loss and repair belong to the reliable layer). Because
the DAG depends only on the network, never on the ordering rule, one run produces a
``Trace`` (each processor's causal release order with times) that every rule replays:
comparisons between rules are made on the very same DAG and reveal orders.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, field

from ..ordering.messages import CausalMessage, MessageId


@dataclass(frozen=True, slots=True)
class Topology:
    """Per-copy delay = ``base + exponential(mean jitter)``, seconds; two LANs when
    ``lans == 2``: copies between them cross a gateway adding ``gateway`` seconds.
    ``slow`` processors see every delay to and from them multiplied by ``slow_factor``."""

    base: float = 0.001
    jitter: float = 0.002
    lans: int = 1
    gateway: float = 0.0
    slow: tuple[int, ...] = ()
    slow_factor: float = 10.0

    def delay(self, rng: random.Random, src: int, dst: int, n: int) -> float:
        d = self.base + rng.expovariate(1.0 / self.jitter) if self.jitter > 0 else self.base
        if self.lans == 2 and (src < n // 2) != (dst < n // 2):
            d += self.gateway
        if src in self.slow or dst in self.slow:
            d *= self.slow_factor
        return d


@dataclass(frozen=True, slots=True)
class Workload:
    """``rate`` data messages per second per sender for ``duration`` virtual seconds."""

    n: int = 8
    rate: float = 50.0
    duration: float = 10.0
    senders: tuple[int, ...] | None = None  # None: every processor sends
    ack_delay: float = 0.02


@dataclass
class Trace:
    """What each processor's engine is fed: ``releases[p]`` is p's causal release order
    as ``(virtual time, message)``; ``sent_at`` the send time of every message and
    ``clocks`` its vector clock (latest seq of each sender it causally follows)."""

    n: int
    releases: list[list[tuple[float, CausalMessage]]]
    sent_at: dict[MessageId, float] = field(default_factory=dict)
    clocks: dict[MessageId, list[int]] = field(default_factory=dict)  # vector clocks
    data_ids: set[MessageId] = field(default_factory=set)
    data_messages: int = 0
    ack_only_messages: int = 0


class _Processor:
    __slots__ = ("ack_timer", "acked", "index", "released", "seq", "waiting")

    def __init__(self, index: int, n: int) -> None:
        self.index = index
        self.seq = 0
        self.released = [0] * n  # highest seq released per sender
        self.acked = [0] * n  # what our previous message acknowledged
        self.waiting: list[dict[int, list[CausalMessage]]] = [{} for _ in range(n)]
        self.ack_timer: float | None = None


def simulate(workload: Workload, topology: Topology, seed: int) -> Trace:
    """Run the network until every message is released everywhere and ack-only traffic
    has died down; return the trace."""
    n = workload.n
    rng = random.Random(seed)
    procs = [_Processor(i, n) for i in range(n)]
    trace = Trace(n=n, releases=[[] for _ in range(n)])
    events: list[tuple[float, int, int, int, object]] = []  # (time, tiebreak, kind, proc, data)
    counter = 0
    send, arrive, ack_due = 0, 1, 2
    senders = range(n) if workload.senders is None else workload.senders
    for p in senders:
        t = rng.expovariate(workload.rate)
        counter += 1
        events.append((t, counter, send, p, None))
    heapq.heapify(events)

    def release(proc: _Processor, msg: CausalMessage, now: float) -> None:
        nonlocal counter
        ready = [msg]
        while ready:
            m = ready.pop()
            proc.released[m.sender] = m.seq
            trace.releases[proc.index].append((now, m))
            if m.payload is not None and m.sender != proc.index and proc.ack_timer is None:
                proc.ack_timer = now + workload.ack_delay
                counter += 1
                heapq.heappush(events, (proc.ack_timer, counter, ack_due, proc.index, None))
            woken = proc.waiting[m.sender].pop(m.seq, None)
            if woken:
                for w in woken:
                    blocker = _blocker(proc, w)
                    if blocker is None:
                        ready.append(w)
                    else:
                        proc.waiting[blocker[0]].setdefault(blocker[1], []).append(w)

    def broadcast(proc: _Processor, payload: object, now: float) -> None:
        nonlocal counter
        proc.seq += 1
        me = proc.index
        acks = tuple(
            (q, proc.released[q])
            for q in range(n)
            if q != me and proc.released[q] > proc.acked[q]
        )
        proc.acked = list(proc.released)
        msg = CausalMessage(me, proc.seq, acks, payload)
        clock = list(proc.released)
        clock[me] = proc.seq
        trace.clocks[msg.id] = clock
        trace.sent_at[msg.id] = now
        if payload is None:
            trace.ack_only_messages += 1
        else:
            trace.data_messages += 1
            trace.data_ids.add(msg.id)
        proc.ack_timer = None
        release(proc, msg, now)
        for q in range(n):
            if q != me:
                counter += 1
                when = now + topology.delay(rng, me, q, n)
                heapq.heappush(events, (when, counter, arrive, q, msg))

    while events:
        now, _, kind, p, data = heapq.heappop(events)
        proc = procs[p]
        if kind == send:
            broadcast(proc, f"{p}:{proc.seq + 1}", now)
            nxt = now + rng.expovariate(workload.rate)
            if nxt < workload.duration:
                counter += 1
                heapq.heappush(events, (nxt, counter, send, p, None))
        elif kind == arrive:
            msg = data
            assert isinstance(msg, CausalMessage)
            blocker = _blocker(proc, msg)
            if blocker is None:
                release(proc, msg, now)
            else:
                proc.waiting[blocker[0]].setdefault(blocker[1], []).append(msg)
        elif proc.ack_timer is not None and proc.ack_timer <= now:
            broadcast(proc, None, now)
    return trace


def _blocker(proc: _Processor, msg: CausalMessage) -> tuple[int, int] | None:
    """The first (sender, seq) that must be released before ``msg``, or None."""
    released = proc.released
    if released[msg.sender] != msg.seq - 1:
        return (msg.sender, msg.seq - 1)
    for q, x in msg.acks:
        if released[q] < x:
            return (q, x)
    return None
