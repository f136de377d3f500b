"""The membership sweep: full Nodes under crashes, restarts, pauses, joins, leaves and
partitions, on a lossy network, every property checked on every seed.

Each seed draws a cluster size, a loss rate, an ordering rule and a plan of process and
network faults (``faults.random_plan``); nodes form their first view themselves (no
agreed bootstrap), senders keep submitting through the faults, and after the last fault
the run goes on until every live node is in one view and has delivered everything a
live process sent (or a deadline, which the liveness checker then reports).
``run_membership_sweep`` aggregates the counts docs/design/membership.md reports
(faults injected by kind, views installed, crash-restarts, messages in doubt) and lists
the first violations.
"""

from __future__ import annotations

import concurrent.futures
import functools
import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..node_config import NodeConfig
from .cluster import Cluster, RunResult, Workload, batching_title
from .faults import (
    IMPOSTOR_ENDPOINT,
    Fault,
    clock_fault_plan,
    deaf_fault_plan,
    disk_fault_plan,
    impostor_fault_plan,
    random_plan,
    state_loss_fault_plan,
)
from .network import LinkFaults, NetworkConfig

RULES = ("lex", "stoto", "gtoto", "gltoto")
WALL_CLOCK = 1_795_000_000.0
"""The simulated wall clock at t = 0 of a seed with a clock step (2026-11, Unix s)."""
KEY = b"simulation-group-key"


@dataclass(frozen=True, slots=True)
class MembershipPoint:
    seed: int
    n: int
    loss: float
    rule: str
    plan: tuple[Fault, ...]
    claimed: int | None = None
    """The node id a second daemon claims (``impostor_faults``); ``None``: none does."""


def membership_point(seed: int, *, n_range: tuple[int, int] = (3, 7),
                     max_loss: float = 0.2, faults: int | None = None,
                     kinds: Sequence[str] | None = None,
                     disk_faults: bool = False, deaf_faults: bool = False,
                     clock_faults: bool = False,
                     impostor_faults: bool = False,
                     state_loss_faults: bool = False) -> MembershipPoint:
    """``impostor_faults`` adds a second daemon with a member's id, started and
    stopped (``faults.impostor_fault_plan``), ``state_loss_faults`` a member that loses
    its state directory (``faults.state_loss_fault_plan``), ``disk_faults`` a full disk at one node
    (``faults.disk_fault_plan``),
    ``deaf_faults`` a node that hears nothing but is heard (``faults.deaf_fault_plan``),
    ``clock_faults`` a node whose clock is off for a while (``faults.clock_fault_plan``),
    each drawn from a stream of its own: the rest of the seed's plan stays what it was
    without."""
    rng = random.Random(seed * 104729 + 17)
    n = rng.randint(*n_range)
    loss = rng.choice([0.0, 0.0, 0.05, 0.1, max_loss])
    rule = RULES[seed % len(RULES)]
    count = faults if faults is not None else rng.randint(1, 4)
    plan = random_plan(rng, n, faults=count, **({"kinds": kinds} if kinds else {}))
    if disk_faults:
        plan += disk_fault_plan(random.Random(seed * 7717 + 3), n, plan)
    if deaf_faults:
        plan += deaf_fault_plan(random.Random(seed * 6133 + 5), n, plan)
    if clock_faults:
        plan += clock_fault_plan(random.Random(seed * 4597 + 9), n, plan)
    claimed = None
    if impostor_faults:
        claimed, more = impostor_fault_plan(random.Random(seed * 3911 + 13), n, plan)
        plan += more
    if state_loss_faults:
        plan += state_loss_fault_plan(random.Random(seed * 8191 + 11), n, plan,
                                      claimed=claimed)
    return MembershipPoint(seed, n, loss, rule, tuple(plan), claimed)


def run_membership_point(point: MembershipPoint, *, messages_per_node: int = 40,
                         interval: float = 0.05,
                         settings: Mapping[str, Any] | None = None,
                         read_batching: float = 0.0,
                         cores: Sequence[str] | None = None) -> RunResult:
    """One seed's run; ``settings`` override ``NodeConfig`` defaults (studies of a
    setting); ``read_batching``: nodes read arrivals as the daemon does (``Cluster``);
    ``cores``: each node's data-path core (``Cluster``; ``None``: the environment's)."""
    cfg = NodeConfig(group_key=KEY, rule=point.rule, **dict(settings or {}))
    net = NetworkConfig(default=LinkFaults(loss=point.loss, duplicate=0.05, reorder=0.1))
    # a clock step needs a wall clock to step: Unix time, as the daemon's (incarnations
    # then start there too); other seeds keep the clock at 0, as ever
    # (an impostor's incarnation, too, comes from the wall clock, as in the daemon: two
    # daemons started at different times differ)
    # (and a state directory lost: the daemon's next incarnation, with no file to go
    # on, is the wall clock's)
    stepped = (any(f.kind in ("clock_step", "lose_state") for f in point.plan)
               or point.claimed is not None)
    cluster = Cluster(point.n, seed=point.seed, node_config=cfg, network=net,
                      bootstrap="join", read_batching=read_batching, cores=cores,
                      wall_clock=WALL_CLOCK if stepped else None,
                      impostors=({IMPOSTOR_ENDPOINT: point.claimed}
                                 if point.claimed is not None else None))
    for fault in point.plan:
        cluster.schedule(fault)
    workload = Workload(messages_per_node=messages_per_node, interval=interval)
    end = max((f.at + f.duration for f in point.plan), default=0.0)
    return cluster.run(workload, max_time=end + 30.0, settle=1.0)


