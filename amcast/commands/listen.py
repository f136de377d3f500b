"""``amcast listen``: join groups and print every delivered message, in delivery order.

Each delivery is one line of tab-separated columns:

  POSITION  SENDER/CLIENT  SERVICE  GROUPS  PAYLOAD
  17        2/5            agreed   orders  hello

POSITION is the message's place in the total order (``-`` for a message of the causal
service, which is not totally ordered), SENDER/CLIENT the node id of the sending daemon
and the number of its client there, SERVICE the delivery service it was sent with
(``amcast send --service``), GROUPS the groups it was addressed to (comma-separated) and
PAYLOAD its bytes as text.

Between deliveries it prints one ``#`` line per view change (id, primary or not, members,
who joined/left/was excluded, or why the primary view was lost), per order gap (the
daemon rejoined and missed part of the total order), per undelivered report and, with
``--members``, per group membership change. With ``--json`` every line is one JSON
object whose ``event`` key is ``deliver``, ``view``, ``gap``, ``undelivered`` or
``members``."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..argtypes import positive, whole
from ..client import (
    BlockingClient,
    DeliveredBatch,
    Event,
    MembersChange,
    OrderGap,
    Undelivered,
    ViewChange,
)
from ._common import add_socket_argument


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("listen", help="print deliveries of groups", description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    add_socket_argument(p)
    p.add_argument("--group", "-g", action="append", required=True, help="group to join")
    p.add_argument("--count", "-n", type=whole(1), help="exit after this many messages")
    p.add_argument("--timeout", type=positive, help="exit after this many idle seconds")
    p.add_argument("--json", action="store_true",
                   help="one JSON object per line, with an event key")
    p.add_argument("--members", action="store_true",
                   help="also print one '#' line (or JSON object) per membership change "
                        "of the groups: who (node/client) joined or left, and why")
    p.set_defaults(func=run)


def _nodes(nodes: list[int]) -> str:
    return ",".join(map(str, nodes)) if nodes else "-"


Notice = ViewChange | OrderGap | Undelivered | MembersChange


def _clients(members: list[tuple[int, int, str]]) -> str:
    return " ".join(f"{n}/{c}" + (f"({name})" if name else "") for n, c, name in members) or "-"


def event_text(item: Notice) -> str:
    """The ``#`` line of a view change, an order gap, an undelivered report or a group
    membership change."""
    if isinstance(item, MembersChange):
        return (f"# members {item.group} {item.cause} view {item.view} position "
                f"{item.position}: {_clients(item.members)}")
    if isinstance(item, ViewChange):
        if item.primary:
            prev = "" if item.previous is None else f" previous {item.previous}"
            return (f"# view {item.view} primary members {_nodes(item.members)}{prev} "
                    f"joined {_nodes(item.joined)} left {_nodes(item.left)} "
                    f"excluded {_nodes(item.excluded)}")
        return (f"# view {item.view} not primary ({item.reason or 'unknown'}) "
                f"reachable {_nodes(item.members)}")
    if isinstance(item, OrderGap):
        since = ("nothing remembered" if item.after is None
                 else f"view {item.after[0]} position {item.after[1]}")
        return f"# gap before view {item.view}: missed the total order after {since}"
    last = item.messages.stop - 1
    why = f" [{item.reason}, outcome {item.outcome or 'unknown'}]" if item.reason else ""
    return (f"# undelivered {item.count} message(s) {item.first}..{last}{why}: "
            f"{item.detail or 'not delivered by the primary component'}")


def event_json(item: Notice) -> dict[str, Any]:
    """The JSON object of a view change, an order gap, an undelivered report or a group
    membership change."""
    if isinstance(item, MembersChange):
        return {"event": "members", "group": item.group, "cause": item.cause,
                "view": item.view, "position": item.position,
                "members": [list(m) for m in item.members],
                "joined": [list(m) for m in item.joined], "left": [list(m) for m in item.left]}
    if isinstance(item, ViewChange):
        out: dict[str, Any] = {"event": "view", "view": item.view, "members": item.members,
                               "primary": item.primary}
        if item.primary:
            out.update(previous=item.previous, joined=item.joined, left=item.left,
                       excluded=item.excluded)
        else:
            out["reason"] = item.reason
        return out
    if isinstance(item, OrderGap):
        return {"event": "gap", "view": item.view,
                "after": None if item.after is None else list(item.after)}
    out = {"event": "undelivered", "first": item.first, "count": item.count,
           "detail": item.detail}
    if item.outcome:
        out["outcome"] = item.outcome
    if item.reason:
        out["reason"] = item.reason
    if item.clusters:
        out["clusters"] = list(item.clusters)
    return out


def _other(item: Event, as_json: bool) -> None:
    assert not isinstance(item, DeliveredBatch)
    print(json.dumps(event_json(item)) if as_json else event_text(item), flush=True)


def run(args: argparse.Namespace) -> int:
    seen = 0
    with BlockingClient(args.socket, name="amcast-listen") as client:
        client.join(*args.group, members=args.members)
        while args.count is None or seen < args.count:
            try:
                item = client.next_event(args.timeout)
            except TimeoutError:
                break
            if not isinstance(item, DeliveredBatch):
                _other(item, args.json)
                continue
            for d in item:
                text = d.payload.decode(errors="replace")
                if args.json:
                    print(json.dumps({"event": "deliver", "position": d.position,
                                      "id": d.message_id, "sender": d.sender,
                                      "client": d.client, "groups": list(d.groups),
                                      "service": d.service, "view": d.view,
                                      "payload": text}), flush=True)
                else:
                    pos = "-" if d.position is None else d.position
                    print(f"{pos}\t{d.sender}/{d.client}\t{d.service}\t{','.join(d.groups)}\t"
                          f"{text}", flush=True)
                seen += 1
                if args.count is not None and seen >= args.count:
                    break
    return 0
