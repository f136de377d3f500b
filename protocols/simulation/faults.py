"""Faults the simulator injects into a cluster of full Nodes (JGroups-style fault layers,
plus the process faults of section 2 of the ToTo paper: "when a processor fails ...").

A ``Fault`` happens at virtual time ``at`` to ``nodes``:

- ``crash``: the process is gone for good (kill -9); its simulated disk stays;
- ``restart``: crash, then a new incarnation starts at once from the disk;
- ``start``: a node that was not running starts (a join, or a restart after a crash);
  a node still leaving (its leave not finished) stops first;
- ``pause``: the process stops for ``duration`` (SIGSTOP, a long GC, a VM migration):
  its timers do not fire and arrivals wait in a bounded socket buffer;
- ``leave``: a graceful leave (SIGTERM); the process stops once a view without it is
  installed, or after ``duration``;
- ``partition``: for ``duration``, the links between ``groups`` are cut (every other
  node forms a group of its own unless listed); ``one_way`` cuts only the links from
  the first group to the others (an asymmetric partition);
- ``clock_step``: for ``duration``, the node's wall clock is ``offset`` seconds off
  (NTP stepping it, a VM resumed from suspension, a clock set by hand), then right
  again; it stamps and checks datagram send times (replay protection), so beyond
  ``replay_window`` the node and the others refuse each other's datagrams. A restart
  during it keeps the offset (it is the host's clock);
- ``disk_full``: for ``duration``, the node's disk refuses its membership state record
  (full, read-only, failing). The process runs, receives and steps, and sends nothing
  while a record it was handed is not on disk, the daemon's rule
  (``amcast.daemon.runner``, ``Daemon._persist_state``); the refusal outlives a restart
  of the process (it is the disk's).

``random_plan`` draws a plan of faults for a seed (the membership sweep);
``disk_fault_plan`` adds a full disk to one, often with a restart during it;
``deaf_fault_plan`` a node that hears nothing for a long while but is heard;
``clock_fault_plan`` a node whose clock is off for a while.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

KINDS = ("crash", "restart", "start", "pause", "leave", "partition", "disk_full", "clock_step",
         "lose_state")


@dataclass(frozen=True, slots=True)
class Fault:
    at: float
    kind: str
    nodes: tuple[int, ...] = ()
    duration: float = 0.0
    groups: tuple[tuple[int, ...], ...] = ()
    one_way: bool = False
    offset: float = 0.0
    """``clock_step``: seconds the clock is ahead (negative: behind)."""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown fault {self.kind!r}; choose one of {', '.join(KINDS)}")

    def links(self, members: Sequence[int]) -> set[tuple[int, int]]:
        """The directed links a partition cuts."""
        listed = {n for g in self.groups for n in g}
        groups = [set(g) for g in self.groups] + [{n} for n in members if n not in listed]
        side = {n: k for k, g in enumerate(groups) for n in g}
        cut = set()
        for a in members:
            for b in members:
                if a == b or side[a] == side[b]:
                    continue
                if self.one_way and side[a] != 0:
                    continue
                cut.add((a, b))
        return cut

    def describe(self) -> str:
        what = {
            "partition": f"partition {' | '.join(','.join(map(str, g)) for g in self.groups)}"
                         f"{' (one way)' if self.one_way else ''}",
            "clock_step": f"clock_step {','.join(map(str, self.nodes))} {self.offset:+.1f}s",
        }.get(self.kind, f"{self.kind} {','.join(map(str, self.nodes))}")
        span = f" for {self.duration:.2f}s" if self.duration else ""
        return f"t={self.at:.2f}s {what}{span}"


def random_plan(rng: random.Random, n: int, *, start: float = 0.5, faults: int = 2,
                kinds: Sequence[str] = ("crash", "restart", "pause", "partition", "leave",
                                        "start"),
                suspect_timeout: float = 0.8) -> list[Fault]:
    """A few faults for one seed, spaced so that most view changes finish in between,
    and a few that overlap (a crash during a view change)."""
    plan: list[Fault] = []
    t = start
    down: set[int] = set()
    for _ in range(faults):
        kind = rng.choice(list(kinds))
        live = [i for i in range(n) if i not in down]
        if kind == "start":
            if not down:
                kind = "restart"
            else:
                node = rng.choice(sorted(down))
                down.discard(node)
                plan.append(Fault(t, "start", (node,)))
        if kind in ("crash", "leave"):
            if len(live) <= n // 2 + 1:
                kind = "restart"
            else:
                node = rng.choice(live)
                down.add(node)
                plan.append(Fault(t, kind, (node,), 5.0 if kind == "leave" else 0.0))
        if kind == "restart":
            plan.append(Fault(t, "restart", (rng.choice(live),)))
        elif kind == "pause":
            plan.append(Fault(t, "pause", (rng.choice(live),),
                              rng.uniform(0.3, 3.0) * suspect_timeout))
        elif kind == "partition":
            nodes = list(range(n))
            rng.shuffle(nodes)
            shape = rng.choice(["one", "minority", "majority", "ring", "asymmetric"])
            duration = rng.uniform(1.0, 3.0) * suspect_timeout
            if shape == "one":
                plan.append(Fault(t, "partition", groups=((nodes[0],),), duration=duration))
            elif shape in ("minority", "majority"):
                k = max(1, (n - 1) // 2) if shape == "minority" else n // 2
                plan.append(Fault(t, "partition", groups=(tuple(nodes[:k]),
                                                          tuple(nodes[k:])),
                                  duration=duration))
            elif shape == "ring":
                half = n // 2
                plan.append(Fault(t, "partition", groups=(tuple(nodes[:half]),),
                                  duration=duration / 2))
                plan.append(Fault(t + duration / 2, "partition",
                                  groups=(tuple(nodes[half // 2: half // 2 + half]),),
                                  duration=duration / 2))
            else:
                plan.append(Fault(t, "partition", groups=((nodes[0],), tuple(nodes[1:])),
                                  duration=duration, one_way=True))
        gap = rng.choice([0.05, 0.3, 1.5, 2.5, 3.0])  # small gaps overlap view changes
        t += gap * suspect_timeout + 0.2
    for node in sorted(down):  # bring everyone back at the end, so liveness can be checked
        if rng.random() < 0.7:
            plan.append(Fault(t, "start", (node,)))
            t += 0.2
    return plan


def disk_fault_plan(rng: random.Random, n: int, plan: Sequence[Fault], *,
                    suspect_timeout: float = 0.8) -> list[Fault]:
    """A full disk at one node, somewhere in ``plan``'s span, long enough (0.5 to 4
    suspect timeouts) for the others to exclude the silent node; half the time the node
    restarts during it, from the older record its disk kept (the case the rule is for: a
    ballot that left without its record would be forgotten)."""
    end = max((f.at + f.duration for f in plan), default=0.5)
    node = rng.randrange(n)
    at = rng.uniform(0.3, max(0.5, end))
    duration = rng.uniform(0.5, 4.0) * suspect_timeout
    faults = [Fault(at, "disk_full", (node,), duration)]
    if rng.random() < 0.5:
        faults.append(Fault(at + rng.uniform(0.2, 0.9) * duration, "restart", (node,)))
    return faults


def deaf_fault_plan(rng: random.Random, n: int, plan: Sequence[Fault], *,
                    suspect_timeout: float = 0.8) -> list[Fault]:
    """One node that hears nothing while the others hear it (a one-way cut, a host
    firewall that drops what comes in), somewhere in ``plan``'s span, for 2 to 30
    suspect timeouts: long enough for the view without it, the round that tries to take
    it in, and several holds after it (``MembershipLayer._renew_holds``)."""
    end = max((f.at + f.duration for f in plan), default=0.5)
    node = rng.randrange(n)
    others = tuple(i for i in range(n) if i != node)
    return [Fault(rng.uniform(0.3, max(0.5, end)), "partition", groups=(others, (node,)),
                  duration=rng.uniform(2.0, 30.0) * suspect_timeout, one_way=True)]


def clock_fault_plan(rng: random.Random, n: int, plan: Sequence[Fault], *,
                     suspect_timeout: float = 0.8, window: float = 30.0) -> list[Fault]:
    """One node whose wall clock is off, somewhere in ``plan``'s span, for 2 to 20
    suspect timeouts: seven times in ten beyond the replay ``window`` (35 to 120 s, ahead
    or behind: the others refuse it and it refuses them, so it is excluded, then taken in
    again), else within it (2 to 25 s: nothing may change); and four times in ten it
    restarts during the step (its state record and incarnation written on the wrong
    clock)."""
    end = max((f.at + f.duration for f in plan), default=0.5)
    node = rng.randrange(n)
    at = rng.uniform(0.3, max(0.5, end))
    duration = rng.uniform(2.0, 20.0) * suspect_timeout
    beyond = rng.random() < 0.7
    offset = (rng.uniform(window + 5, 4 * window) if beyond else rng.uniform(2.0, window - 5))
    offset *= rng.choice((-1.0, 1.0))
    faults = [Fault(at, "clock_step", (node,), duration, offset=offset)]
    if rng.random() < 0.4:
        faults.append(Fault(at + rng.uniform(0.2, 0.8) * duration, "restart", (node,)))
    return faults


def state_loss_fault_plan(rng: random.Random, n: int, plan: Sequence[Fault], *,
                         claimed: int | None = None) -> list[Fault]:
    """One member loses its state directory somewhere in ``plan``'s span: it stops, and
    starts again with no state file (if it is down then, the file is gone when it next
    starts). Until a view lists it in that life its vote does not count
    (``agreement.counted_acceptors``), so the plan picks a member it does not leave down
    and loses a state only where the others it leaves up (and not ``claimed``, the id a
    second daemon may have taken: its real member may not count either) still make a
    majority: beyond that no view may form, by design, and liveness is not what is
    checked. ``[]`` where no member qualifies."""
    down = down_at_end(plan) | ({claimed} if claimed is not None else set())
    if len(down) + 1 > (n - 1) // 2:
        return []
    node = rng.choice([i for i in range(n) if i not in down])
    end = max((f.at + f.duration for f in plan), default=0.5)
    return [Fault(rng.uniform(0.3, max(0.5, end)), "lose_state", (node,))]


IMPOSTOR_ENDPOINT = 1000
"""The simulated endpoint of a second daemon claiming a member's id (``Cluster``)."""


