"""Fan-out: what the engine delivers and reports, to the clients, logs and metrics.

``deliver_batch`` turns one delivered vertex into ``deliver`` frames for the clients of
its groups, numbers application messages in the total order (``position`` counts from 0
in every view; the daemon decides nothing about order), and keeps the ledger's account
of this node's own messages. ``membership_event`` follows views, quorum losses and order
gaps (clients get ``view`` and ``gap`` frames) and logs the rest. Own messages the engine
gives up on (``MessagesInDoubt``) and those left at shutdown are reported to each
sending client per send frame (``undelivered``), from the ledger: nothing accepted is
dropped silently.

The state these functions keep (view, members, position, outstanding own messages...)
lives on the daemon, which status, health and the clients' ``welcome`` read.
"""

from __future__ import annotations

from typing import Any, Protocol

import structlog

from .. import socket_protocol as sp
from ..protocols.events import (
    BatchDelivered,
    FlushCompleted,
    JoinerHeldBack,
    JoinRefused,
    MemberSuspected,
    MessagesInDoubt,
    NodeIdClaimed,
    OrderGap,
    PeerClockRefused,
    QuorumLost,
    SwapGap,
    ViewChangeBlocked,
    ViewInstalled,
    ViewProposed,
)
from ..protocols.node import Node
from .api import ApiServer
from .federation import Federation
from .fedframing import decode_record
from .groups import Groups
from .logs import DeliveryLog
from .metrics import Counters, Metrics
from .notify import Notifier
from .submitq import Ledger

log = structlog.get_logger("amcastd")
OUTCOMES = {True: "not_delivered", False: "unknown"}
"""The ``outcome`` of an ``undelivered`` error with ``count``: the primary component did
not deliver them (beyond the cut this daemon learned), or whether it did is unknown
(``MessagesInDoubt.cut_known``)."""


class Host(Protocol):
    """What the fan-out reads and updates of the daemon."""

    node_id: int
    variant: str
    node: Node | None
    counters: Counters
    ledger: Ledger
    api: ApiServer
    groups: Groups
    federation: Federation | None
    metrics: Metrics
    notifier: Notifier
    dlog: DeliveryLog | None
    view_id: int
    members: list[int]
    primary: bool
    last_change: dict[str, Any]
    last_gap: dict[str, Any] | None
    last_ordered: tuple[int, int] | None
    last_delivery: float
    position: int
    position_view: int
    own_outstanding: int
    join_refused: str | None
    id_claimed: tuple[int, float] | None
    in_primary_view: Any  # an asyncio.Event
    ntail_histogram: Any  # the variant's child of the Ntail histogram, looked up once

    def now(self) -> float: ...

    def report_in_doubt(self, ev: MessagesInDoubt) -> None: ...


def messages_per_client(envelopes: tuple[bytes, ...]) -> dict[int, int]:
    """How many application messages of each client ``envelopes`` carry."""
    counts: dict[int, int] = {}
    for payload in envelopes:
        env = sp.decode_envelope(payload)
        if env is not None:
            counts[env[0]] = counts.get(env[0], 0) + len(env[2])
    return counts


def deliver_batch(d: Host, ev: BatchDelivered) -> None:
    """One delivered vertex: its messages to the clients of their groups (one ``deliver``
    frame, split around a group-membership notice), numbered in the total order; the
    counters, the ledger (own messages), the latency metrics and the delivery log."""
    c = d.counters
    ts = d.now()
    if ev.view != d.position_view:  # positions count from 0 in every view
        d.position_view = ev.view
        d.position = 0
    ordered = ev.position is not None
    position = d.position if ordered else None
    service = str(ev.service)
    header = {"t": "deliver", "sender": ev.sender, "seq": ev.seq, "service": service,
              "position": position, "view": ev.view, "send_ts": ev.send_ts}
    envs: list[list[Any]] = []
    nenvs = 0
    count = 0
    nbytes = 0
    decode = sp.decode_envelope
    own = ev.sender == d.node_id
    ledger = d.ledger
    for p in ev.payloads:
        env = decode(p)
        if env is None:
            fed = d.federation
            records = decode_record(p) if fed is not None and position is not None else None
            if records is not None:
                assert fed is not None
                if envs:  # the vertex's earlier messages go out before the records'
                    c.deliveries_to_clients += d.api.deliver(header, envs)
                    envs = []
                for record in records:
                    fed.on_record(record)
                continue
            control = sp.decode_control(p) if position is not None else None
            if control is None:
                c.drops["bad_control" if sp.is_control(p) else "bad_envelope"] += 1
                continue
            if envs:  # split the vertex's deliver frame around the notice
                c.deliveries_to_clients += d.api.deliver(header, envs)
                envs = []
            assert position is not None
            d.groups.delivered(ev.sender, control, ev.view, position + count)
            continue
        body = env[2]
        envs.append([env[0], env[1], count, body])
        nenvs += 1
        count += len(body)
        nbytes += sum(map(len, body))
        if own:
            ledger.delivered(env[0], len(body))
    rule = "causal" if ev.rule is None else str(ev.rule)
    if ordered and count:
        d.position += count
        d.last_ordered = (ev.view, d.position - 1)
    if own:
        d.own_outstanding -= count
        c.own_messages_delivered += count
    c.messages_delivered += count
    c.message_bytes_delivered += nbytes
    c.batches_delivered += 1
    c.services[service] += 1
    c.rules[(d.variant, rule)] += 1
    d.last_delivery = ts
    if envs:
        c.deliveries_to_clients += d.api.deliver(header, envs)
    d.metrics.latency.observe(max(0.0, ts - ev.send_ts))
    if ev.ntail is not None:
        d.ntail_histogram.observe(ev.ntail)
    if d.dlog is not None and count:
        assert d.node is not None
        d.dlog.delivery(
            view=ev.view, variant=d.variant, phi=d.node.phi, sender=ev.sender,
            seq=ev.seq, position=position, count=count, nbytes=nbytes, service=service,
            activation=ev.activation, rule=rule, ntail=ev.ntail, unseen=ev.unseen,
            nvt=ev.nvt, send_ts=ev.send_ts, ts=ts, envelopes=nenvs,
        )


