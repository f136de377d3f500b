"""Health and status: what an operator (``amcast status``) and a probe read of a daemon.

``health`` lists the *problems* that stop this daemon from ordering (``ok`` reads them
alone: a readiness probe, ``amcast_healthy``) and the *warnings* an operator should act
on that do not: nothing delivered for ``health.stall_after_s`` while messages or
vertices are pending, no primary view and the likely cause first (a refused join,
clocks off, datagrams refused for a configuration mismatch, a member list that cannot
reach a quorum, hearing nobody), a view change blocked or overdue, an unwritable state
file, another daemon claiming this node's id. ``status`` is the whole ``status`` reply,
``welcome`` the frame a client gets on connecting. All of them read the daemon's state
on the event loop and change nothing but the start of the current wait
(``pending_since``).
"""

from __future__ import annotations

from typing import Any, Protocol

from ..protocols.node import Node
from ..protocols.node_config import NodeConfig
from .api import ApiServer
from .config import DaemonConfig, Limits
from .federation import Federation
from .groups import Groups
from .metrics import Counters, engine_kinds, engine_stats
from .observe import LogHost, log_files, log_write_failures
from .redundant import RedundantTransport
from .refusals import RECENT_S, RefusalWatch
from .submitq import SubmitQueue
from .transports import AnyTransport

ID_CLAIM_SHOWN_S = 600.0
"""How long health warns of another daemon heard claiming this node's id."""


class Host(LogHost, Protocol):
    """What health and status read of the daemon."""

    config: DaemonConfig
    node_config: NodeConfig
    limits: Limits
    node_id: int
    node: Node | None
    variant: str
    core: dict[str, str]
    started: float
    view_id: int
    members: list[int]
    primary: bool
    last_change: dict[str, Any]
    last_gap: dict[str, Any] | None
    last_delivery: float
    pending_since: float | None
    position: int
    own_outstanding: int
    join_refused: str | None
    id_claimed: tuple[int, float] | None
    state_error: str | None
    stopping: bool
    counters: Counters
    refusals: RefusalWatch
    queue: SubmitQueue
    api: ApiServer
    groups: Groups
    transport: AnyTransport | None
    federation: Federation | None

    @property
    def phi(self) -> float | None: ...

    def now(self) -> float: ...


def welcome(d: Host) -> dict[str, Any]:
    """The ``welcome`` frame a client gets on connecting: where the group stands and
    the limits its frames must keep."""
    lim = d.limits
    frame = {"node": d.node_id, "view": d.view_id, "members": d.members,
             "primary": d.primary, "gap": d.last_gap,
             "max_frame_bytes": lim.max_frame_bytes,
             "max_message_bytes": lim.max_message_bytes}
    if d.federation is not None:  # what ``send(..., clusters=...)`` may name
        frame["cluster"] = d.federation.cluster
        frame["clusters"] = list(d.federation.clusters)
    return frame


