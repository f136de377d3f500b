"""``amcast state PATH``: what a daemon's membership state file holds, in words.

PATH is a state file (``node-<id>.state``) or a ``node.state_dir`` (every state file in
it). For each: the daemon life's incarnation, the last view it knew (its members with
their incarnations, the list of potential members its successor's quorum counts, and how
many of them must agree), the highest view id it saw, the ballot it promised and the
proposal it accepted (and whether it held that proposal's cut). It reads the file only:
run it beside a stopped or a running daemon. Use it when a restarted cluster forms no
view (docs/membership.md, *Shrinking the member list*). A missing file is exit status 1,
a damaged one 2.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from ..protocols.errors import ConfigurationError
from ..protocols.membership.durable import DurableState
from ..protocols.membership.quorum import needed
from ..protocols.wire.membership import ViewRecord
from ._common import CommandFailed

FILE = re.compile(r"node-(\d+)\.state")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "state", help="show what a daemon's membership state file holds",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("path", type=Path, help="a node-<id>.state file or a node.state_dir")
    p.add_argument("--json", action="store_true", help="print one JSON object per file")
    p.set_defaults(func=run)


def state_files(path: Path) -> list[tuple[Path, int]]:
    """(file, node id) of ``path``: the file itself, or every state file of a directory."""
    if path.is_dir():
        found = sorted((p, int(m.group(1))) for p in path.iterdir()
                       if (m := FILE.fullmatch(p.name)))
        if not found:
            raise CommandFailed(f"no node-<id>.state file in {path}")
        return found
    m = FILE.fullmatch(path.name)
    if m is None:
        raise ConfigurationError(f"{path}: not a state file (named node-<id>.state)")
    if not path.exists():
        raise CommandFailed(f"no state file at {path} (a daemon that never started there)")
    return [(path, int(m.group(1)))]


def read(path: Path, node: int) -> DurableState:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CommandFailed(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        return DurableState.decode(data, node)
    except ConfigurationError as exc:
        raise ConfigurationError(f"{path}: {exc}") from None


def _view(v: ViewRecord | None) -> dict[str, Any] | None:
    if v is None:
        return None
    return {"id": v.view_id, "previous": v.prev_id or None,
            "members": {str(m.node): m.incarnation for m in v.members},
            "listed": list(v.potential), "needed": needed(v.potential)}


def as_dict(path: Path, s: DurableState) -> dict[str, Any]:
    accepted = None
    if s.accepted is not None:
        ballot, proposal = s.accepted
        accepted = {"ballot": [ballot.number, ballot.node], "view": _view(proposal.view),
                    "after": None if proposal.prev is None else proposal.prev.view_id,
                    "held_cut": s.accepted_held}
    return {"file": str(path), "node": s.node_id, "incarnation": s.incarnation,
            "origin": s.origin or None, "lives": list(s.lives),
            "last_view": _view(s.known), "max_view_id": s.max_view_id,
            "promised": [s.promised.number, s.promised.node], "accepted": accepted}


def describe(d: dict[str, Any]) -> list[str]:
    began = (f", the file begun at incarnation {d['origin']}" if d.get("origin")
             else "")
    lines = [f"{d['file']}: node {d['node']}, incarnation {d['incarnation']}{began}"]
    v = d["last_view"]
    if v is None:
        lines.append("  last view: none known (a first start, or one that never joined)")
    else:
        members = ", ".join(f"{n} (incarnation {i})" for n, i in v["members"].items())
        lines.append(f"  last view: {v['id']}" + (f" after view {v['previous']}"
                                                    if v["previous"] else "")
                     + f"; members {members}")
        lines.append(f"  its list: {v['listed']}: {v['needed']} of them must agree on the "
                     "next view (more with protocol.expected_votes; and a majority of "
                     "node.members, if that differs)")
    if d.get("lives"):
        lines.append("  incarnations it started, latest last: "
                     + ", ".join(str(i) for i in d["lives"]))
    lines.append(f"  highest view id seen: {d['max_view_id']}")
    number, node = d["promised"]
    lines.append("  promised: nothing" if number == 0 else
                 f"  promised: ballot {number} of node {node}")
    a = d["accepted"]
    if a is None:
        lines.append("  accepted: nothing")
    else:
        nodes = [int(n) for n in a["view"]["members"]]
        lines.append(f"  accepted: view {a['view']['id']} of {nodes} "
                     f"after view {a['after']}, at ballot {a['ballot'][0]} of node "
                     f"{a['ballot'][1]}"
                     + ("" if a["held_cut"] else ", not holding its cut"))
    return lines


def run(args: argparse.Namespace) -> int:
    records = [as_dict(p, read(p, n)) for p, n in state_files(args.path)]
    for d in records:
        print(json.dumps(d) if args.json else "\n".join(describe(d)))
    return 0