def membership_event(d: Host, ev: Any) -> None:
    """Membership events: counted in the metrics; views and gaps to clients, logs and
    the daemon's view of the group; the rest to the logs."""
    d.metrics.count_event(d.counters, ev)
    kind = type(ev)
    if kind is ViewInstalled:
        d.view_id = ev.view
        d.members = list(ev.members)
        d.primary = True
        d.join_refused = None
        d.last_change = {"view": ev.view, "primary": True, "at": d.now(),
                         "previous": ev.previous, "joined": list(ev.joined),
                         "left": list(ev.left), "excluded": list(ev.excluded)}
        d.in_primary_view.set()
        d.notifier.status(f"primary view {ev.view} ({len(d.members)} members)")
        if d.dlog is not None:
            d.dlog.view(view=ev.view, members=d.members, previous=ev.previous,
                        joined=ev.joined, left=ev.left, excluded=ev.excluded,
                        ts=d.now())
        d.api.broadcast({
            "t": "view", "view": ev.view, "members": d.members, "primary": True,
            "joined": list(ev.joined), "left": list(ev.left),
            "excluded": list(ev.excluded), "previous": ev.previous,
        })
        d.groups.view_installed(ev.view, ev.members, ev.joined, ev.left, ev.excluded)
        log.info("view installed", node=d.node_id, view=ev.view, members=d.members,
                 joined=list(ev.joined), left=list(ev.left), excluded=list(ev.excluded),
                 previous=ev.previous, phi=ev.phi)
    elif kind is QuorumLost:
        d.primary = False
        d.groups.quorum_lost()
        d.in_primary_view.clear()
        d.last_change = {"view": ev.view, "primary": False, "at": d.now(),
                         "reason": ev.reason, "reachable": list(ev.reachable)}
        d.notifier.status(f"not in a primary view: {ev.reason}")
        if d.dlog is not None:
            d.dlog.lost(view=ev.view, reason=ev.reason, reachable=list(ev.reachable),
                        ts=d.now())
        d.api.broadcast({
            "t": "view", "view": ev.view, "members": list(ev.reachable),
            "primary": False, "reason": ev.reason,
        })
        log.warning("not in a primary view", node=d.node_id, view=ev.view,
                    reason=ev.reason, reachable=list(ev.reachable))
    elif kind is OrderGap:
        # In the units of the deliver frames (application messages), not the
        # engine's: an application transfers state from the last message it saw.
        # The engine's ``after`` is None exactly when this life delivered nothing
        # ordered; one that delivered only control notices delivered no message.
        after = d.last_ordered
        if d.dlog is not None:
            d.dlog.gap(view=ev.view, after=after, ts=d.now())
        d.last_gap = {"t": "gap", "view": ev.view,
                      "after": None if after is None else list(after)}
        d.api.broadcast(d.last_gap)
        log.info("order gap", node=d.node_id, view=ev.view, after=after,
                 engine_after=ev.after)
    elif kind is SwapGap:
        # a swap ordering's hole at a view's close, the same at every member completing
        # the view (docs/swap.md): nobody delivered the missing message, so no client
        # missed what others saw (that is what a gap frame says); the log tells
        log.warning("swap order gap: a message of the closing view never went out "
                    "(its sender's vertex is not in the view's cut)", node=d.node_id,
                    view=ev.view, position=ev.position)
    elif kind is MemberSuspected:
        log.warning("member suspected", node=d.node_id, member=ev.node, view=ev.view,
                    silent_s=round(ev.silent_s, 3))
    elif kind is ViewProposed:
        log.info("view proposed", node=d.node_id, view=ev.view, members=list(ev.members),
                 ballot=list(ev.ballot), reason=ev.reason)
    elif kind is FlushCompleted:
        log.info("flush done", node=d.node_id, view=ev.view, delivered=ev.delivered,
                 duration_s=round(ev.duration_s, 4))
    elif kind is JoinerHeldBack:
        log.warning("joiner held back: it is heard but answered no view change that "
                    "would take it in; it may not hear this node (a one-way cut, a "
                    "firewall dropping what comes in)", node=d.node_id,
                    member=ev.node, view=ev.view, rounds_missed=ev.missed,
                    hold_s=round(ev.hold_s, 3), renewed_without_round=ev.renewed)
    elif kind is ViewChangeBlocked:
        log.warning("view change blocked: the view proposed again may have been decided "
                    "by the vote of a member not heard from, and no live member holding "
                    "its cut has voted; it goes on once one of the awaited members "
                    "starts again from its state directory (its state says whether it "
                    "voted)", node=d.node_id, view=ev.view, awaited=list(ev.awaited),
                    rounds=ev.rounds, blocked_s=round(ev.blocked_s, 3))
    elif kind is PeerClockRefused:
        log.warning("peer clock out of the replay window: its datagrams are refused as "
                    "stale or future, and it is excluded like a silent member; "
                    "synchronise the clocks (NTP, chrony), or old traffic of it is "
                    "being replayed", node=d.node_id, peer=ev.peer,
                    offset_s=round(ev.offset_s, 3), replay_window_s=ev.window_s)
    elif kind is JoinRefused:
        log.error("join refused", node=d.node_id, member=ev.node, reason=ev.reason,
                  detail=ev.detail, refused_here=ev.local)
        if ev.local:
            d.join_refused = f"{ev.reason}: {ev.detail}"
    elif kind is NodeIdClaimed:
        log.error("another daemon claims this node's id: two daemons were started with "
                  "one node.id; the group refuses the other one while this one is a "
                  "member; stop it, or give it its own id",
                  node=d.node_id, claimed_by_incarnation=ev.incarnation,
                  incarnation=ev.mine)
        d.id_claimed = (ev.incarnation, d.now())
    elif kind is MessagesInDoubt:
        d.report_in_doubt(ev)