def health(d: Host) -> dict[str, Any]:
    """``{"ok", "problems", "warnings"}``: the daemon cannot order when messages are
    pending and nothing was delivered for ``health.stall_after_s``, and so on;
    ``warnings`` say what an operator should act on that does not stop this daemon
    (``ok`` reads the problems alone: a readiness probe)."""
    problems: list[str] = []
    warnings: list[str] = []
    now = d.now()
    claimed = d.id_claimed
    if claimed is not None and now - claimed[1] < ID_CLAIM_SHOWN_S:
        warnings.append(
            f"another daemon claims this node's id {d.node_id} (incarnation "
            f"{claimed[0]}, {now - claimed[1]:.0f} s ago): the group refuses it while "
            "this daemon is a member; stop it or give it its own node.id")
    overdue = view_change_overdue(d, now)
    if overdue is not None:
        problems.append(overdue)
    dag = int(d.node.stats.pending_dag_size) if d.node is not None else 0
    own = d.own_outstanding + d.queue.messages
    if own > 0 or dag > 0:
        if d.pending_since is None:
            d.pending_since = now
        quiet = now - max(d.last_delivery, d.pending_since)
        if quiet >= d.config.health.stall_after_s:
            problems.append(
                f"cannot order: {own} own messages and {dag} DAG vertices pending, "
                f"nothing delivered for {quiet:.1f} s"
            )
    else:
        d.pending_since = None
    if not d.primary and d.node is not None and hasattr(d.node, "membership"):
        clock = clock_problem(d)
        mismatched = d.refusals.recent()
        # the cause first: ``amcast status --health`` prints the first problem
        if d.join_refused is not None:
            problems.append(f"the group refused this daemon's join: {d.join_refused} "
                            "(docs/membership.md, 'Joins, restarts, refusals, reloads')")
        if clock is not None:
            problems.append(clock)
        elif mismatched:
            problems.append(f"datagrams arrive but are refused: "
                            f"{d.refusals.describe(mismatched)} in the last "
                            f"{RECENT_S:g} s")
        why = d.last_change.get("reason") if not d.last_change.get("primary") else None
        problems.append("not in a primary view" + (f" ({why})" if why else "")
                        + ": nothing ordered is delivered")
        last = d.node.quorum.get("last_view")
        if last is not None and last["reachable"] < last["needed"]:
            problems.append(
                f"the last view (id {last['id']}) listed {last['listed']} nodes "
                f"{last['nodes']}: "
                f"{last['needed']} of them must agree on the next view, and only "
                f"{last['reachable']} can be reached (docs/membership.md, "
                "'Shrinking the member list')")
        uncounted = d.node.quorum.get("not_counted")
        if uncounted:
            problems.append(
                f"the votes of nodes {uncounted} do not count toward the next view: the "
                "last view lists their ids at another daemon (an earlier incarnation, or "
                "a state file begun later: a second daemon with a member's id, or a lost "
                "state directory), and the others are no majority without them "
                "(docs/membership.md, 'Whose vote counts')")
        deaf = None if clock is not None or mismatched else heard_nobody_for(d, now)
        if deaf is not None:
            problems.append(
                f"heard nothing from any other listed member for {deaf:.1f} s: they are "
                "all down, or this host does not receive the group's traffic (a "
                "firewall dropping it, no multicast route, the wrong network.interface; "
                "amcast status on another member shows whether it hears this one)")
    # (engines without membership, and the tests' fakes, have no view changes)
    blocked = getattr(d.node, "view_change_blocked", None)
    if blocked is not None:
        problems.append(
            f"view change blocked for {blocked['blocked_s']:.1f} s: view "
            f"{blocked['view']} may have been decided by node(s) {blocked['awaited']}, "
            "not heard from; start them again from their state directories "
            "(docs/membership.md, 'View changes')")
    if d.state_error is not None:
        problems.append(f"cannot write the membership state file {d.state_error}: "
                        "sending nothing until it can")
    if d.stopping:
        problems.append("shutting down")
    if d.federation is not None:
        warnings += d.federation.warnings()
    return {"ok": not problems, "problems": problems, "warnings": warnings}


def view_change_overdue(d: Host, now: float) -> str | None:
    """A primary view holding members that have been silent for longer than a view
    change takes to exclude them (suspicion, then up to four flush timeouts): the
    view this daemon reports is no longer the group's, whatever blocks the change."""
    if not d.primary or d.node is None or not hasattr(d.node, "peers"):
        return None
    cfg = d.node_config
    limit = 2 * cfg.suspect_timeout + 4 * cfg.flush_timeout
    silent = {n: now - info["last_heard"] for n, info in d.node.peers().items()
              if info["in_view"] and not info["alive"] and info["last_heard"] is not None
              and now - info["last_heard"] > limit}
    if not silent:
        return None
    who = ", ".join(f"node {n} for {s:.1f} s" for n, s in sorted(silent.items()))
    return (f"view change overdue: view {d.view_id} still holds members not heard "
            f"from ({who}), beyond the {limit:g} s a view change takes to exclude them")


def clock_problem(d: Host) -> str | None:
    """The health problem of peers refused for their send times (``None``: none is):
    which, by how much, and whose clock is likely off when every peer heard is off
    the same way."""
    peers = d.node.peers() if d.node is not None and hasattr(d.node, "peers") else {}
    heard = {n: float(info["clock_offset_s"]) for n, info in peers.items()
             if info.get("clock_offset_s") is not None}
    refused = {n: heard.get(n, 0.0) for n, info in peers.items() if info.get("clock_refused")}
    if not refused:
        return None
    window = d.node_config.replay_window
    offsets = ", ".join(f"node {n} {off:+.1f} s" for n, off in sorted(refused.items()))
    signs = {off > 0 for off in heard.values()}
    mine = (len(heard) >= 2 and len(heard) == len(refused) and len(signs) == 1)
    return (f"datagrams refused for their send times: the clocks of {offsets} differ "
            f"from this host's by more than protocol.replay_window ({window:g} s)"
            + ("; every other member heard is off the same way, so this host's clock "
               "is likely the wrong one" if mine else "")
            + ": synchronise the clocks (NTP, chrony), or old traffic is being replayed")