def impostor_fault_plan(rng: random.Random, n: int, plan: Sequence[Fault], *,
                        suspect_timeout: float = 0.8) -> tuple[int | None, list[Fault]]:
    """A second daemon started with the node id of a member that ``plan`` leaves alone
    (the id it claims is returned; ``None`` and no fault when ``plan`` touches them
    all), somewhere in ``plan``'s span, that runs for 1 to 10 suspect timeouts and is
    stopped; half the time another member then crashes (it restarts three times in
    four, and always where staying down would leave no majority with those the plan
    leaves down: that is beyond the fault model): the sequence that once wedged a
    cluster, the view change after a refused daemon. (A partition of ``plan`` cuts
    off every member it does not group, the claimed one too, so that one may be cut off
    from the others while the second daemon, which reaches every side, runs: they may
    take it for the claimed member's restart, and its vote must not decide a view that
    lists that member, ``agreement.counted_acceptors``.)"""
    end = max((f.at + f.duration for f in plan), default=0.5)
    touched = {i for f in plan for i in f.nodes} | {
        i for f in plan for g in f.groups for i in g}
    steady = [i for i in range(n) if i not in touched]
    if not steady:
        return None, []
    claimed = rng.choice(steady)
    at = rng.uniform(0.3, max(0.5, end))
    stop = at + rng.uniform(1.0, 10.0) * suspect_timeout
    faults = [Fault(at, "start", (IMPOSTOR_ENDPOINT,)), Fault(stop, "crash", (IMPOSTOR_ENDPOINT,))]
    others = [i for i in range(n) if i != claimed]
    if others and rng.random() < 0.5:
        victim = rng.choice(others)
        crash = stop + rng.uniform(0.2, 3.0) * suspect_timeout
        faults.append(Fault(crash, "crash", (victim,)))
        restarts = rng.random() < 0.75
        if len(down_at_end(plan) | {victim}) > (n - 1) // 2:
            restarts = True  # else no majority would be left: beyond the fault model
        if restarts:
            faults.append(Fault(crash + rng.uniform(1.0, 5.0) * suspect_timeout, "start",
                                (victim,)))
    return claimed, faults


def down_at_end(plan: Sequence[Fault]) -> set[int]:
    """The nodes ``plan`` leaves crashed or gone: its last ``crash`` or ``leave`` of them
    is not followed by a ``start``."""
    down: set[int] = set()
    for fault in sorted(plan, key=lambda f: f.at):
        if fault.kind in ("crash", "leave"):
            down.update(fault.nodes)
        elif fault.kind == "start":
            down.difference_update(fault.nodes)
    return down