def report_in_doubt(d: Host, ev: MessagesInDoubt) -> None:
    """Own messages of a view this daemon was excluded from that the primary component
    did not deliver: each client hears which of its messages (``undelivered`` with
    ``first`` and ``count``); they are not sent again. The ledger counts each
    client's messages in send order, so the older ones the primary component did
    deliver (and this daemon never did: they lie in its gap) are retired first."""
    elsewhere = 0
    for cid, count in messages_per_client(ev.delivered_elsewhere).items():
        # delivered by the primary component while this daemon was away: in its
        # gap, never delivered here; the sender's client hears it per message
        conn = d.api.clients.get(cid)
        for ref, first, n in d.ledger.fail_oldest(cid, count):
            if conn is not None:
                conn.fail(
                    "undelivered",
                    f"messages {first}..{first + n - 1} of this send frame were "
                    f"delivered by the primary component in view {ev.view} while this "
                    "daemon was away from it; this daemon will not deliver them (they "
                    "lie in its order gap: transfer state from another member)",
                    ref=ref, extra={"first": first, "count": n, "outcome": "delivered",
                                    "reason": "view_change"},
                )
        d.own_outstanding -= count
        elsewhere += count
    if elsewhere:
        log.info("own messages delivered by the primary component, not here",
                 node=d.node_id, view=ev.view, messages=elsewhere)
    if not (ev.payloads or ev.delivered_here):
        return
    reported = 0
    for cid, count in messages_per_client(ev.payloads).items():
        conn = d.api.clients.get(cid)
        for ref, first, n in d.ledger.fail_oldest(cid, count):
            reported += n
            d.own_outstanding -= n
            if conn is not None:
                conn.fail(
                    "undelivered",
                    f"messages {first}..{first + n - 1} of this send frame were sent in "
                    f"view {ev.view}, which this daemon was excluded from, and "
                    + ("the primary component did not deliver them" if ev.cut_known else
                       "it could not learn whether the primary component delivered "
                       "them (outcome unknown)")
                    + "; they are not sent again",
                    ref=ref, extra={"first": first, "count": n,
                                    "outcome": OUTCOMES[ev.cut_known],
                                    "reason": "view_change"},
                )
    d.counters.messages_reported_undelivered += reported
    d.counters.drops["own_messages_in_doubt"] += reported + len(ev.delivered_here)
    log.warning("own messages not delivered by the primary component" if ev.cut_known
                else "own messages of unknown outcome", node=d.node_id,
                view=ev.view, reported=reported, delivered_here=len(ev.delivered_here))


def report_undelivered(api: ApiServer, ledger: Ledger, counters: Counters) -> int:
    """At shutdown: ``undelivered`` for every send frame of a connected client not
    delivered here; returns how many messages that reported."""
    reported = 0
    for conn in list(api.clients.values()):
        for ref, first, count in ledger.pending(conn.id):
            reported += count - first
            conn.fail(
                "undelivered",
                f"messages {first}..{count - 1} of this send frame were accepted but this "
                "daemon stopped before delivering them (other members may deliver them)",
                ref=ref, extra={"first": first, "reason": "shutting_down"},
            )
    counters.messages_reported_undelivered += reported
    return reported
