"""Uniform consensus on sn(m) among the processes of Dst(m), with a ◇S failure detector.

Scalable Atomic Multicast (section 3.6 and step 3 of section 4.2) needs a uniform
consensus among the addressees of m, solvable with a failure detector of class ◇S and
a majority of correct participants (section 3.2). This is the rotating-coordinator
algorithm of Chandra and Toueg (Unreliable failure detectors for reliable distributed
systems), one instance per message:

- round r has coordinator ``participants[(r - 1) % len(participants)]``;
- phase 1 (rounds > 1): every participant sends its ``(estimate, ts_est)`` to the
  coordinator, which waits for a majority and picks the estimate adopted in the latest
  round. Round 1 skips it: nothing can be locked yet, so the coordinator proposes its
  own proposal (the usual optimisation, which is what the paper's message count of
  ``2(d-1) + (d-1)^2`` per consensus assumes);
- phase 2: the coordinator sends ``Propose``;
- phase 3: a participant adopts the proposal (``ts_est = r``) and acks, or, once it
  suspects the coordinator, nacks and moves on;
- phase 4: with a majority of replies, all acks, the coordinator decides and sends
  ``Decide``; every participant relays the first ``Decide`` it receives to all the
  others but the one it came from, then decides (the reliable broadcast of the
  decision: ``(d-1) + (d-1)(d-2) = (d-1)^2`` messages). With a nack among them it sends
  ``Abort`` and moves on.

A participant that acked waits for ``Decide``, ``Abort`` or a suspicion of the round's
coordinator before it moves on, so that a failure-free run costs exactly the messages
the paper counts (in the original algorithm it moves on at once and sends an estimate
to the next coordinator). Liveness is the same: a correct coordinator answers every
round it completes, and ◇S suspects a crashed one.

Sans-IO: the caller feeds messages and the current suspicions (a ◇S module's output is
an input here) and gets back the datagrams to send and, once, the decision. Messages
that arrive before ``start`` are kept and replayed then.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from .messages import (
    Abort,
    Ack,
    ConsensusMessage,
    Decide,
    Estimate,
    MsgId,
    Propose,
)


@dataclass(slots=True)
class ConsensusStep:
    """What one input produced: datagrams ``(destination, message)`` and a decision."""

    sends: list[tuple[int, ConsensusMessage]] = field(default_factory=list)
    decided: int | None = None


class ConsensusInstance:
    """One consensus (on the sequence number of one message) seen by one participant."""

    def __init__(self, mid: MsgId, me: int, participants: Sequence[int]) -> None:
        if me not in participants:
            raise ValueError(f"process {me} is not a participant of {mid}")
        self.mid = mid
        self.me = me
        self.participants = tuple(sorted(participants))
        self.majority = len(self.participants) // 2 + 1
        self.started = False
        self.estimate = 0
        self.ts_est = 0
        self.round = 1
        self.decision: int | None = None
        self._early: list[tuple[int, ConsensusMessage]] = []
        self._suspected: frozenset[int] = frozenset()
        self._estimates: dict[int, dict[int, tuple[int, int]]] = defaultdict(dict)
        self._replies: dict[int, dict[int, bool]] = defaultdict(dict)
        self._proposals: dict[int, int] = {}
        self._aborted: set[int] = set()
        self._acked: set[int] = set()
        self._proposed: set[int] = set()

    def coordinator(self, r: int) -> int:
        return self.participants[(r - 1) % len(self.participants)]

    def _others(self, *but: int) -> list[int]:
        return [p for p in self.participants if p != self.me and p not in but]

    def start(self, value: int) -> ConsensusStep:
        """Propose ``value`` (step 3 of the paper: the max of a qualified majority)."""
        step = ConsensusStep()
        if self.started or self.decision is not None:
            return step
        self.started = True
        self.estimate = value
        self._enter_round(step)
        for src, msg in self._early:
            self._handle(src, msg, step)
        self._early.clear()
        self._progress(step)
        return step

    def suspect(self, suspected: frozenset[int]) -> ConsensusStep:
        """The failure detector's current output (◇S: it may be wrong for a while)."""
        self._suspected = suspected
        step = ConsensusStep()
        if self.started:
            self._progress(step)
        return step

    def receive(self, src: int, msg: ConsensusMessage) -> ConsensusStep:
        step = ConsensusStep()
        if not self.started:
            self._early.append((src, msg))
            return step
        self._handle(src, msg, step)
        self._progress(step)
        return step

    # internals

    def _decide(self, value: int, step: ConsensusStep, came_from: int | None) -> None:
        if self.decision is not None:
            return
        self.decision = value
        step.decided = value
        skip = () if came_from is None else (came_from,)
        step.sends += [(p, Decide(self.mid, value)) for p in self._others(*skip)]

    def _handle(self, src: int, msg: ConsensusMessage, step: ConsensusStep) -> None:
        if self.decision is not None:
            return
        if isinstance(msg, Decide):
            self._decide(msg.value, step, came_from=src)
        elif isinstance(msg, Estimate):
            self._estimates[msg.round][src] = (msg.value, msg.ts_est)
        elif isinstance(msg, Propose):
            if src == self.coordinator(msg.round):
                self._proposals[msg.round] = msg.value
        elif isinstance(msg, Ack):
            self._replies[msg.round][src] = msg.ok
        elif isinstance(msg, Abort) and src == self.coordinator(msg.round):
            self._aborted.add(msg.round)

    def _enter_round(self, step: ConsensusStep) -> None:
        r, c = self.round, self.coordinator(self.round)
        if r == 1:
            return
        if c == self.me:
            self._estimates[r][self.me] = (self.estimate, self.ts_est)
        else:
            step.sends.append((c, Estimate(self.mid, r, self.estimate, self.ts_est)))

    def _next_round(self, step: ConsensusStep) -> None:
        self.round += 1
        self._enter_round(step)

    def _progress(self, step: ConsensusStep) -> None:
        while self.decision is None:
            r, c = self.round, self.coordinator(self.round)
            if c == self.me:
                if r not in self._proposed:
                    if r > 1:
                        got = self._estimates[r]
                        if len(got) < self.majority:
                            return
                        # the estimate adopted in the latest round (ties: the largest)
                        self.estimate = max(got.values(), key=lambda e: (e[1], e[0]))[0]
                    self._proposed.add(r)
                    self.ts_est = r
                    self._replies[r][self.me] = True
                    step.sends += [(p, Propose(self.mid, r, self.estimate))
                                   for p in self._others()]
                replies = self._replies[r]
                if len(replies) < self.majority:
                    return
                if all(replies.values()):
                    self._decide(self.estimate, step, came_from=None)
                    return
                step.sends += [(p, Abort(self.mid, r)) for p in self._others()]
                self._next_round(step)
                continue
            if r not in self._acked:
                if r in self._proposals:
                    self.estimate, self.ts_est = self._proposals[r], r
                    self._acked.add(r)
                    step.sends.append((c, Ack(self.mid, r, True)))
                elif c in self._suspected:
                    step.sends.append((c, Ack(self.mid, r, False)))
                    self._next_round(step)
                    continue
                else:
                    return
            if r in self._aborted or c in self._suspected:
                self._next_round(step)
                continue
            return