def heard_nobody_for(d: Host, now: float) -> float | None:
    """Seconds since any other listed member was last heard (since this daemon
    started, if never), once that is more than twice ``suspect_timeout``; ``None``
    before, or alone in the list."""
    peers = d.node.peers() if d.node is not None and hasattr(d.node, "peers") else {}
    if not peers:
        return None
    heard = [info["last_heard"] for info in peers.values() if info["last_heard"] is not None]
    silent = now - max(heard, default=d.started)
    return silent if silent > 2 * d.node_config.suspect_timeout else None


def membership_status(d: Host) -> dict[str, Any]:
    """``view`` (id, members, primary, previous, since, last change and its cause),
    ``peers`` (seconds since each listed node was last heard) and ``quorum``."""
    node = d.node
    now = d.now()
    view: dict[str, Any] = {"id": d.view_id, "members": d.members,
                            "primary": d.primary, "last_change": d.last_change}
    peers: list[dict[str, Any]] = []
    quorum: dict[str, Any] = {}
    if node is not None and hasattr(node, "peers"):
        for peer, info in node.peers().items():
            heard = info["last_heard"]
            peers.append({"node": peer, "incarnation": info["incarnation"],
                          "alive": info["alive"], "in_view": info["in_view"],
                          "held_back_s": info.get("held_back_s"),
                          "awaited_s": info.get("awaited_s"),
                          "clock_offset_s": info.get("clock_offset_s"),
                          "clock_refused": bool(info.get("clock_refused")),
                          "last_heard_s": None if heard is None else max(0.0, now - heard)})
        quorum = node.quorum
    return {"view": view, "peers": peers, "quorum": quorum}


def status(d: Host) -> dict[str, Any]:
    """The ``status`` reply: membership, health, clients, queues, limits, counters, the
    engine's statistics, group membership, links, keys and logs."""
    c = d.counters
    engine = engine_stats(d.node.stats if d.node is not None else None)
    t = d.transport
    return {
        "node": d.node_id, **membership_status(d),
        "federation": None if d.federation is None else d.federation.status(),
        "transport": d.config.network.transport,
        "variant": d.variant, "core": d.core, "phi": d.phi, "now": d.now(),
        "uptime_s": d.now() - d.started, "position": d.position,
        "health": health(d),
        "clients": [conn.info() for conn in d.api.clients.values()],
        "submit_queue": len(d.queue), "submit_queue_bytes": d.queue.nbytes,
        "limits": {"max_message_bytes": d.limits.max_message_bytes,
                   "max_frame_bytes": d.limits.max_frame_bytes,
                   "submit_queue_bytes": d.limits.submit_queue_bytes},
        "counters": {
            "messages_accepted": c.messages_accepted,
            "messages_sent": c.messages_sent, "messages_delivered": c.messages_delivered,
            "own_messages_delivered": c.own_messages_delivered,
            "message_bytes_sent": c.message_bytes_sent,
            "message_bytes_delivered": c.message_bytes_delivered,
            "batches_delivered": c.batches_delivered,
            "datagrams_sent": t.datagrams_sent if t else 0,
            "datagrams_received": t.datagrams_received if t else 0,
            "backpressure_events": c.backpressure_events,
            "drops": dict(c.drops) | (dict(t.send_errors) if t else {}),
            "client_errors": dict(c.client_errors),
            "clients_disconnected": dict(c.clients_disconnected),
            "requests_denied": dict(c.requests_denied),
        },
        "engine": engine,
        "datagrams": datagrams_by_kind(d),
        "group_membership": d.groups.status(),
        **({"links": t.link_status()} if isinstance(t, RedundantTransport) else {}),
        "keys": (d.node.key_status() if hasattr(d.node, "key_status")
                 else {"sealed": d.node_config.keys() is not None}),
        "logs": {"dir": d.config.logs.dir,
                 "write_failures": log_write_failures(d),
                 "errors": [e for f in log_files(d) for e in f.errors]},
    }


def datagrams_by_kind(d: Host) -> dict[str, dict[str, int]]:
    """``{"sent": {kind: n}, "received": {kind: n}}``: the engine's cumulative datagram
    counters by kind (data, ack_only, heartbeat, nack, repair, membership); empty
    dicts before the engine exists."""
    kinds = engine_kinds(d.node.stats if d.node is not None else None)
    return {"sent": kinds.get("datagrams_sent", {}),
            "received": kinds.get("datagrams_received", {})}