@dataclass(frozen=True, slots=True)
class SeedOutcome:
    """What one seed of the sweep found (small and picklable: sweeps may run in parallel)."""

    seed: int
    rule: str
    faults: tuple[str, ...]
    totals: tuple[tuple[str, int], ...]
    violations: tuple[str, ...]


def seed_outcome(seed: int, *, n_range: tuple[int, int] = (3, 7), max_loss: float = 0.2,
                 messages_per_node: int = 40, read_batching: float = 0.0,
                 disk_faults: bool = False, deaf_faults: bool = False,
                 clock_faults: bool = False, impostor_faults: bool = False,
                 state_loss_faults: bool = False,
                 ordering: str = "toto", cores: Sequence[str] | None = None) -> SeedOutcome:
    """``ordering``: ``NodeConfig.ordering`` of every node (the swap orderings of
    ``protocols/swap`` in place of the seed's ToTo rule); ``cores``: each node's
    data-path core (``Cluster``)."""
    point = membership_point(seed, n_range=n_range, max_loss=max_loss,
                             disk_faults=disk_faults, deaf_faults=deaf_faults,
                             clock_faults=clock_faults, impostor_faults=impostor_faults,
                             state_loss_faults=state_loss_faults)
    result = run_membership_point(point, messages_per_node=messages_per_node,
                                  read_batching=read_batching, cores=cores,
                                  settings={"ordering": ordering} if ordering != "toto" else None)
    rule = point.rule if ordering == "toto" else ordering
    totals: Counter[str] = Counter()
    totals["messages"] += len(result.sent)
    totals["views"] += sum(len(v) for v in result.views.values())
    totals["distinct views"] += len({v.view for vs in result.views.values() for v in vs})
    totals["in doubt"] += sum(nd.stats.messages_in_doubt for nd in result.all_nodes)
    totals["outcome unknown"] += sum(nd.stats.messages_outcome_unknown
                                     for nd in result.all_nodes)
    totals["lost copies"] += result.network.stats.lost
    totals["flush deliveries"] += sum(nd.stats.flush_deliveries for nd in result.all_nodes)
    totals["crash-restarts"] += sum(1 for f in point.plan if f.kind == "restart")
    totals["held back"] += result.drops.get("state_unwritable", 0)
    totals["refused for their send time"] += (result.drops.get("stale", 0)
                                              + result.drops.get("future", 0))
    totals["refused as a duplicate id"] += result.drops.get("refused_incarnation", 0)
    if deaf_faults and not impostor_faults and not state_loss_faults:  # the plan's last
        totals["deaf views"] += views_during(result, point.plan[-1])
    plan = "; ".join(f.describe() for f in point.plan)
    bad = tuple(
        f"seed {seed} (n={point.n}, {rule}, loss {point.loss:.0%}, {plan}): {prop}: {v}"
        for prop, found in result.violations.items() for v in found[:2]
    )
    return SeedOutcome(seed, rule, tuple(f.kind for f in point.plan),
                       tuple(sorted(totals.items())), bad)


def views_during(result: RunResult, fault: Fault) -> int:
    """Distinct views first installed (by any process) while ``fault`` lasted."""
    first: dict[int, float] = {}
    for views in result.views.values():
        for v in views:
            first[v.view] = min(v.time, first.get(v.view, v.time))
    return sum(1 for t in first.values() if fault.at <= t < fault.at + fault.duration)


