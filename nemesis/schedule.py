"""The seeded schedule of faults: what happens to which daemon, when, for how long.

A schedule is a pure function of its inputs (``random.Random(seed)``, the number of
nodes, the duration, the transport and the fault kinds allowed), so ``--seed S``
replays the same faults in the same order at the same offsets. What the daemons do in
between is real time on a real host and is not replayed: a replay repeats the attack,
not the interleaving (the report prints both the schedule and when each action
actually ran).

Rules that keep a run meaningful rather than merely destructive:

- one fault at a time per node (a node being restarted is not also paused);
- at most a minority of the nodes faulted at once, so that most of the time a primary
  view exists and the load is ordered (a fault that takes more, ``restart-all``, runs
  alone, with nothing else in flight);
- every fault ends (heals) before the schedule's end, after which the cluster must
  converge: the run's end is the check of that.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass, field
from typing import Any

KILL = "kill"  # SIGKILL, restart after the duration
PAUSE = "pause"  # SIGSTOP, SIGCONT after the duration
TERMINATE = "terminate"  # SIGTERM (a graceful leave), restart after the duration
PARTITION = "partition"  # cut nodes off from the rest (both ways or one way): unicast relay
FLAKY = "flaky"  # loss, duplication and reordering on every link: unicast relay
CLOCK = "clock"  # step a daemon's wall clock (libfaketime), back after the duration
DUPID = "dupid"  # a second daemon started with a running node's id, stopped after
MISCONFIG = "misconfig"  # a node restarted with another key or other ordering settings
RESTART_ALL = "restart-all"  # every daemon stopped (SIGTERM or SIGKILL), then restarted

ALL_KINDS = (KILL, PAUSE, TERMINATE, PARTITION, FLAKY, CLOCK, DUPID, MISCONFIG, RESTART_ALL)
RELAY_KINDS = frozenset({PARTITION, FLAKY})
"""Kinds that need the unicast relay: multicast on one host's loopback cannot be cut."""
WEIGHTS = {KILL: 3, PAUSE: 3, TERMINATE: 2, PARTITION: 3, FLAKY: 1, CLOCK: 2, DUPID: 1,
           MISCONFIG: 1, RESTART_ALL: 1}


@dataclass(frozen=True)
class Step:
    """One fault: it begins ``at`` seconds into the run and heals ``duration`` later.

    ``nodes``: the nodes it hits (for a partition, the side cut off); ``arg``: the
    kind's parameter (a partition's ``both``/``oneway``, a clock step in seconds, a
    misconfiguration's ``key``/``ordering``, restart-all's ``term``/``kill``)."""

    at: float
    kind: str
    nodes: tuple[int, ...]
    duration: float
    arg: str = ""

    @property
    def end(self) -> float:
        return self.at + self.duration

    def describe(self) -> str:
        who = ("node" + ("s " if len(self.nodes) > 1 else " ") + ",".join(map(str, self.nodes))
               if self.nodes else "all links")
        arg = f" {self.arg}" if self.arg else ""
        return f"t={self.at:6.2f}s +{self.duration:4.2f}s  {self.kind:<11} {who}{arg}"


@dataclass
class Schedule:
    seed: int
    nodes: int
    duration: float
    transport: str
    kinds: tuple[str, ...]
    steps: list[Step] = field(default_factory=list)

    def describe(self) -> str:
        head = (f"schedule: seed {self.seed}, {self.nodes} nodes, {self.transport}, "
                f"{self.duration:g} s of faults, kinds {', '.join(self.kinds)}")
        return "\n".join([head, *("  " + s.describe() for s in self.steps)])

    def to_json(self) -> dict[str, Any]:
        return {"seed": self.seed, "nodes": self.nodes, "duration": self.duration,
                "transport": self.transport, "kinds": list(self.kinds),
                "steps": [asdict(s) for s in self.steps]}

    def dumps(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True)


def usable_kinds(kinds: tuple[str, ...], transport: str, clock: bool) -> tuple[str, ...]:
    """``kinds`` less those this run cannot do: relay faults over multicast, clock steps
    without libfaketime. Order kept, so the schedule depends only on what remains."""
    out = []
    for k in kinds:
        if k not in ALL_KINDS:
            raise ValueError(f"unknown fault kind {k!r}; kinds: {', '.join(ALL_KINDS)}")
        if k in RELAY_KINDS and transport != "unicast":
            continue
        if k == CLOCK and not clock:
            continue
        out.append(k)
    return tuple(out)


def generate(seed: int, nodes: int, duration: float, transport: str,
             kinds: tuple[str, ...], *, warmup: float = 2.0,
             min_gap: float = 0.5, max_gap: float = 3.0) -> Schedule:
    """The schedule of ``seed``: steps from ``warmup`` on, one every ``min_gap`` to
    ``max_gap`` seconds, each healed by ``duration`` (module docstring for the rules)."""
    if nodes < 3:
        raise ValueError("a nemesis run needs at least 3 nodes")
    rng = random.Random(seed)
    sched = Schedule(seed, nodes, duration, transport, kinds)
    if not kinds:
        return sched
    busy_until = [0.0] * nodes  # per node: when its current fault heals
    exclusive_until = 0.0  # restart-all in flight: nothing else
    minority = (nodes - 1) // 2
    weights = [WEIGHTS[k] for k in kinds]
    t = warmup
    while True:
        t += round(rng.uniform(min_gap, max_gap), 2)
        if t >= duration - 1.0:
            break
        kind = rng.choices(kinds, weights)[0]
        length = round(rng.uniform(1.0, 6.0), 2)
        length = min(length, round(duration - t, 2))
        if length < 0.5 or t < exclusive_until:
            continue
        free = [i for i in range(nodes) if busy_until[i] <= t]
        in_flight = nodes - len(free)
        if kind == RESTART_ALL:
            if in_flight:
                continue
            arg = rng.choice(("term", "kill"))
            down = min(round(rng.uniform(0.5, 2.0), 2), round(duration - t, 2))
            step = Step(t, kind, tuple(range(nodes)), down, arg)
            # the restart itself takes seconds (every daemon starts, then re-forms a view)
            exclusive_until = step.end + 6.0
            busy_until = [exclusive_until] * nodes
            sched.steps.append(step)
            continue
        room = minority - in_flight
        if room <= 0 or not free:
            continue
        if kind == PARTITION:
            size = rng.randint(1, min(room, len(free)))
            hit = tuple(sorted(rng.sample(free, size)))
            arg = rng.choice(("both", "both", "oneway"))
        elif kind == FLAKY:
            hit, arg = (), ""
            if any(s.kind == FLAKY and s.end > t for s in sched.steps):
                continue
        else:
            hit = (rng.choice(free),)
            arg = ""
            if kind == CLOCK:
                arg = f"{rng.choice((-1, 1)) * rng.choice((2, 5, 10, 45, 90)):+d}"
            elif kind == MISCONFIG:
                arg = rng.choice(("key", "ordering"))
        step = Step(t, kind, hit, length, arg)
        for i in hit:
            busy_until[i] = step.end + (1.0 if kind in (KILL, TERMINATE, MISCONFIG) else 0.0)
        sched.steps.append(step)
    return sched
