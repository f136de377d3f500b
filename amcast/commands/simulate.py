"""``amcast simulate``: the deterministic simulator of processors ordering a causal DAG.

``--preset section7`` reproduces section 7 of the ToTo paper; ``--preset custom`` runs
one ordering study from the flags. ``--preset faults`` runs full Nodes (wire, reliable
causal layer, ordering engine) over the lossy simulated network for a range of seeds and
checks agreement, total order, causal order, integrity and validity after every run: the
long version of the CI sweep (exit status 1 if any seed violates a property).
``--preset membership`` does the same under crashes, restarts, pauses, joins, leaves and
partitions, checking virtual synchrony too (``--jobs`` runs seeds in parallel;
``--read-batching-ms`` makes the Nodes read arrivals in batches, as a daemon does;
``--disk-faults`` adds a full disk at one node per seed, ``--deaf-faults`` a node that
hears nothing but is heard, ``--clock-faults`` a node whose clock is off for a while;
``--ordering arrow|combining|hybrid`` orders with a swap ordering, docs/swap.md).
``--preset multigroup`` runs SCALATOM (atomic multicast to several groups, Scalable
Atomic Multicast) in its own simulator for ``--seeds`` seeds under crashes, false
suspicions, loss and reordering, and checks every run with the global acyclicity
oracle, uniform agreement, termination and participant minimality (``failed`` lists
the seeds that violate one; exit status 1 then). ``--protocol production`` runs the
production protocol instead (Skeen's timestamps over ordered clusters, three message
delays), under partitions inside clusters too; ``--protocol federation`` runs the
federation layer the daemons run (``protocols/federation``: Skeen over amcast clusters,
each cluster's safe order modelled) under loss, duplication and reordering between
clusters, member crashes and restarts as joiners, members cut off from their cluster's
order and whole clusters unreachable for seconds.
``--plot`` draws the latency distributions; ``--json`` prints one JSON object with the same figures.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..argtypes import non_negative, number, positive, whole
from ..protocols.errors import ConfigurationError
from ..protocols.ordering import DEFAULT_RULE, OrderingRule
from ..protocols.simulation.causal_broadcast import Topology, Workload
from ..protocols.simulation.ordering_study import Study, run_study, section7
from ..report import print_report

CORE_MIXES = {"native": ("native",), "pure": ("pure",), "mixed": ("native", "pure")}
"""``--core``: each node's data-path core (``Cluster``'s ``cores``)."""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "simulate",
        help="simulate n processors ordering messages (virtual time, seeded)",
        description=__doc__.splitlines()[0],
    )
    p.add_argument("--preset",
                   choices=["section7", "custom", "faults", "membership", "multigroup"],
                   default="section7")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--duration", type=positive, default=10.0, help="virtual seconds of sending")
    p.add_argument("--n", type=whole(1), default=8, help="processors (custom)")
    p.add_argument("--rate", type=positive, default=50.0, help="msgs/s per sender (custom)")
    p.add_argument("--delay-ms", type=non_negative, default=0.5, help="mean network delay (custom)")
    p.add_argument("--lans", type=int, choices=[1, 2], default=1, help="1 bus or 2 LANs")
    p.add_argument("--gateway-ms", type=non_negative, default=20.0, help="gateway delay, 2 LANs")
    p.add_argument(
        "--slow", type=whole(0), action="append", default=[], help="index of a 10x slower node"
    )
    p.add_argument(
        "--rules",
        default=",".join(r.value for r in OrderingRule),
        help="comma-separated rules, each optionally rule:phi (custom)",
    )
    faults = p.add_argument_group("--preset faults (full Nodes over a lossy network)")
    faults.add_argument("--seeds", type=whole(1), default=1000, help="number of seeds to run")
    faults.add_argument("--n-min", type=whole(2), default=3, help="smallest cluster")
    faults.add_argument("--n-max", type=whole(2), default=8, help="largest cluster")
    faults.add_argument("--max-loss", type=number(0, maximum=0.9), default=0.2,
                        help="loss rates spread over 0..this")
    faults.add_argument("--duplicate", type=number(0, maximum=1), default=0.2,
                        help="duplication rate")
    faults.add_argument("--reorder", type=number(0, maximum=1), default=0.2, help="reordering rate")
    faults.add_argument("--messages", type=whole(1), default=12, help="messages per node and seed")
    faults.add_argument("--rule", default=DEFAULT_RULE.value, choices=[r.value for r in OrderingRule
                                                           if r.value != "toto"],
                        help="ordering rule of the Nodes")
    faults.add_argument("--ordering", default="toto",
                        choices=["toto", "arrow", "combining", "hybrid"],
                        help="who orders: the ToTo rules (each seed draws one) or a swap "
                             "ordering, arrow, combining or hybrid (membership)")
    faults.add_argument("--disk-faults", action="store_true",
                        help="a full disk at one node per seed, often with a restart during "
                             "it (membership)")
    faults.add_argument("--deaf-faults", action="store_true",
                        help="a node that hears nothing but is heard, for 2 to 30 suspect "
                             "timeouts, per seed (membership)")
    faults.add_argument("--clock-faults", action="store_true",
                        help="a node whose wall clock is off for 2 to 20 suspect timeouts, "
                             "mostly beyond the replay window, per seed (membership)")
    faults.add_argument("--impostor-faults", action="store_true",
                        help="a second daemon started with a member's id, then stopped, "
                             "often followed by a member's crash, per seed (membership)")
    faults.add_argument("--state-loss-faults", action="store_true",
                        help="a member that loses its state directory and starts again "
                             "without it, per seed (membership)")
    faults.add_argument("--core", choices=sorted(CORE_MIXES),
                        help="the data path's core of every node: native or pure, or mixed "
                             "(native and pure alternating); default: AMCAST_CORE "
                             "(membership)")
    faults.add_argument("--read-batching-ms", type=number(0, maximum=1000), default=0.0,
                        help="nodes read arrivals in batches as the daemon does, waking "
                             "within this many ms (faults and membership; 0: one by one)")
    p.add_argument("--protocol", choices=["scalatom", "production", "federation"],
                   default="scalatom",
                   help="the multigroup protocol (--preset multigroup)")
    p.add_argument("--jobs", type=whole(1), default=1,
                   help="processes running seeds in parallel (--preset membership)")
    p.add_argument("--plot", type=Path, help="write latency distributions to this PNG")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=run, parser=p)


def _progress(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    if args.quiet or args.json:
        return None
    return lambda line: print(f"... {line}", file=sys.stderr, flush=True)


def _variants(spec: str) -> list[tuple[OrderingRule, float | None]]:
    out = []
    for item in spec.split(","):
        rule, _, phi = item.strip().partition(":")
        out.append((OrderingRule(rule), float(phi) if phi else None))
    return out


def run_faults(args: argparse.Namespace) -> int:
    from ..protocols.simulation.cluster import run_cluster_simulation

    if args.n_min > args.n_max:
        raise ConfigurationError("--n-min must be <= --n-max")
    seeds = range(args.seed, args.seed + args.seeds)
    report = run_cluster_simulation(
        seeds, n_range=(args.n_min, args.n_max), max_loss=args.max_loss,
        duplicate=args.duplicate, reorder=args.reorder, messages_per_node=args.messages,
        rule=args.rule, progress=_progress(args), read_batching=args.read_batching_ms / 1000,
    )
    ok = report.pop("ok")
    print_report(report, as_json=args.json)
    return 0 if ok else 1


def run_membership(args: argparse.Namespace) -> int:
    """The membership sweep, over ``--jobs`` processes; progress on stderr."""
    from ..protocols.simulation import membership_sweep as sweep

    if args.n_min > args.n_max:
        raise ConfigurationError("--n-min must be <= --n-max")
    seeds = range(args.seed, args.seed + args.seeds)
    report = sweep.run_membership_sweep(
        seeds, n_range=(args.n_min, min(args.n_max, 16)), max_loss=args.max_loss,
        messages_per_node=args.messages * 3, progress=_progress(args), jobs=args.jobs,
        read_batching=args.read_batching_ms / 1000, disk_faults=args.disk_faults,
        deaf_faults=args.deaf_faults, clock_faults=args.clock_faults,
        impostor_faults=args.impostor_faults, state_loss_faults=args.state_loss_faults,
        ordering=args.ordering,
        cores=CORE_MIXES[args.core] if args.core is not None else None)
    ok = report.pop("ok")
    print_report(report, as_json=args.json)
    return 0 if ok else 1


def run_multigroup(args: argparse.Namespace) -> int:
    """The SCALATOM (or production protocol) sweep: ``seeds`` and ``failed`` (the seeds
    with a violation)."""
    from ..protocols.multigroup.simulation import PRODUCTION, SweepConfig, sweep

    if args.protocol == "federation":
        return run_federation(args)
    production = args.protocol == "production"
    result = sweep(range(args.seed, args.seed + args.seeds),
                   PRODUCTION if production else SweepConfig(), progress=_progress(args),
                   protocol=args.protocol)
    failed: list[int] = result["failed"]  # type: ignore[assignment]
    name = "production protocol" if production else "SCALATOM"
    report = {
        "title": f"amcast simulate --preset multigroup ({name}, virtual time, seeded)",
        "protocol": args.protocol,
        "seeds": result["seeds"], "failed": failed,
        "figures": {"seeds": result["seeds"], "seeds failed": len(failed),
                    "deliveries": result["deliveries"]},
        "notes": [f"seed {seed}: {'; '.join(v)}"
                  for seed, v in result["violations"].items()],  # type: ignore[attr-defined]
    }
    print_report(report, as_json=args.json)
    return 1 if failed else 0


def run_federation(args: argparse.Namespace) -> int:
    """The federation layer's sweep: ``seeds`` and ``failed``, the totals, and the
    failure-free message delays counted in its simulation."""
    from ..protocols.federation.simulation import count_delays, sweep

    result = sweep(range(args.seed, args.seed + args.seeds), progress=_progress(args))
    failed: list[int] = result.pop("failed")  # type: ignore[assignment]
    violations: dict[int, list[str]] = result.pop("violations")  # type: ignore[assignment]
    delays = count_delays()
    report = {
        "title": "amcast simulate --preset multigroup (federation layer, virtual time, "
                 "seeded)",
        "protocol": "federation",
        "seeds": result["seeds"], "failed": failed,
        "figures": {**result, "seeds failed": len(failed),
                    "failure-free delays": f"{delays['hops']} inter-cluster hops + "
                                           f"{delays['safe orderings']} safe orderings"},
        "notes": [f"seed {seed}: {'; '.join(v)}" for seed, v in violations.items()],
    }
    print_report(report, as_json=args.json)
    return 1 if failed else 0


STUDIES = ("section7", "custom")
SWEEPS = ("faults", "membership")
READ_BY: dict[str, tuple[str, ...]] = {
    "duration": STUDIES, "plot": STUDIES,
    "n": ("custom",), "rate": ("custom",), "delay_ms": ("custom",), "lans": ("custom",),
    "gateway_ms": ("custom",), "slow": ("custom",), "rules": ("custom",),
    "seeds": (*SWEEPS, "multigroup"), "n_min": SWEEPS, "n_max": SWEEPS, "max_loss": SWEEPS,
    "messages": SWEEPS, "read_batching_ms": SWEEPS,
    "duplicate": ("faults",), "reorder": ("faults",), "rule": ("faults",),
    "disk_faults": ("membership",), "deaf_faults": ("membership",),
    "clock_faults": ("membership",), "impostor_faults": ("membership",),
    "state_loss_faults": ("membership",),
    "jobs": ("membership",), "core": ("membership",), "protocol": ("multigroup",),
    "ordering": ("membership",),
}
"""The presets that read each option (``--seed``, ``--json`` and ``--quiet``: all)."""


def _refuse_ignored_flags(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """An option the chosen preset would ignore is an error, not a silent no-op."""
    for action in parser._actions:
        presets = READ_BY.get(action.dest)
        if (presets is not None and args.preset not in presets
                and getattr(args, action.dest) != action.default):
            raise ConfigurationError(f"{action.option_strings[0]} applies to --preset "
                                     f"{' and '.join(presets)}, not {args.preset}")


def run(args: argparse.Namespace) -> int:
    _refuse_ignored_flags(args, args.parser)
    if args.preset == "faults":
        return run_faults(args)
    if args.preset == "membership":
        return run_membership(args)
    if args.preset == "multigroup":
        return run_multigroup(args)
    progress = _progress(args)
    if args.preset == "section7":
        report, results = section7(seed=args.seed, duration=args.duration, progress=progress)
    else:
        beyond = [i for i in args.slow if i >= args.n]
        if beyond:
            raise ConfigurationError(f"--slow {beyond[0]}: the processors are 0..{args.n - 1} "
                                     f"(--n {args.n})")
        half = args.delay_ms / 2000
        study = Study(
            "custom",
            Workload(n=args.n, rate=args.rate, duration=args.duration),
            Topology(
                base=half,
                jitter=half,
                lans=args.lans,
                gateway=args.gateway_ms / 1000,
                slow=tuple(args.slow),
            ),
            _variants(args.rules),
        )
        table, custom = run_study(study, args.seed, progress)
        report = {"title": "amcast simulate (virtual time, seeded)", "tables": [table]}
        results = {"custom": custom}
    if args.plot:
        from ..plots import latency_cdfs

        panels = {
            name: {f"{r.rule.value} phi={r.phi:g}": r.latencies for r in rs}
            for name, rs in results.items()
        }
        latency_cdfs(panels, args.plot)
        report.setdefault("notes", []).append(f"latency distributions plotted in {args.plot}")
    print_report(report, as_json=args.json)
    return 0
