"""``amcast listen``: join groups and print every delivered message, in delivery order."""

from __future__ import annotations

import argparse
import json

from amcast.client import BlockingClient, DeliveredBatch, MembersChange
from amcast.commands._common import add_socket_argument


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("listen", help="print deliveries of groups", description=__doc__)
    add_socket_argument(p)
    p.add_argument("--group", "-g", action="append", required=True, help="group to join")
    p.add_argument("--count", "-n", type=int, help="exit after this many messages")
    p.add_argument("--timeout", type=float, help="exit after this many idle seconds")
    p.add_argument("--json", action="store_true", help="one JSON object per message")
    p.add_argument("--members", action="store_true",
                   help="print one '#' line per group membership change of the groups")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    seen = 0
    with BlockingClient(args.socket, name="amcast-listen") as client:
        client.join(*args.group, members=args.members)
        while args.count is None or seen < args.count:
            try:
                item = client.next_event(args.timeout)
            except TimeoutError:
                break
            if isinstance(item, MembersChange):
                names = " ".join(f"{n}/{c}" + (f"({name})" if name else "")
                                 for n, c, name in item.members)
                print(f"# members {item.group} {item.cause} view {item.view} position "
                      f"{item.position}: {names}", flush=True)
                continue
            if not isinstance(item, DeliveredBatch):
                print(f"# view {item.view} members {item.members}", flush=True)
                continue
            for d in item:
                text = d.payload.decode(errors="replace")
                if args.json:
                    print(json.dumps({"position": d.position, "id": d.message_id,
                                      "sender": d.sender, "client": d.client,
                                      "groups": list(d.groups), "service": d.service,
                                      "view": d.view, "payload": text}), flush=True)
                else:
                    pos = "-" if d.position is None else d.position
                    print(f"{pos}\t{d.sender}/{d.client}\t{d.service}\t{','.join(d.groups)}\t"
                          f"{text}", flush=True)
                seen += 1
                if args.count is not None and seen >= args.count:
                    break
    return 0
