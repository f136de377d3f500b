"""``amcast status``: a daemon's view, members, clients and queue depths, health, and rates.

``--health`` is the one-line probe (exit 0 healthy, 1 unhealthy, 2 unreachable);
``--json`` prints the whole status reply (health included) with the rates."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from amcast.client import BlockingClient, ClientTimeout, Unreachable
from amcast.commands._common import add_socket_argument
from amcast.protocols.errors import AmcastError
from amcast.report import print_report


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("status", help="show a daemon's state and rates",
                              description=__doc__)
    add_socket_argument(p)
    p.add_argument("--interval", type=float, default=1.0,
                   help="seconds between the two samples the rates come from (0: no rates)")
    p.add_argument("--json", action="store_true", help="the whole status reply as JSON")
    p.add_argument("--health", action="store_true",
                   help="health check (container HEALTHCHECK, probes): one line; exit 0 "
                        "healthy, 1 unhealthy (the daemon's first problem, or no answer "
                        "in time), 2 no daemon reachable at the socket")
    p.add_argument("--timeout", type=float, default=5.0,
                   help="seconds to wait for the daemon's answer (default %(default)s)")
    p.set_defaults(func=run)


def problems(st: dict[str, Any]) -> list[str]:
    """The daemon's health problems (``status.health``); none when it reports none.

    A daemon that predates the ``health`` field is healthy when it answers."""
    h = st.get("health")
    if not isinstance(h, dict) or h.get("ok", True):
        return []
    found = [str(p) for p in h.get("problems") or []]
    return found or ["the daemon reports itself unhealthy"]


def health(socket_path: str, timeout: float = 5.0) -> int:
    try:
        with BlockingClient(socket_path, name="amcast-health", timeout=timeout) as client:
            st = client.status()
    except Unreachable as exc:
        print(f"unreachable: {exc.detail}", file=sys.stderr)
        return 2
    except ClientTimeout:
        print(f"unhealthy: {socket_path}: no answer within {timeout:g} s (stalled?)",
              file=sys.stderr)
        return 1
    except AmcastError as exc:
        print(f"unhealthy: {socket_path}: {exc}", file=sys.stderr)
        return 1
    found = problems(st)
    if found:
        more = f" (+{len(found) - 1} more: amcast status --json)" if len(found) > 1 else ""
        print(f"unhealthy: node {st.get('node')}: {found[0]}{more}", file=sys.stderr)
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
        return health(args.socket, args.timeout)
    with BlockingClient(args.socket, name="amcast-status", timeout=args.timeout) as client:
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
            "health": "; ".join(problems(last)) or "ok",
            "next position": last["position"], "submit queue (frames)": last["submit_queue"],
            **{k: v for k, v in c.items() if not isinstance(v, dict)},
            **{f"drops {k}": v for k, v in c["drops"].items()},
            **{f"engine {k}": v for k, v in last["engine"].items()},
            **figures,
        },
    })
    return 0
