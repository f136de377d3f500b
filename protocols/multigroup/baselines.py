"""The other rows of Table 2 (Scalable Atomic Multicast, section 5.2), as failure-free
models counted at unit link delay.

Section 5.2 compares SCALATOM with archetypes of total order *broadcast*, each in its
best case (no failure, no suspicion): every one of the n processes takes part, whatever
the number d of addressees. Each model here is the failure-free path of its class, run
message by message by ``count`` (every datagram takes one time unit, so a delivery
time is a number of communication steps):

- **fixed sequencer** (sequencer-site, perfect failure detection): the sender
  broadcasts m; the sequencer (process 0) broadcasts its sequence number; a process
  delivers m once it has both. 2 steps, ``2(n-1)`` messages; 1 step and ``n-1``
  messages when the sender is the sequencer (the paper's bracket).
- **symmetric** (Lamport's timestamps; ToTo and the DKM93 class, the ToTo paper's
  ordering engine): the sender broadcasts m with its timestamp; a process delivers m
  once it has heard from every other process with a later timestamp, so every
  receiver broadcasts an acknowledgement when it has nothing of its own to send. 2
  steps, ``(n-1) + (n-1)^2 = n(n-1)`` messages; the paper writes ``(n-1) [+ n(n-1)]``
  (its bracket counts n senders of acknowledgements, the sender included; here the
  sender's own m serves as its acknowledgement).
- **Chandra-Toueg** (broadcast, ◇S): reliable broadcast of m (the sender sends ``n-1``,
  each receiver relays to the ``n-2`` others: ``(n-1)^2``), then the rotating
  coordinator consensus of ``consensus.py`` on the batch (proposal, acknowledgements,
  decision relayed: ``2(n-1) + (n-1)^2``). 4 steps when the sender is not the first
  coordinator; 3 when it is (the coordinator proposes as soon as it R-delivers m).

Headers are fixed-width (``header_bytes``): a message id, a timestamp or sequence
number, a round. The paper's ``f(n)`` for Chandra-Toueg comes from the consensus
deciding a *set* of messages (every message not yet ordered), which one multicast does
not show.
"""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .consensus import ConsensusInstance
from .messages import ConsensusMessage, MsgId
from .messages import header_bytes as consensus_header_bytes

MID: MsgId = (0, 0)


@dataclass(frozen=True, slots=True)
class Bcast:
    """m with the sender's timestamp (symmetric), or bare (sequencer, Chandra-Toueg)."""

    ts: int = 0


@dataclass(frozen=True, slots=True)
class SeqNo:
    """The sequencer's number for m."""

    seq: int


@dataclass(frozen=True, slots=True)
class TsAck:
    """A symmetric process's acknowledgement: its clock, above m's timestamp."""

    ts: int


BaselineMessage = Bcast | SeqNo | TsAck | ConsensusMessage
Sends = list[tuple[int, BaselineMessage]]


def header_bytes(msg: BaselineMessage) -> int:
    """Kind (1) and message id (8), and a timestamp or sequence number (8)."""
    if isinstance(msg, (Bcast, SeqNo, TsAck)):
        return 1 + 8 + 8
    return consensus_header_bytes(msg)


class _Process:
    def __init__(self, pid: int, n: int) -> None:
        self.pid = pid
        self.n = n
        self.delivered = False

    def others(self, *but: int) -> list[int]:
        return [p for p in range(self.n) if p != self.pid and p not in but]

    def start(self) -> Sends:
        raise NotImplementedError

    def receive(self, src: int, msg: BaselineMessage) -> Sends:
        raise NotImplementedError


class Sequencer(_Process):
    def __init__(self, pid: int, n: int) -> None:
        super().__init__(pid, n)
        self.has_data = self.has_seq = False

    def _got_data(self) -> Sends:
        self.has_data = True
        out: Sends = []
        if self.pid == 0:
            self.has_seq = True
            out = [(p, SeqNo(1)) for p in self.others()]
        self.delivered = self.has_seq
        return out

    def start(self) -> Sends:
        return [(p, Bcast()) for p in self.others()] + self._got_data()

    def receive(self, src: int, msg: BaselineMessage) -> Sends:
        if isinstance(msg, SeqNo):
            self.has_seq = True
            self.delivered = self.has_data
            return []
        return self._got_data()