def summarize(outcomes: Sequence[SeedOutcome], *, n_range: tuple[int, int] = (3, 7),
              max_loss: float = 0.2, read_batching: float = 0.0,
              disk_faults: bool = False, deaf_faults: bool = False,
              clock_faults: bool = False, impostor_faults: bool = False,
              state_loss_faults: bool = False,
              cores: Sequence[str] | None = None) -> dict:
    """The sweep's report dict (``amcast.report``) from per-seed outcomes."""
    faults: Counter[str] = Counter()
    totals: Counter[str] = Counter()
    rules: Counter[str] = Counter()
    failures: list[str] = []
    for o in outcomes:
        rules[o.rule] += 1
        faults.update(o.faults)
        totals.update(dict(o.totals))
        failures.extend(o.violations)
    failed = {o.seed for o in outcomes if o.violations}
    return {
        "title": f"membership sweep: {len(outcomes)} seeds, n {n_range[0]}..{n_range[1]}, "
                 f"loss 0..{max_loss:.0%}, rules {', '.join(sorted(rules))}"
                 + batching_title(read_batching)
                 + (", a full disk at one node per seed" if disk_faults else "")
                 + (", a node that hears nothing but is heard per seed" if deaf_faults else "")
                 + (", a node whose clock is off for a while per seed" if clock_faults else "")
                 + (", a second daemon with a member's id per seed" if impostor_faults else "")
                 + (", a member that loses its state directory per seed"
                    if state_loss_faults else "")
                 + (f", cores {'/'.join(cores)}" if cores is not None else ""),
        "figures": {
            "seeds": len(outcomes),
            "seeds failed": len(failed),
            **{f"faults: {kind}": count for kind, count in sorted(faults.items())},
            "seeds with a crash-restart": sum(1 for o in outcomes if "restart" in o.faults),
            "messages submitted": totals["messages"],
            "views installed (all processes)": totals["views"],
            "distinct views": totals["distinct views"],
            "messages delivered by a flush": totals["flush deliveries"],
            "messages reported in doubt": totals["in doubt"],
            "of which of unknown outcome": totals["outcome unknown"],
            **({"datagrams held back for an unwritten state record": totals["held back"]}
               if disk_faults else {}),
            **({"views installed while a node was deaf": totals["deaf views"]}
               if deaf_faults else {}),
            **({"datagrams refused for their send time": totals["refused for their send time"]}
               if clock_faults else {}),
            **({"datagrams of a daemon refused as a duplicate id":
                totals["refused as a duplicate id"]} if impostor_faults else {}),
            "copies lost": totals["lost copies"],
        },
        "notes": failures[:50] or [
            "integrity, views, primary component, virtual synchrony, total and causal order "
            "within and across views, safe uniformity, one view per message, no loss of a "
            "surviving sender's messages, exact own-message accounting, no own message "
            "reported in doubt that the primary component delivered, and liveness held on "
            "every seed"
        ],
        "ok": not failures,
    }


def run_membership_sweep(
    seeds: Sequence[int],
    *,
    n_range: tuple[int, int] = (3, 7),
    max_loss: float = 0.2,
    messages_per_node: int = 40,
    progress: Callable[[str], None] | None = None,
    jobs: int = 1,
    read_batching: float = 0.0,
    disk_faults: bool = False,
    deaf_faults: bool = False,
    clock_faults: bool = False,
    impostor_faults: bool = False,
    state_loss_faults: bool = False,
    ordering: str = "toto",
    cores: Sequence[str] | None = None,
) -> dict:
    """One faulty cluster per seed (over ``jobs`` processes); every property checked.
    ``ordering``: every node's ``NodeConfig.ordering`` (the report's rules then name it);
    ``cores``: each node's data-path core (``Cluster``)."""
    one = functools.partial(seed_outcome, n_range=n_range, max_loss=max_loss, ordering=ordering,
                            cores=tuple(cores) if cores is not None else None,
                            messages_per_node=messages_per_node, read_batching=read_batching,
                            disk_faults=disk_faults, deaf_faults=deaf_faults,
                            clock_faults=clock_faults, impostor_faults=impostor_faults,
                            state_loss_faults=state_loss_faults)
    seeds = list(seeds)
    outcomes: list[SeedOutcome] = []
    step = max(1, len(seeds) // 50)
    bad = 0

    def note(k: int, o: SeedOutcome) -> None:
        nonlocal bad
        outcomes.append(o)
        bad += bool(o.violations)
        if progress and (k % step == 0 or k == len(seeds) or o.violations):
            state = "VIOLATION" if o.violations else "ok"
            progress(f"{k}/{len(seeds)} seeds (seed {o.seed}): {state}; "
                     f"{bad} seeds with violations so far")

    if jobs <= 1:
        for k, seed in enumerate(seeds, 1):
            note(k, one(seed))
    else:
        with concurrent.futures.ProcessPoolExecutor(jobs) as pool:
            for k, o in enumerate(pool.map(one, seeds, chunksize=4), 1):
                note(k, o)
    return summarize(outcomes, n_range=n_range, max_loss=max_loss,
                     read_batching=read_batching, disk_faults=disk_faults,
                     deaf_faults=deaf_faults, clock_faults=clock_faults,
                     impostor_faults=impostor_faults, state_loss_faults=state_loss_faults,
                     cores=tuple(cores) if cores is not None else None)
