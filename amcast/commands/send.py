"""``amcast send``: multicast messages (arguments, or stdin lines) through the local daemon."""

from __future__ import annotations

import argparse
import sys

from amcast.client import SERVICES, BlockingClient
from amcast.commands._common import add_socket_argument


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("send", help="send messages to groups through amcastd",
                              description=__doc__)
    add_socket_argument(p)
    p.add_argument("--group", "-g", action="append", required=True,
                   help="destination group (repeat for several)")
    p.add_argument("--service", choices=SERVICES, default="agreed")
    p.add_argument("--wait", action="store_true",
                   help="join the groups and wait until our messages are delivered back; "
                        "print their total-order positions")
    p.add_argument("--timeout", type=float, default=10.0)
    p.add_argument("messages", nargs="*", help="messages (default: one per line of stdin)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    messages = args.messages or [line.rstrip("\n") for line in sys.stdin]
    with BlockingClient(args.socket, name="amcast-send") as client:
        if args.wait:
            client.join(*args.group)
        for m in messages:
            client.send(m.encode(), args.group, args.service)
        client.flush()
        if not args.wait:
            print(f"sent {len(messages)} message(s) via node {client.welcome['node']}")
            return 0
        me = (client.welcome["node"], client.welcome["client"])
        mine = 0
        for d in client.deliveries(args.timeout):
            if (d.sender, d.client) == me:
                print(f"{d.position if d.position is not None else '-'}\t{d.message_id}\t"
                      f"{d.service}\t{d.payload.decode(errors='replace')}")
                mine += 1
                if mine == len(messages):
                    break
    return 0
