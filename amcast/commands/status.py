"""``amcast status``: a daemon's view, members, clients and queue depths, and rates."""

from __future__ import annotations

import argparse
import json
import sys
import time

from amcast.client import BlockingClient
from amcast.commands._common import add_socket_argument
from amcast.report import print_report
from protocols.errors import AmcastError


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("status", help="show a daemon's state and rates",
                              description=__doc__)
    add_socket_argument(p)
    p.add_argument("--interval", type=float, default=1.0,
                   help="seconds between the two samples the rates come from (0: no rates)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--health", action="store_true",
                   help="health check (container HEALTHCHECK, probes): one line, exit 0 when "
                        "the daemon answers a status request, 1 otherwise")
    p.set_defaults(func=run)


def health(socket_path: str, timeout: float = 5.0) -> int:
    try:
        with BlockingClient(socket_path, name="amcast-health", timeout=timeout) as client:
            st = client.status()
    except (OSError, AmcastError) as exc:
        print(f"unhealthy: {socket_path}: {exc}", file=sys.stderr)
        return 1
    print(f"healthy: node {st['node']} view {st['view']} members {st['members']} "
          f"position {st['position']}")
    return 0


def rates(a: dict, b: dict) -> dict[str, float]:
    dt = max(1e-9, b["now"] - a["now"])
    keys = ("messages_sent", "messages_delivered", "datagrams_sent", "datagrams_received",
            "message_bytes_delivered")
    return {f"{k}_per_s": (b["counters"][k] - a["counters"][k]) / dt for k in keys}


def run(args: argparse.Namespace) -> int:
    if args.health:
        return health(args.socket)
    with BlockingClient(args.socket, name="amcast-status") as client:
        first = client.status()
        if args.interval > 0:
            time.sleep(args.interval)
            last = client.status()
        else:
            last = first
    figures = rates(first, last) if last is not first else {}
    if args.json:
        print(json.dumps({**last, "rates": figures}))
        return 0
    c = last["counters"]
    print_report({
        "title": f"amcastd node {last['node']}: view {last['view']} members {last['members']} "
                 f"({last['variant']}), up {last['uptime_s']:.0f} s",
        "tables": [{
            "title": "clients",
            "columns": ["client", "name", "groups", "queued bytes", "paused"],
            "rows": [[x["client"], x["name"], ",".join(x["groups"]), x["queued_bytes"],
                      ",".join(x["paused"]) or "-"] for x in last["clients"]],
        }],
        "figures": {
            "next position": last["position"], "submit queue (frames)": last["submit_queue"],
            **{k: v for k, v in c.items() if not isinstance(v, dict)},
            **{f"drops {k}": v for k, v in c["drops"].items()},
            **{f"engine {k}": v for k, v in last["engine"].items()},
            **figures,
        },
    })
    return 0
