"""``amcast status``: a daemon's view, members, peers, quorum, clients, health and rates.

The text starts with the view (id, primary or not, members), the last view change with
its cause and age, the quorum, and a peers table (seconds since each was last heard).
The clients table shows each connected client's identity as the kernel gave it to the
daemon (user and uid, group and gid, pid; ``[access]`` decides on them).
``--health`` is the one-line probe (exit 0 healthy, 1 unhealthy: not in a primary view,
cannot order, shutting down, or no answer; 2 unreachable); ``--json`` prints the whole
status reply (``view.id``, ``view.members``, ``view.primary``, ``peers[].last_heard_s``,
``quorum``, health) with the rates."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from ..argtypes import non_negative, positive
from ..client import BlockingClient, ClientTimeout, Unreachable
from ..protocols.errors import AmcastError
from ..report import print_report
from ._common import add_socket_argument


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("status", help="show a daemon's state and rates",
                              description=__doc__)
    add_socket_argument(p)
    p.add_argument("--interval", type=non_negative, default=1.0,
                   help="seconds between the two samples the rates come from (0: no rates)")
    p.add_argument("--json", action="store_true", help="the whole status reply as JSON")
    p.add_argument("--health", action="store_true",
                   help="health check (container HEALTHCHECK, probes): one line; exit 0 "
                        "healthy, 1 unhealthy (the daemon's first problem, or no answer "
                        "in time), 2 no daemon reachable at the socket")
    p.add_argument("--timeout", type=positive, default=5.0,
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


def warnings(st: dict[str, Any]) -> list[str]:
    """What the daemon asks an operator to act on without being unhealthy."""
    h = st.get("health")
    return [str(w) for w in (h.get("warnings") or [])] if isinstance(h, dict) else []


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
    view = view_of(st)
    print(f"healthy: node {st.get('node')} view {view['id']} members {view['members']} "
          f"position {st.get('position')}")
    return 0


def view_of(st: dict[str, Any]) -> dict[str, Any]:
    """The status reply's ``view`` object (a daemon before membership sent bare fields)."""
    view = st.get("view")
    if isinstance(view, dict):
        return view
    return {"id": view, "members": st.get("members", []), "primary": True, "last_change": {}}


def describe_change(change: dict[str, Any], now: float | None) -> str:
    """``view 7 (3 s ago): joined [3]; excluded [1]`` or ``lost primary view 7: no_quorum``."""
    if not change:
        return "none yet"
    at = change.get("at")
    age = f" ({now - at:.1f} s ago)" if isinstance(at, int | float) and now is not None else ""
    if not change.get("primary", True):
        reach = change.get("reachable")
        return (f"lost primary view {change.get('view')}{age}: {change.get('reason')}"
                + (f", reachable {reach}" if reach is not None else ""))
    parts = [f"{k} {change[k]}" for k in ("joined", "left", "excluded") if change.get(k)]
    prev = change.get("previous")
    return (f"view {change.get('view')}{age} after view {prev}: "
            + ("; ".join(parts) or "same members"))


def core_text(st: dict[str, Any]) -> str:
    """``, decoder native`` and the like: the parts of the data path a native core runs
    (``Daemon.core``; nothing when everything is the Python reference, or from a daemon
    that does not say)."""
    core = st.get("core") or {}
    native = [part for part, impl in sorted(core.items()) if impl in ("native", "compiled")]
    return f", native: {'+'.join(native)}" if native else ""