class Symmetric(_Process):
    def __init__(self, pid: int, n: int) -> None:
        super().__init__(pid, n)
        self.clock = 0
        self.ts_m: int | None = None
        self.sender = -1
        self.heard: dict[int, int] = {}

    def _check(self) -> None:
        """Lamport's rule over FIFO channels: a later timestamp from every other process
        (m itself from its sender)."""
        if self.ts_m is not None and all(
                self.heard.get(p, -1) >= self.ts_m if p == self.sender
                else self.heard.get(p, -1) > self.ts_m for p in self.others()):
            self.delivered = True

    def start(self) -> Sends:
        self.clock += 1
        self.ts_m, self.sender = self.clock, self.pid
        self._check()
        return [(p, Bcast(self.clock)) for p in self.others()]

    def receive(self, src: int, msg: BaselineMessage) -> Sends:
        assert isinstance(msg, (Bcast, TsAck))
        self.clock = max(self.clock, msg.ts) + 1
        self.heard[src] = max(self.heard.get(src, -1), msg.ts)
        out: Sends = []
        if isinstance(msg, Bcast):
            self.ts_m, self.sender = msg.ts, src
            out = [(p, TsAck(self.clock)) for p in self.others()]
        self._check()
        return out


class ChandraToueg(_Process):
    def __init__(self, pid: int, n: int) -> None:
        super().__init__(pid, n)
        self.consensus = ConsensusInstance(MID, pid, range(n))
        self.rdelivered = False

    def _consensus(self, step_sends: Sequence[tuple[int, ConsensusMessage]]) -> Sends:
        self.delivered = self.delivered or (
            self.rdelivered and self.consensus.decision is not None)
        return list(step_sends)

    def _r_deliver(self, came_from: int | None) -> Sends:
        self.rdelivered = True
        relay: Sends = [(p, Bcast()) for p in self.others(*(() if came_from is None
                                                            else (came_from,)))]
        return relay + self._consensus(self.consensus.start(1).sends)

    def start(self) -> Sends:
        return self._r_deliver(None)

    def receive(self, src: int, msg: BaselineMessage) -> Sends:
        if isinstance(msg, Bcast):
            return [] if self.rdelivered else self._r_deliver(src)
        assert not isinstance(msg, (SeqNo, TsAck))
        return self._consensus(self.consensus.receive(src, msg).sends)


MODELS: dict[str, Callable[[int, int], _Process]] = {
    "sequencer": Sequencer, "symmetric": Symmetric, "chandra-toueg": ChandraToueg}


@dataclass(frozen=True, slots=True)
class BaselineRow:
    model: str
    n: int
    sender: int
    min_steps: float
    max_steps: float
    messages: int
    header: int
    by_kind: dict[str, int]


def count(model: str, n: int, sender: int) -> BaselineRow:
    """One failure-free broadcast from ``sender`` to all n processes, unit delays."""
    procs = [MODELS[model](p, n) for p in range(n)]
    heap: list[tuple[float, int, int, int, BaselineMessage]] = []
    seq = 0
    kinds: Counter[str] = Counter()
    header = 0
    delivered_at: dict[int, float] = {}

    def emit(now: float, src: int, sends: Sends) -> None:
        nonlocal seq, header
        for dst, msg in sends:
            seq += 1
            kinds[type(msg).__name__] += 1
            header = max(header, header_bytes(msg))
            heapq.heappush(heap, (now + 1.0, seq, src, dst, msg))
        if procs[src].delivered:
            delivered_at.setdefault(src, now)

    emit(0.0, sender, procs[sender].start())
    while heap:
        now, _, src, dst, msg = heapq.heappop(heap)
        emit(now, dst, procs[dst].receive(src, msg))
    if len(delivered_at) != n:
        raise AssertionError(f"{model}: {n - len(delivered_at)} processes never delivered")
    times = list(delivered_at.values())
    return BaselineRow(model, n, sender, min(times), max(times), sum(kinds.values()),
                       header, dict(defaultdict(int, kinds)))


def paper(model: str, n: int) -> tuple[str, int]:
    """The paper's steps and message count (Table 2), brackets left out."""
    k = n - 1
    return {"sequencer": ("2 [1]", 2 * k), "symmetric": ("2 [1]", k),
            "chandra-toueg": ("4", 2 * k * k + 2 * k)}[model]
