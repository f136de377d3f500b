"""``amcast cluster``: start, run or stop N daemons on loopback multicast for local use.

``--clusters K`` starts K such clusters (``a``, ``b``, ...: subdirectories of ``--dir``)
of N daemons each, federated (``[federation]``): ``amcast send --to a,b`` through any
daemon's socket reaches the clients of the group in both.

``start`` and ``run`` refuse a directory whose recorded daemons still run (stop them first:
starting over them would orphan them); ``stop`` on a directory without a cluster fails
with one line (exit 1)."""

from __future__ import annotations

import argparse
import json
import signal
from pathlib import Path
from typing import Any

from ..argtypes import whole
from ..localcluster import LocalCluster
from ..localfederation import LocalFederation
from ._common import CommandFailed


def parse_protocol(pairs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        key, _, raw = pair.partition("=")
        try:
            out[key] = json.loads(raw)
        except ValueError:
            out[key] = raw
    return out


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("cluster", help="start/stop N daemons on this host",
                              description=__doc__)
    sub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    for name, help_text in (("start", "start in the background and return"),
                            ("run", "run in the foreground until Ctrl-C, then stop")):
        s = sub.add_parser(name, help=help_text)
        s.add_argument("--nodes", "-n", type=whole(1), default=4)
        s.add_argument("--clusters", "-k", type=whole(1), default=None,
                       help="start this many federated clusters of --nodes daemons each "
                            "(a, b, c, ... below --dir)")
        s.add_argument("--dir", type=Path, default=Path("var/cluster"),
                       help="configs, sockets and logs go here (default: %(default)s)")
        s.add_argument("--protocol", action="append", default=[], metavar="KEY=VALUE",
                       help="a [protocol] setting for every node (repeatable)")
        s.set_defaults(func=run_start if name == "start" else run_foreground)
    s = sub.add_parser("stop", help="SIGTERM the daemons started with `start`")
    s.add_argument("--dir", type=Path, default=Path("var/cluster"))
    s.set_defaults(func=run_stop)


def _start_federation(args: argparse.Namespace, detach: bool) -> LocalFederation:
    fed = LocalFederation(args.clusters, args.nodes, args.dir,
                          protocol=parse_protocol(args.protocol), log_level="info")
    fed.refuse_if_running()
    print(f"starting {args.clusters} federated clusters of {args.nodes} daemons "
          "(loopback) ...", flush=True)
    fed.start(detach=detach)
    for name, cluster in fed.members.items():
        for n in cluster.nodes:
            print(f"cluster {name} node {n.node}: pid {n.pid} socket {n.socket} "
                  f"federation 127.0.0.1:{fed.ports[name][n.node]} logs {n.log_dir}")
    return fed


def _start(args: argparse.Namespace, detach: bool) -> LocalCluster | LocalFederation:
    if args.clusters is not None:
        return _start_federation(args, detach)
    cluster = LocalCluster(args.nodes, args.dir, protocol=parse_protocol(args.protocol),
                           log_level="info")
    cluster.refuse_if_running()  # before saying it starts anything
    print(f"starting {args.nodes} daemons on {cluster.group}:{cluster.port} (loopback) ...",
          flush=True)
    cluster.start(detach=detach)
    for n in cluster.nodes:
        print(f"node {n.node}: pid {n.pid} socket {n.socket} "
              f"metrics http://127.0.0.1:{n.metrics_port}/metrics logs {n.log_dir}")
    return cluster


def run_start(args: argparse.Namespace) -> int:
    _start(args, detach=True)
    print(f"stop with: amcast cluster stop --dir {args.dir}")
    return 0


def run_foreground(args: argparse.Namespace) -> int:
    cluster = _start(args, detach=False)
    print("running; Ctrl-C stops the cluster", flush=True)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    signal.sigwait({signal.SIGINT, signal.SIGTERM})
    codes = cluster.stop()
    print(f"stopped: exit codes {codes}")
    flat = [c for v in codes.values() for c in (v.values() if isinstance(v, dict) else [v])]
    return 0 if all(c == 0 for c in flat) else 1


def run_stop(args: argparse.Namespace) -> int:
    cluster: LocalCluster | LocalFederation
    if LocalFederation.recorded(args.dir):
        cluster = LocalFederation.load(args.dir)
    else:  # ClusterStateError (exit 1) when there is none
        cluster = LocalCluster.load(args.dir)
    alive = cluster.alive()
    if not alive:
        print(f"no daemon of {args.dir} is running (already stopped)")
        return 0
    cluster.stop()
    left = cluster.alive()
    if left:
        raise CommandFailed(f"daemons {left} did not stop: kill them by pid")
    print(f"stopped {len(alive)} daemons")
    return 0