def membership_report(st: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """Header lines and the peers table of the text output."""
    view = view_of(st)
    primary = "primary" if view.get("primary") else "NOT PRIMARY (nothing ordered is delivered)"
    lines = [f"view {view['id']} {primary}, members {view['members']}",
             f"last view change: {describe_change(view.get('last_change') or {}, st.get('now'))}"]
    q = st.get("quorum") or {}
    if q:
        line = (f"quorum: {q.get('reachable')} of {q.get('listed')} listed nodes "
                f"reachable, {q.get('needed')} needed")
        last = q.get("last_view")
        if last:
            short = last.get("reachable", 0) < last.get("needed", 0)
            line += (f"; the last view (id {last.get('id')}) listed {last.get('nodes')}: "
                     f"{last.get('reachable')} of them reachable, {last.get('needed')} needed "
                     f"to agree on the next view{' (SHORT)' if short else ''}")
        if q.get("not_counted"):
            line += (f"; votes not counted (not the state the last view listed): "
                     f"{q['not_counted']}")
        lines.append(line)
    if "keys" in st:
        lines.append(keys_line(st["keys"]))
    if "transport" in st:
        lines.append(transport_line(st))
    logs = st.get("logs") or {}
    if logs.get("errors"):
        lines.append(f"logs: CANNOT WRITE ({logs.get('write_failures')} refused writes; records "
                     f"are lost, deliveries go on): {'; '.join(logs['errors'])}")
    rows = [[p["node"], identifier(p.get("incarnation")), _in_view(p),
             "yes" if p.get("alive") else "SUSPECTED",
             "never" if p.get("last_heard_s") is None else round(p["last_heard_s"], 2),
             _clock(p)]
            for p in st.get("peers") or []]
    table = {"title": "peers", "columns": ["node", "incarnation", "in view", "alive",
                                            "last heard (s ago)", "clock (s ahead)"],
             "rows": rows}
    return lines, table


def _clock(peer: dict[str, Any]) -> str:
    """``+0.002``: how far its clock is ahead of this host's (its send times); ``-``: not
    heard lately (or insecure); ``+61.0 REFUSED ...``: beyond the replay window."""
    offset = peer.get("clock_offset_s")
    if offset is None:
        return "-"
    if peer.get("clock_refused"):
        return f"{offset:+.1f} REFUSED (beyond protocol.replay_window: sync the clocks)"
    return f"{offset:+.3f}"


def _in_view(peer: dict[str, Any]) -> str:
    """``yes``, ``no``, or on the coordinator ``no, HELD BACK 12.8 s``: the peer is heard
    but answered no view change that would take it in (it may not hear this node); or
    ``no, AWAITED 30.2 s``: the view change is blocked until this peer, not heard from,
    starts again (it may have decided the view)."""
    awaited = peer.get("awaited_s")
    if awaited is not None:
        return (f"no, AWAITED {awaited:.1f} s (may have decided the view change: start it "
                "from its state dir)")
    if peer.get("in_view"):
        return "yes"
    held = peer.get("held_back_s")
    return "no" if held is None else f"no, HELD BACK {held:.1f} s (may not hear us)"


def transport_line(st: dict[str, Any]) -> str:
    """``transport: unicast``, and per redundant link its address and counters (a cut
    link's received count stops growing)."""
    links = st.get("links") or []
    return f"transport: {st['transport']}" + "".join(
        f"; link {i} {link.get('interface') or 'default'}:{link.get('port')} sent "
        f"{link.get('datagrams_sent')} received {link.get('datagrams_received')}"
        for i, link in enumerate(links))


def keys_line(keys: dict[str, Any]) -> str:
    """``keys: 1,2; sending with 1; peers 1: 1 (holds 2), 2: 1 (holds 1)`` (a rollover in
    progress), or the INSECURE warning."""
    if not keys.get("sealed"):
        return "keys: INSECURE (protocol.insecure: datagrams are not encrypted)"
    peers = ", ".join(f"{p['node']}: {p['sends_with']} (holds {p['newest']})"
                      for p in keys.get("peers") or [])
    return (f"keys: {','.join(map(str, keys.get('ids') or []))}; sending with "
            f"{keys.get('sends_with')}" + (f"; peers {peers}" if peers else ""))


def identity(client: dict[str, Any], name: str, number: str) -> str:
    """``alice (1000)``, ``1000`` when the name did not resolve, ``-`` when the daemon
    knows no credentials (or predates them)."""
    num = client.get(number)
    if num is None:
        return "-"
    return f"{client[name]} ({num})" if client.get(name) else str(num)


def is_identifier(key: str) -> bool:
    """A figure that names something (an incarnation, a view id), not a quantity."""
    return key.endswith(("incarnation", "_id", "pid"))


def identifier(value: Any) -> Any:
    """An id as plain digits (``1795786823953``): the report groups the digits of
    quantities only."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


def rates(a: dict, b: dict) -> dict[str, float]:
    dt = max(1e-9, b["now"] - a["now"])
    keys = ("messages_sent", "messages_delivered", "datagrams_sent", "datagrams_received",
            "message_bytes_delivered")
    return {f"{k}_per_s": (b["counters"][k] - a["counters"][k]) / dt for k in keys}


def federation_tables(st: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    """A federation's header line, its clusters table and the cross-cluster messages in
    flight (none when the daemon runs no ``[federation]``)."""
    fed = st.get("federation")
    if not isinstance(fed, dict):
        return [], []
    line = (f"federation: cluster {fed.get('cluster')} (cross-cluster address "
            f"{fed.get('address')}), {fed.get('in_flight')} message(s) in flight, "
            f"{fed.get('sent')} sent, {fed.get('delivered')} delivered, "
            f"{fed.get('stalled')} stall report(s)")
    drops = fed.get("remote_drops") or {}
    if drops:
        line += "; remote datagrams refused: " + ", ".join(f"{k} {v}"
                                                           for k, v in drops.items())
    clusters = {"title": "clusters", "columns": ["cluster", "members", "reachable",
                                                 "last heard (s ago)"],
                "rows": [[name, c.get("members"),
                          "this one" if name == fed.get("cluster") else
                          ("yes" if c.get("reachable") else "NO"),
                          "-" if c.get("last_heard_s") is None else c["last_heard_s"]]
                         for name, c in (fed.get("clusters") or {}).items()]}
    messages = fed.get("messages") or []
    columns = sorted({k for m in messages for k in m})
    flights = {"title": "cross-cluster messages in flight", "columns": columns,
               "rows": [[json.dumps(m.get(k)) if isinstance(m.get(k), list | dict)
                         else m.get(k) for k in columns] for m in messages]}
    return [line], [clusters, *([flights] if messages else [])]


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
    header, peers = membership_report(last)
    fed_lines, fed_tables = federation_tables(last)
    print_report({
        "title": "\n".join([f"amcastd node {last['node']} ({last['variant']}{core_text(last)}), "
                             f"up {last['uptime_s']:.0f} s", *header, *fed_lines]),
        "tables": [*([peers] if peers["rows"] else []), *fed_tables, {
            "title": "clients",
            "columns": ["client", "name", "user (uid)", "group (gid)", "pid", "groups",
                        "queued bytes", "paused"],
            "rows": [[x["client"], x["name"], identity(x, "user", "uid"),
                      identity(x, "group", "gid"), identifier(x.get("pid", "-")),
                      ",".join(x["groups"]),
                      x["queued_bytes"], ",".join(x["paused"]) or "-"]
                     for x in last["clients"]],
        }],
        "figures": {
            "health": "; ".join(problems(last)) or "ok",
            **({"warnings": "; ".join(warnings(last))} if warnings(last) else {}),
            "next position": last["position"], "submit queue (frames)": last["submit_queue"],
            **{k: v for k, v in c.items() if not isinstance(v, dict)},
            **{f"drops {k}": v for k, v in c["drops"].items()},
            **{f"engine {k}": identifier(v) if is_identifier(k) else v
               for k, v in last["engine"].items()},
            **figures,
        },
    })
    return 0
