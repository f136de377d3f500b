"""Several clusters: the daemon's glue around the sans-IO ``FederationMember``.

Theory of operation (``amcast.protocols.federation``: Skeen's algorithm over ordered
groups, each cluster's own ``safe`` total order standing for the consensus a group
member runs). One ``Federation`` per daemon, built when ``[federation]`` names a
cluster. It owns the ``FederationMember`` and does its I/O:

- A client's cross-cluster send (``send`` frame with ``clusters``) becomes one
  ``FederationMember.multicast`` per payload. The payload handed over is framed
  (``amcast.daemon.fedframing``): the sender's cluster, node, client, wall-clock send time and the
  application's bytes, so the delivering daemons can say who sent it.
- ``OrderLocally(record)`` goes into this cluster's own order with the ``safe`` service,
  behind the clients' envelopes. The records one input produced (a client's frame, a
  wake-up's datagrams, a tick) go as one engine payload ``["fed", [record, ...]]``
  (``encode_record``, at most ``RECORDS_BYTES`` each): an engine payload whose first
  element is a string, like the group-membership controls (``amcast.socket_protocol``),
  so it is never mistaken for a client's envelope. Where the order delivers it
  (``amcast.daemon.fanout``), ``decode_record`` recognises it and ``on_record`` hands
  each record to ``FederationMember.on_ordered``: every member of the cluster hands the
  same records in the same order.
- ``SendRemote(cluster, node, datagram)`` goes over UDP unicast to that member's
  address (``amcast.daemon.fedlink``), sealed with AES-256-GCM under the key ring of
  ``security.key_file`` (``amcast.protocols.wire.auth``: a fresh random session per
  daemon life, replay window, key rollover; the same key file across the federation).
  What arrives is opened, checked (version, this cluster as destination, a known
  sender) and handed to ``on_remote``; anything else is a counted drop
  (``remote_drops``), never an exception. Multicast stays inside a cluster.
- ``tick`` runs every ``federation.tick_s``; ``on_view`` follows this cluster's views.
- ``Deliver`` becomes a ``deliver`` frame for the clients of its group at this daemon,
  with the clusters it went to, its sender's cluster and its global timestamp ``gts``
  (``docs/api.md``), and a ``global`` record of the delivery log; ``Stalled`` is logged
  and counted; ``DroppedRemote`` is counted by reason.
- Outcomes. The daemon remembers which client's send frame (``id``, index) each own
  multicast came from until the member has it committed (``FederationMember.owns``).
  ``Undelivered`` (not committed within ``federation.deadline_s``) becomes an
  ``undelivered`` error frame for that send frame, with ``outcome`` ``unknown``,
  ``reason`` ``deadline`` and the ``clusters`` that had not acknowledged; at shutdown,
  the multicasts still uncommitted get one with ``reason`` ``shutting_down``. After an
  order gap the next member ``adopt``s the dropped one's multicasts: they are sent
  again, not lost. Each message is reported at most once (docs/api.md, Outcomes of
  cross-cluster messages).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable
from typing import Any, Protocol

import structlog

from ..protocols.errors import BackpressureError, DecodeError
from ..protocols.federation import (
    Deliver,
    DroppedRemote,
    FederationMember,
    FedId,
    OrderLocally,
    SendRemote,
    Stalled,
    Undelivered,
    batch_sends,
)
from ..protocols.wire.keys import Keyring
from .config import FederationSection
from .fedframing import (
    MAX_GLOBAL_PAYLOAD,
    decode_message,
    encode_message,
    encode_record,
    member_config,
    member_id,
    message_id,
    node_of,
)
from .fedlink import FederationLink

log = structlog.get_logger("amcastd")
RECORDS_BYTES = 32 * 1024
"""Records batched into one engine payload up to about this many bytes."""
PING_S = 1.0
"""Every this many seconds each daemon sends an empty datagram to every member of the
other clusters: how ``status`` knows which clusters are reachable while no message flows."""


class Host(Protocol):
    """What the federation reads and calls of the daemon."""

    node_id: int
    view_id: int
    api: Any  # the ApiServer: ``deliver(header, envelopes)``
    dlog: Any  # the DeliveryLog, or None
    metrics: Any  # the Metrics: ``federation_latency``

    def now(self) -> float: ...

    def wall_time(self) -> float: ...

    def submit_federation(self, envelope: bytes) -> None: ...


class Federation:
    """This daemon's member of the federation and its I/O (module docstring)."""

    def __init__(self, section: FederationSection, node_id: int, keys: Keyring | None,
                 host: Host, *, wall_clock: Callable[[], float] = time.time) -> None:
        self.section = section
        self.cluster = section.cluster
        self.clusters = tuple(sorted(section.clusters))
        self.node_id = node_id
        self.me = member_id(self.cluster, node_id)
        self.host = host
        self.config = member_config(section)
        self.member: FederationMember | None = None
        """Made at this daemon's first view (``on_view``): empty in a cluster's first
        view, else a joiner that gets the federation state from the members that have
        it (``FederationMember(joining=True)``)."""
        self._wall_clock = wall_clock
        self.started = wall_clock()
        self.link = FederationLink(section, node_id, keys, wall_clock)
        self.remote_drops: Counter[str] = Counter()
        """Cross-cluster datagrams refused, by reason (bad seal, malformed, stale...)."""
        self.sent = 0
        """Cross-cluster messages this daemon's clients sent."""
        self.delivered = 0
        """Cross-cluster messages delivered here."""
        self.stalled = 0
        """Stall reports (``Stalled``)."""
        self.records_ordered = 0
        self.records_submitted = 0
        self._outbox: list[bytes] = []
        self._outbox_bytes = 0
        self._sends: list[SendRemote] = []
        """Datagrams of this round, sent at ``flush``: those for one member as batches."""
        self.rejoins = 0
        """Order gaps that made this daemon take the federation state again."""
        self.reported_undelivered = 0
        """Own cross-cluster messages reported ``undelivered`` to their clients."""
        self._origins: dict[FedId, tuple[int, Any, int]] = {}
        """Own multicast not committed yet -> (client, send frame id, index in it)."""
        self._previous: FederationMember | None = None
        """The member an order gap dropped, until the next one adopts its multicasts."""
        self.errors = 0
        self._next_ping = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._flush_scheduled = False

    # ---- lifecycle ---------------------------------------------------------------------
    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.link.start(loop, self.on_datagrams)

    def close(self) -> None:
        self.link.close()

    # ---- inputs --------------------------------------------------------------------------
    def unknown(self, clusters: Iterable[str]) -> list[str]:
        """The names in ``clusters`` this federation does not have."""
        return sorted(set(clusters) - set(self.clusters))

    def is_local(self, clusters: Collection[str]) -> bool:
        """A send to these clusters stays on this cluster's own order."""
        return set(clusters) <= {self.cluster}

    def refusal(self, group: str, payloads: list[bytes],
                clusters: Collection[str]) -> str | None:
        """Why a cross-cluster send frame is refused whole (an error code), or ``None``."""
        if self.unknown(clusters):
            return "unknown_cluster"
        if max(map(len, payloads)) > MAX_GLOBAL_PAYLOAD:
            return "message_too_large"
        if len(group.encode()) > 255:
            return "bad_field"
        if self.member is None:
            return "overloaded"  # before this daemon's first view: try again
        return None

    def multicast(self, client: int, group: str, payloads: list[bytes],
                  clusters: Collection[str], ref: Any = None) -> str | None:
        """A client's cross-cluster messages (after ``refusal``), of its send frame
        ``ref``; an error code if the member refused one (those before it went out)."""
        member = self.member
        assert member is not None
        now = self.host.now()
        send_ts = self.host.wall_time()
        dst = sorted(set(clusters))
        refused = None
        for index, payload in enumerate(payloads):
            framed = encode_message(self.cluster, self.node_id, client, send_ts, payload)
            try:
                outputs = member.multicast(now, group, framed, dst)
            except BackpressureError:
                refused = "overloaded"
                break
            except ValueError:
                refused = "bad_field"
                break
            self.sent += 1
            if ref is not None and member.last_id is not None:
                self._origins[member.last_id] = (client, ref, index)
            self._handle(outputs)
        self.flush()
        return refused

    def on_record(self, record: bytes) -> None:
        """A federation record delivered by this cluster's order (``fanout``)."""
        self.records_ordered += 1
        if self.member is not None:
            self._handle(self.member.on_ordered(self.host.now(), record))
            self._flush_soon()

    def _flush_soon(self) -> None:
        """Flush at the end of this turn of the loop: the records that every record the
        order delivered in one pump produced go as one payload, not one each (a burst
        of global messages would otherwise cost one ``safe`` ordering per record)."""
        if self._loop is None:
            self.flush()
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._scheduled_flush)

    def _scheduled_flush(self) -> None:
        self._flush_scheduled = False
        self.flush()

    def on_datagrams(self, batch: list[bytes]) -> None:
        for data in batch:
            self.on_datagram(data)
        self.flush()

    def on_datagram(self, data: bytes) -> None:
        """One datagram off the wire (``on_datagrams`` flushes the records after)."""
        try:
            src_cluster, src_node, datagram = self.link.open(data)
        except DecodeError as exc:
            self.remote_drops[str(exc.reason)] += 1
            return
        except Exception:  # the codec promises DecodeError; count if it does not
            self.remote_drops["link_error"] += 1
            return
        if datagram and self.member is not None:  # empty: a ping, for reachability
            self._handle(self.member.on_remote(
                self.host.now(), src_cluster, member_id(src_cluster, src_node), datagram))

    def tick(self) -> None:
        now = self.host.now()
        if now >= self._next_ping:
            self._next_ping = now + PING_S
            self.link.ping()
            self._forget_committed()
        if self.member is not None:
            self._handle(self.member.tick(now))
            self.flush()

    def on_gap(self) -> None:
        """This daemon missed part of its cluster's order (``OrderGap``, before the view
        it rejoins): the records it missed changed the federation state, so it drops its
        member and takes the state from the others again at the view (``on_view``).
        Its own multicasts not yet committed go to the next member, which sends them
        again (``FederationMember.adopt``)."""
        if self.member is not None:
            log.warning("order gap: the federation state is taken again from the cluster",
                        node=self.node_id, cluster=self.cluster,
                        own_unacknowledged=len(self.member.in_flight()))
            if self._previous is None:  # two gaps before a view: the first one's
                self._previous = self.member
            self.member = None
            self.rejoins += 1

    def on_view(self, members: Iterable[int], joined: Iterable[int]) -> None:
        """This cluster's new view: the first one makes the member (a joiner when
        members of the previous view are in it: they hold the state)."""
        members = list(members)
        if self.member is None:
            holders = set(members) - set(joined) - {self.node_id}
            self.member = FederationMember(
                self.config, self.me, joining=bool(holders),
                first_seq=int(self._wall_clock() * 1_000_000))
            if self._previous is not None:
                self.member.adopt(self._previous, self.host.now())
                self._previous = None
            log.info("federation member started", node=self.node_id, cluster=self.cluster,
                     joining=bool(holders), clusters=list(self.clusters))
        self._handle(self.member.on_view(self.host.now(),
                                         [member_id(self.cluster, m) for m in members]))
        self.flush()

    # ---- outputs -------------------------------------------------------------------------
    def _handle(self, outputs: list[Any]) -> None:
        stalls: list[Stalled] = []
        overdue: list[Undelivered] = []
        for out in outputs:
            try:
                kind = type(out)
                if kind is SendRemote:
                    self._sends.append(out)
                elif kind is OrderLocally:
                    self._outbox.append(out.record)
                    self._outbox_bytes += len(out.record)
                    if self._outbox_bytes >= RECORDS_BYTES:
                        self.flush()
                elif kind is Deliver:
                    self._deliver(out)
                elif kind is Stalled:
                    self.stalled += 1
                    stalls.append(out)
                elif kind is DroppedRemote:
                    self.remote_drops[str(out.reason)] += 1
                elif kind is Undelivered:
                    overdue.append(out)
            except Exception:
                self.errors += 1
                log.exception("federation output failed", node=self.node_id,
                              output=type(out).__name__)
        if overdue:
            self._report(overdue)
        if stalls:  # one line for the stall reports of one input, however many
            oldest = max(stalls, key=lambda st: st.age_s)
            log.warning("cross-cluster messages stalled: a destination cluster has not "
                        "answered (unreachable, or without a primary view)",
                        node=self.node_id, cluster=self.cluster, messages=len(stalls),
                        oldest=message_id(oldest.msg_id), age_s=round(oldest.age_s, 3),
                        waiting_for=sorted({c for st in stalls
                                            for c in st.clusters_waited_for}))

    # ---- outcomes ----------------------------------------------------------------------
    def _forget_committed(self) -> None:
        """Drop the origins of the multicasts the member has committed (every PING_S)."""
        member = self.member
        if member is None or not self._origins:
            return
        for m in [m for m in self._origins if not member.owns(m)]:
            del self._origins[m]

    def _report(self, overdue: list[Undelivered]) -> None:
        """``undelivered`` error frames for multicasts past their deadline."""
        items = [(m.msg_id, m.waiting_for) for m in overdue]
        reported = self._fail(items, "deadline")
        oldest = max(overdue, key=lambda u: u.age_s)
        log.warning("cross-cluster messages not committed by their deadline: their "
                    "clients are told (outcome unknown; they are still sent)",
                    node=self.node_id, cluster=self.cluster, messages=len(overdue),
                    reported=reported, oldest=message_id(oldest.msg_id),
                    waiting_for=sorted({c for u in overdue for c in u.waiting_for}))

    def report_shutdown(self) -> int:
        """At shutdown: ``undelivered`` (``reason`` ``shutting_down``) for every own
        multicast not committed and not reported yet; returns how many."""
        member = self.member
        items: list[tuple[FedId, tuple[str, ...]]] = [
            (m, ()) for m in list(self._origins)
            if (member is not None and member.owns(m))
            or (self._previous is not None and self._previous.owns(m))]
        return self._fail(items, "shutting_down")

    def _fail(self, items: list[tuple[FedId, tuple[str, ...]]], reason: str) -> int:
        """One ``undelivered`` frame per run of consecutive messages of one send frame
        (their origins forgotten: each is reported once); returns how many messages
        were reported to a client still connected."""
        runs: list[tuple[int, Any, int, int, tuple[str, ...]]] = []
        for m, waiting in items:
            origin = self._origins.pop(m, None)
            if origin is None:
                continue
            client, ref, index = origin
            last = runs[-1] if runs else None
            if (last is not None and last[:2] == (client, ref)
                    and last[2] + last[3] == index and last[4] == waiting):
                runs[-1] = (client, ref, last[2], last[3] + 1, waiting)
            else:
                runs.append((client, ref, index, 1, waiting))
        reported = 0
        why = {"deadline": f"not every destination cluster acknowledged holding them "
                           f"within {self.section.deadline_s:g} s",
               "shutting_down": "this daemon stopped before every destination cluster "
                                "acknowledged holding them"}[reason]
        for client, ref, first, count, waiting in runs:
            conn = self.host.api.clients.get(client)
            if conn is None:  # the client is gone: nobody to tell
                continue
            reported += count
            conn.fail(
                "undelivered",
                f"cross-cluster messages {first}..{first + count - 1} of this send frame: "
                f"{why}" + (f" (waiting for {', '.join(waiting)})" if waiting else "")
                + "; the outcome is unknown: they are delivered by every destination "
                "cluster or by none",
                ref=ref, extra={"first": first, "count": count, "outcome": "unknown",
                                "reason": reason, "clusters": list(waiting)},
            )
        self.reported_undelivered += reported
        return reported

    def flush(self) -> None:
        """The records the last input produced, into the own order as one payload, and
        its datagrams, those for the same member of another cluster as one batch."""
        if self._sends:
            sends, self._sends = self._sends, []
            for out in batch_sends(sends):
                if isinstance(out, SendRemote):
                    try:
                        self.link.send(out.cluster, node_of(out.node), out.datagram)
                    except Exception:
                        self.errors += 1
                        log.exception("federation send failed", node=self.node_id)
        if self._outbox:
            records, self._outbox, self._outbox_bytes = self._outbox, [], 0
            self.records_submitted += len(records)
            self.host.submit_federation(encode_record(records))

    def _deliver(self, out: Deliver) -> None:
        message = decode_message(out.payload)
        if message is None:
            self.remote_drops["bad_message"] += 1
            return
        origin, node, client, send_ts, payload = message
        host = self.host
        index = self.delivered
        self.delivered += 1
        clusters = sorted(out.clusters)
        header = {"t": "deliver", "sender": node, "seq": out.gts, "service": "safe",
                  "position": None, "view": host.view_id, "send_ts": send_ts,
                  "clusters": clusters, "cluster": origin, "gts": out.gts,
                  "msg_id": message_id(out.msg_id)}
        host.api.deliver(header, [[client, [out.group], 0, [payload]]])
        ts = host.wall_time()
        host.metrics.federation_latency.observe(max(0.0, ts - send_ts))
        if host.dlog is not None:
            host.dlog.global_delivery(
                view=host.view_id, cluster=self.cluster, index=index, origin=origin,
                sender=node,
                msg=message_id(out.msg_id), gts=out.gts, group=out.group, clusters=clusters,
                nbytes=len(payload), send_ts=send_ts, ts=ts)

    # ---- status ----------------------------------------------------------------------------
    def warnings(self) -> list[str]:
        """Health warnings: clusters not heard from, messages waiting past the stall
        limit (this daemon goes on ordering its own cluster's messages)."""
        out = []
        now = self.host.wall_time()
        if now - self.started < 3 * PING_S:
            return out
        heard = self.link.heard
        silent = [name for name in self.clusters if name != self.cluster
                  and now - heard.get(name, self.started) >= 3 * PING_S]
        if silent:
            out.append(f"federation: no datagram from cluster(s) {', '.join(silent)} for "
                       f"{3 * PING_S:g} s or more: unreachable, or down; cross-cluster "
                       "messages to them wait")
        stalled = [f for f in self.in_flight() if f["age_s"] >= self.section.stall_after_s]
        if stalled:
            out.append(f"federation: {len(stalled)} cross-cluster message(s) waiting longer "
                       f"than {self.section.stall_after_s:g} s (the oldest for "
                       f"{stalled[0]['age_s']:.0f} s, waiting for "
                       f"{', '.join(stalled[0]['waiting_for']) or 'its order'})")
        return out

    def metrics_sample(self) -> dict[str, Any]:
        """What the metrics report (``MetricsSnapshot.federation``), on the loop."""
        status = self.status()
        return {"in_flight": status["in_flight"], "sent": self.sent,
                "delivered": self.delivered, "stalled": self.stalled,
                "undelivered": self.reported_undelivered,
                "remote_drops": dict(self.remote_drops),
                "reachable": {name: c["reachable"] for name, c in status["clusters"].items()}}

    def in_flight(self) -> list[dict[str, Any]]:
        """The cross-cluster messages in flight here, oldest first."""
        if self.member is None:
            return []
        return [{"id": message_id(f.msg_id), "clusters": list(f.clusters),
                 "age_s": round(f.age_s, 3), "waiting_for": list(f.waiting_for)}
                for f in self.member.in_flight()]

    def status(self) -> dict[str, Any]:
        """The ``federation`` part of the ``status`` reply."""
        now = self.host.wall_time()
        heard = self.link.heard
        flights = self.in_flight()
        return {
            "cluster": self.cluster,
            "address": "{}:{}".format(*self.link.address),
            "clusters": {name: {
                "members": len(self.section.clusters[name].members),
                "last_heard_s": (None if name not in heard else round(now - heard[name], 3)),
                "reachable": name == self.cluster or (
                    name in heard and now - heard[name] < 3 * PING_S),
            } for name in self.clusters},
            "in_flight": len(flights),
            "messages": flights[:20],
            "sent": self.sent, "delivered": self.delivered, "stalled": self.stalled,
            "rejoins": self.rejoins, "reported_undelivered": self.reported_undelivered,
            "records_submitted": self.records_submitted,
            "records_ordered": self.records_ordered,
            "protocol": {} if self.member is None else dict(self.member.counters),
            "datagrams_sent": self.link.sent, "datagrams_received": self.link.received,
            "remote_drops": dict(self.remote_drops),
            "send_errors": dict(self.link.send_errors),
        }
