"""Prometheus metrics of one daemon, read at scrape time from an immutable snapshot.

Theory of operation: the hot path never touches a Prometheus object per message. The
daemon keeps cumulative counters as plain attributes of ``Counters`` (bumped once per
batch) and the engine keeps its own (``Node.stats``). A scrape must not read that live
state while the event loop changes it: the daemon builds a ``MetricsSnapshot`` *on the
event loop* (a frozen dataclass of numbers and read-only mappings,
``MetricsSnapshot.build``), at each render and periodically, and ``AmcastCollector``
only ever reads the snapshot its ``source`` returns (from another thread, the source
asks the loop for one). Only the per-batch histograms (delivery latency, Ntail at
delivery) are prometheus-client ``Histogram`` objects, observed once per delivered
vertex on the loop. ``serve`` starts the endpoint (``amcast.daemon.metrics_http``: on
the event loop, bounded connections, header timeout, render cache, optional TLS and
basic auth from ``amcast.daemon.metrics_access``) on the configured address (default
127.0.0.1) with a private registry.

Membership: ``Metrics.count_event`` counts the Node's membership events on the loop
(suspicions by peer, joiners held back by peer, members removed from views by cause,
lost primary views by reason, own messages in doubt, and the flush-duration
histogram); the snapshot also copies ``Node.peers()`` and ``Node.quorum`` and turns
each peer's ``last_heard`` (daemon clock) into seconds of silence at ``taken_at``.
Labelled counters whose label values are known in advance start at 0, so
``increase()`` sees their first event.

Names follow the Prometheus conventions: ``amcast_`` prefix, ``_total`` for counters,
base units (seconds, bytes). The list is in ``docs/daemon.md``.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from .. import socket_protocol as sp
from ..protocols.events import (
    FlushCompleted,
    JoinerHeldBack,
    MemberSuspected,
    MessagesInDoubt,
    QuorumLost,
    ViewInstalled,
)
from .metrics_access import load_access
from .metrics_http import MetricsHttpServer

LATENCY_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
)
NTAIL_BUCKETS = (0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64)
FLUSH_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)
FEDERATION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                      10.0, 30.0)
EXCLUSION_CAUSES = ("excluded", "left")
"""``ViewInstalled.excluded`` (crashed, paused, cut off, restarted) and ``.left`` (graceful)."""
QUORUM_LOST_REASONS = ("no_quorum", "excluded", "paused", "left")
"""``QuorumLost.reason``."""
DENIED_REQUESTS = ("join", "send")
"""The requests access control decides (``amcast.daemon.access.REQUESTS``)."""
IN_DOUBT_OUTCOMES = ("undelivered", "delivered_here", "unknown")
"""``MessagesInDoubt.payloads`` (not delivered here either: the clients are told
``undelivered``) and ``.delivered_here`` (delivered here, not by the primary component),
beyond a cut this daemon learned; ``unknown``: both, when it never learned the cut (the
clients are told ``undelivered`` with ``outcome`` ``unknown``)."""


@dataclasses.dataclass
class Counters:
    """The daemon's own cumulative counters (the engine's are in ``Node.stats``)."""

    messages_accepted: int = 0
    """Messages of send frames accepted from local clients (queued or submitted)."""
    messages_sent: int = 0
    """Messages handed to the engine."""
    message_bytes_sent: int = 0
    messages_delivered: int = 0
    message_bytes_delivered: int = 0
    batches_delivered: int = 0
    deliveries_to_clients: int = 0
    backpressure_events: int = 0
    own_messages_delivered: int = 0
    messages_reported_undelivered: int = 0
    flow_holds: int = 0
    """Times a local client fell behind and this daemon held its releases (flow control)."""
    log_write_failures: int = 0
    """Log writes (delivery, metrics, trace files) the disk refused, and log lines stderr
    refused, as of the last tick."""
    state_write_failures: int = 0
    """Writes of the membership state file that failed (the daemon sent nothing meanwhile)."""
    drops: Counter[str] = dataclasses.field(default_factory=Counter)
    client_errors: Counter[str] = dataclasses.field(default_factory=Counter)
    clients_disconnected: Counter[str] = dataclasses.field(default_factory=Counter)
    rules: Counter[tuple[str, str]] = dataclasses.field(default_factory=Counter)
    services: Counter[str] = dataclasses.field(default_factory=Counter)
    suspicions: Counter[int] = dataclasses.field(default_factory=Counter)
    """``MemberSuspected``, by suspected node."""
    held_back: Counter[int] = dataclasses.field(default_factory=Counter)
    """``JoinerHeldBack``, by joiner."""
    exclusions: Counter[str] = dataclasses.field(default_factory=Counter)
    """Members the installed views removed, by cause (``EXCLUSION_CAUSES``)."""
    quorum_lost: Counter[str] = dataclasses.field(default_factory=Counter)
    """``QuorumLost``, by reason (``QUORUM_LOST_REASONS``)."""
    in_doubt: Counter[str] = dataclasses.field(default_factory=Counter)
    """Own application messages of ``MessagesInDoubt``, by outcome (``IN_DOUBT_OUTCOMES``)."""
    requests_denied: Counter[str] = dataclasses.field(default_factory=Counter)
    """Client requests the access policy refused (``forbidden``), by request
    (``DENIED_REQUESTS``)."""


@dataclasses.dataclass(frozen=True, slots=True)
class PeerSample:
    """One other listed daemon as ``Node.peers()`` saw it when the snapshot was taken."""

    silent_s: float
    """Seconds since its last datagram (since this daemon started: never heard)."""
    alive: bool
    in_view: bool
    held_back_s: float = 0.0
    """Seconds this daemon, as coordinator, still leaves it out of view changes (heard,
    but it answered none: ``JoinerHeldBack``); 0 when it does not."""
    awaited_s: float = 0.0
    """Seconds the view change this daemon coordinates has been blocked awaiting it (not
    heard from, it may have decided the view: ``ViewChangeBlocked``); 0 when it is not."""
    clock_offset_s: float | None = None
    """Its clock ahead of this host's, from its recent datagrams' send times (``None``:
    not heard lately, or insecure: no send times)."""
    clock_refused: bool = False
    """Its datagrams are refused for their send times (beyond ``replay_window``)."""


def _messages(envelopes: tuple[bytes, ...]) -> int:
    """Application messages in own envelopes (an undecodable one counts as one)."""
    total = 0
    for payload in envelopes:
        env = sp.decode_envelope(payload)
        total += 1 if env is None else len(env[2])
    return total


def _peer_samples(
    peers: Mapping[int, Mapping[str, Any]], taken_at: float, started: float,
) -> Mapping[int, PeerSample]:
    out = {}
    for node, info in peers.items():
        heard = info.get("last_heard")
        since = started if heard is None else float(heard)
        out[int(node)] = PeerSample(max(0.0, taken_at - since), bool(info.get("alive")),
                                    bool(info.get("in_view")),
                                    float(info.get("held_back_s") or 0.0),
                                    float(info.get("awaited_s") or 0.0),
                                    _optional_float(info.get("clock_offset_s")),
                                    bool(info.get("clock_refused")))
    return MappingProxyType(out)


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _empty() -> Mapping[Any, Any]:
    return MappingProxyType({})


def _frozen(mapping: Mapping[Any, Any]) -> Mapping[Any, Any]:
    return MappingProxyType(dict(mapping))


@dataclasses.dataclass(frozen=True, slots=True)
class MetricsSnapshot:
    """Everything a scrape reports, copied on the event loop; never changes afterwards."""

    taken_at: float
    counters: Mapping[str, int]
    """The scalar fields of ``Counters``."""
    drops: Mapping[str, int]
    client_errors: Mapping[str, int]
    clients_disconnected: Mapping[str, int]
    rules: Mapping[tuple[str, str], int]
    services: Mapping[str, int]
    clients: int
    queued: int
    queued_max: int
    submit_queue_frames: int
    submit_queue_bytes: int
    view: int
    members: int
    healthy: bool
    transport: Mapping[str, int]
    """datagrams_sent, datagrams_received, bytes_sent, bytes_received."""
    engine: Mapping[str, float]
    """The numeric fields of ``Node.stats``."""
    engine_kinds: Mapping[str, Mapping[str, int]]
    """The per-kind (dict-valued) fields of ``Node.stats``."""
    primary: bool = False
    """In a primary view (``Daemon.primary``)."""
    quorum: Mapping[str, Any] = dataclasses.field(default_factory=_empty)
    """``Node.quorum``: needed, listed, reachable, not_counted (and ``last_view``, not
    exported)."""
    peers: Mapping[int, PeerSample] = dataclasses.field(default_factory=_empty)
    suspicions: Mapping[int, int] = dataclasses.field(default_factory=_empty)
    held_back: Mapping[int, int] = dataclasses.field(default_factory=_empty)
    exclusions: Mapping[str, int] = dataclasses.field(default_factory=_empty)
    quorum_lost: Mapping[str, int] = dataclasses.field(default_factory=_empty)
    in_doubt: Mapping[str, int] = dataclasses.field(default_factory=_empty)
    requests_denied: Mapping[str, int] = dataclasses.field(default_factory=_empty)
    federation: Mapping[str, Any] = dataclasses.field(default_factory=_empty)
    """``Federation.metrics_sample()`` (empty: no ``[federation]``)."""

    @classmethod
    def build(
        cls, *, taken_at: float, counters: Counters, send_errors: Mapping[str, int],
        queued: list[int], submit_queue_frames: int, submit_queue_bytes: int, view: int,
        members: int, healthy: bool, transport: Mapping[str, int], engine: Any,
        primary: bool = False, quorum: Mapping[str, int] | None = None,
        peers: Mapping[int, Mapping[str, Any]] | None = None, started: float | None = None,
        federation: Mapping[str, Any] | None = None,
    ) -> MetricsSnapshot:
        """Copy the live state (call on the event loop). ``peers`` is ``Node.peers()``
        (``last_heard`` in the clock of ``taken_at``), ``started`` when the daemon
        started (the silence of a peer never heard counts from there)."""
        peers = peers or {}
        scalars = {
            f.name: getattr(counters, f.name) for f in dataclasses.fields(counters)
            if isinstance(getattr(counters, f.name), int)
        }
        return cls(
            taken_at=taken_at, counters=_frozen(scalars),
            drops=_frozen(counters.drops + Counter(send_errors)),
            client_errors=_frozen(counters.client_errors),
            clients_disconnected=_frozen(counters.clients_disconnected),
            rules=_frozen(counters.rules), services=_frozen(counters.services),
            clients=len(queued), queued=sum(queued), queued_max=max(queued, default=0),
            submit_queue_frames=submit_queue_frames, submit_queue_bytes=submit_queue_bytes,
            view=view, members=members, healthy=healthy, transport=_frozen(transport),
            engine=_frozen(engine_stats(engine)),
            engine_kinds=MappingProxyType(
                {k: _frozen(v) for k, v in engine_kinds(engine).items()}
            ),
            primary=primary, quorum=_frozen(quorum or {}),
            peers=_peer_samples(peers, taken_at, taken_at if started is None else started),
            suspicions=_frozen({**dict.fromkeys(map(int, peers), 0), **counters.suspicions}),
            held_back=_frozen({**dict.fromkeys(map(int, peers), 0), **counters.held_back}),
            exclusions=_frozen({**dict.fromkeys(EXCLUSION_CAUSES, 0), **counters.exclusions}),
            quorum_lost=_frozen({**dict.fromkeys(QUORUM_LOST_REASONS, 0),
                                 **counters.quorum_lost}),
            in_doubt=_frozen({**dict.fromkeys(IN_DOUBT_OUTCOMES, 0), **counters.in_doubt}),
            requests_denied=_frozen({**dict.fromkeys(DENIED_REQUESTS, 0),
                                     **counters.requests_denied}),
            federation=MappingProxyType(dict(federation or {})),
        )


# Engine statistics that have a conventional name; any other numeric field of
# ``Node.stats`` is exported as a gauge ``amcast_engine_<field>``.
ENGINE_COUNTERS: dict[str, tuple[str, str]] = {
    "retransmissions": ("amcast_retransmissions_total", "repair datagrams sent"),
    "nack_ranges_sent": ("amcast_nacks_sent_total", "negative acknowledgements (ranges) sent"),
    "late_copies": ("amcast_late_copies_total",
                    "gaps a late copy closed before any repair (late, not lost)"),
    "nacks_waited": ("amcast_nacks_waited_total",
                     "nack timers that waited again: the gap's sender was still arriving"),
    "duplicates": ("amcast_duplicate_vertices_total", "vertices received more than once"),
    "own_echoes": ("amcast_own_echoes_total", "own datagrams received back"),
    "vertices_sent": ("amcast_vertices_sent_total", "DAG vertices this node created"),
    "vertices_released": ("amcast_vertices_released_total", "vertices released in causal order"),
    "messages_submitted": ("amcast_envelopes_submitted_total", "envelopes handed to the engine"),
    "messages_delivered": ("amcast_envelopes_delivered_total", "envelopes the engine delivered"),
    "bytes_sent": ("amcast_engine_bytes_sent_total", "datagram bytes the engine produced"),
    "bytes_received": ("amcast_engine_bytes_received_total", "datagram bytes the engine read"),
    "data_bytes_sent": ("amcast_engine_data_bytes_sent_total",
                        "bytes of data datagrams the engine produced"),
    "repair_bytes_sent": ("amcast_engine_repair_bytes_sent_total",
                          "bytes of repair datagrams (retransmissions answering nacks)"),
    "backpressure_events": ("amcast_engine_backpressure_events_total",
                            "submits the engine refused"),
    "views_installed": ("amcast_views_installed_total", "primary views this daemon installed"),
    "flushes": ("amcast_flushes_total", "views closed here by a flush (virtual synchrony)"),
    "flush_deliveries": ("amcast_flush_deliveries_total",
                         "envelopes delivered while closing a view (the rest of its DAG)"),
    "window_losses": ("amcast_window_losses_total",
                      "times another member's nack of our data halved the byte window"),
    "window_losses_uncorroborated": (
        "amcast_window_losses_uncorroborated_total",
        "loss signals from one member that no other member's nack corroborated "
        "(they halve the byte window at most to half its maximum)"),
    "loss_signals_unbound": (
        "amcast_loss_signals_unbound_total",
        "nacks of our data claiming a member's id from a session other than the one that "
        "speaks for it (a key holder posing as a live member): answered, no loss signal"),
    "messages_in_doubt": ("amcast_envelopes_in_doubt_total",
                          "own envelopes of a view this daemon was excluded from that the "
                          "primary component did not deliver (never re-sent)"),
    "messages_outcome_unknown": ("amcast_envelopes_outcome_unknown_total",
                                 "of them, envelopes of views whose end this daemon never "
                                 "learned: the primary component may have delivered them"),
}
ENGINE_SKIPPED = frozenset({"view_id", "primary"})
"""``Node.stats`` fields the daemon exports itself (``amcast_view_id``, ``amcast_primary``)."""
ENGINE_GAUGES: dict[str, tuple[str, str]] = {
    "pending_dag_size": ("amcast_dag_vertices", "vertices held or waiting for total order"),
    "window_occupancy": ("amcast_window_occupancy", "own unstable vertices (send window)"),
    "window_bytes_used": ("amcast_window_bytes_used",
                          "bytes of own data sent and not yet stable (send window)"),
    "window_bytes": ("amcast_window_bytes",
                     "the byte window now (halves on loss, grows back with stability)"),
    "holding_releases": ("amcast_flow_holding",
                         "1 while a local client reads too slowly and this daemon holds "
                         "its releases (the group slows down to it)"),
    "pending_bytes": ("amcast_pending_bytes", "submitted bytes not yet in a datagram"),
    "nack_reorder_allowance": ("amcast_nack_reorder_allowance_seconds",
                               "extra wait before nacking a gap known only from other "
                               "members' acks (how late copies come here)"),
    "retransmit_buffer": ("amcast_retransmit_buffer_vertices",
                          "vertices kept for retransmission until stable"),
}
ENGINE_BY_KIND = {
    "datagrams_sent": ("amcast_datagrams_sent_by_kind_total", "datagrams sent, by kind"),
    "datagrams_received": ("amcast_datagrams_received_by_kind_total",
                           "datagrams accepted, by kind"),
}


def engine_kinds(stats: Any) -> dict[str, dict[str, int]]:
    """The per-kind counters of ``Node.stats`` (dict-valued fields)."""
    return {k: dict(getattr(stats, k, {}) or {}) for k in ENGINE_BY_KIND} if stats else {}


def engine_stats(stats: Any) -> dict[str, float]:
    """``Node.stats`` (a dataclass, a mapping or an object) as name -> number."""
    if stats is None:
        return {}
    if dataclasses.is_dataclass(stats) and not isinstance(stats, type):
        items = {f.name: getattr(stats, f.name) for f in dataclasses.fields(stats)}
    elif isinstance(stats, Mapping):
        items = dict(stats)
    else:
        items = {k: getattr(stats, k) for k in dir(stats) if not k.startswith("_")}
    return {
        k: v for k, v in items.items()
        if isinstance(v, int | float) and not isinstance(v, bool)
    }


class AmcastCollector(Collector):
    """Builds the metric families from the snapshot ``source()`` returns, nothing else."""

    def __init__(self, source: Callable[[], MetricsSnapshot]) -> None:
        self._source = source

    def collect(self) -> Iterator[Metric]:
        s = self._source()
        c = s.counters

        def counter(name: str, doc: str, value: float) -> CounterMetricFamily:
            return CounterMetricFamily(name.removesuffix("_total"), doc, value=value)

        yield counter("amcast_messages_sent_total", "application messages submitted",
                      c["messages_sent"])
        yield counter("amcast_message_bytes_sent_total", "payload bytes submitted",
                      c["message_bytes_sent"])
        yield counter("amcast_messages_delivered_total", "application messages delivered",
                      c["messages_delivered"])
        yield counter("amcast_message_bytes_delivered_total", "payload bytes delivered",
                      c["message_bytes_delivered"])
        fam = CounterMetricFamily("amcast_batches_delivered", "DAG vertices delivered",
                                  labels=["service"])
        for service, n in sorted(s.services.items()):
            fam.add_metric([service], n)
        yield fam
        yield counter("amcast_client_deliveries_total", "deliver frames written to clients",
                      c["deliveries_to_clients"])
        t = s.transport
        yield counter("amcast_datagrams_sent_total", "datagrams sent", t["datagrams_sent"])
        yield counter("amcast_datagrams_received_total", "datagrams received",
                      t["datagrams_received"])
        yield counter("amcast_datagram_bytes_sent_total", "datagram bytes sent", t["bytes_sent"])
        yield counter("amcast_datagram_bytes_received_total", "datagram bytes received",
                      t["bytes_received"])
        yield counter("amcast_backpressure_events_total", "submits refused for a full window",
                      c["backpressure_events"])
        yield counter("amcast_flow_holds_total", "times a local client fell behind and this "
                      "daemon held its releases until it caught up (end-to-end flow control)",
                      c["flow_holds"])
        yield counter("amcast_log_write_failures_total", "writes of the log files (logs.dir: "
                      "delivery, view, metrics, trace) the disk refused, and log lines stderr "
                      "refused; those records are lost, deliveries go on",
                      c["log_write_failures"])
        yield counter("amcast_state_write_failures_total", "writes of the membership state "
                      "file (node.state_dir) that failed; this daemon sends nothing until one "
                      "succeeds", c["state_write_failures"])
        for name, doc, labels, values in (
            ("amcast_drops", "datagrams dropped and events not handled, by reason", "reason",
             s.drops),
            ("amcast_client_errors", "error frames sent to clients, by code", "code",
             s.client_errors),
            ("amcast_clients_disconnected", "clients disconnected, by reason", "reason",
             s.clients_disconnected),
            ("amcast_client_requests_denied", "join and send requests the access policy "
             "([access]) refused with forbidden, by request", "request", s.requests_denied),
        ):
            fam = CounterMetricFamily(name, doc, labels=[labels])
            for key, n in sorted(values.items()):
                fam.add_metric([key], n)
            yield fam
        fam = CounterMetricFamily("amcast_deliveries_by_rule",
                                  "vertices delivered, by ordering variant and rule",
                                  labels=["variant", "rule"])
        for (variant, rule), n in sorted(s.rules.items()):
            fam.add_metric([variant, rule], n)
        yield fam
        gauges = {
            "amcast_clients_connected": ("local clients connected", s.clients),
            "amcast_client_queue_bytes": ("bytes queued to local clients (sum)", s.queued),
            "amcast_client_queue_max_bytes": ("bytes queued to the fullest client",
                                              s.queued_max),
            "amcast_submit_queue_frames": ("envelopes waiting for window space",
                                           s.submit_queue_frames),
            "amcast_submit_queue_bytes": ("bytes charged to the submit queue",
                                          s.submit_queue_bytes),
            "amcast_view_id": ("id of the installed view (the last one while not primary)",
                               s.view),
            "amcast_view_members": ("members of the installed view (the last one while not "
                                    "primary)", s.members),
            "amcast_healthy": ("1 when the daemon reports itself healthy (status health)",
                               int(s.healthy)),
            "amcast_metrics_snapshot_timestamp_seconds": (
                "when the scraped snapshot was taken (daemon clock, Unix s)", s.taken_at),
        }
        for name, (doc, value) in gauges.items():
            yield GaugeMetricFamily(name, doc, value=value)
        yield from _membership(s)
        for key, by_kind in s.engine_kinds.items():
            name, doc = ENGINE_BY_KIND[key]
            fam = CounterMetricFamily(name.removesuffix("_total"), doc, labels=["kind"])
            for kind, n in sorted(by_kind.items()):
                fam.add_metric([kind], n)
            yield fam
        seen: set[str] = set()
        for key, value in sorted(s.engine.items()):
            if key in ENGINE_SKIPPED:
                continue
            if key in ENGINE_COUNTERS:
                name, doc = ENGINE_COUNTERS[key]
                if name not in seen:
                    seen.add(name)
                    yield counter(name, doc, value)
            elif key in ENGINE_GAUGES:
                name, doc = ENGINE_GAUGES[key]
                if name not in seen:
                    seen.add(name)
                    yield GaugeMetricFamily(name, doc, value=value)
            else:
                yield GaugeMetricFamily(f"amcast_engine_{key}", f"engine statistic {key}",
                                        value=value)


def _membership(s: MetricsSnapshot) -> Iterator[Metric]:
    """The membership families of a snapshot (issue 12)."""
    q = s.quorum
    for name, doc, value in (
        ("amcast_primary", "1 while this daemon is in a primary view (orders messages)",
         int(s.primary)),
        ("amcast_listed_members", "potential members listed in node.members",
         q.get("listed", 0)),
        ("amcast_quorum_needed", "members a primary view needs (strict majority of the "
         "listed members, or protocol.expected_votes)", q.get("needed", 0)),
        ("amcast_quorum_reachable", "listed daemons this one hears (itself included)",
         q.get("reachable", 0)),
        ("amcast_quorum_not_counted", "promisers of this daemon's latest round whose votes "
         "do not count toward the next view (an earlier incarnation than the view lists, "
         "or another state file: docs/membership.md, 'Whose vote counts'); 0 once a view "
         "is installed", len(q.get("not_counted", ()))),
    ):
        yield GaugeMetricFamily(name, doc, value=value)
    heard = GaugeMetricFamily(
        "amcast_peer_last_heard_seconds",
        "seconds since the last datagram from this peer (since this daemon started if "
        "never heard)", labels=["peer"])
    alive = GaugeMetricFamily("amcast_peer_alive", "1 while this peer is not suspected",
                              labels=["peer"])
    in_view = GaugeMetricFamily("amcast_peer_in_view",
                                "1 while this peer is a member of the installed view",
                                labels=["peer"])
    held = GaugeMetricFamily(
        "amcast_peer_held_back_seconds",
        "seconds this daemon, as coordinator, still leaves this peer out of view changes: "
        "it is heard but answered none that would take it in (it may not hear this one: "
        "a one-way cut, a firewall dropping what comes in); 0 when not held back",
        labels=["peer"])
    awaited = GaugeMetricFamily(
        "amcast_peer_awaited_seconds",
        "seconds the view change this daemon coordinates has been blocked awaiting this "
        "peer: not heard from, it may have decided the view before it failed, and no live "
        "member holds that view's cut; it must start again from its state directory; 0 "
        "when not awaited", labels=["peer"])
    clock = GaugeMetricFamily(
        "amcast_peer_clock_offset_seconds",
        "how far this peer's clock is ahead of this host's (negative: behind), from the "
        "send times of its recent datagrams (sealed datagrams only; absent while it is not "
        "heard); beyond protocol.replay_window its datagrams are refused", labels=["peer"])
    refused = GaugeMetricFamily(
        "amcast_peer_clock_refused",
        "1 while this peer's datagrams are refused for their send times: its clock and "
        "this host's differ by more than protocol.replay_window (or its old traffic is "
        "being replayed)", labels=["peer"])
    for node, peer in sorted(s.peers.items()):
        heard.add_metric([str(node)], peer.silent_s)
        alive.add_metric([str(node)], int(peer.alive))
        in_view.add_metric([str(node)], int(peer.in_view))
        held.add_metric([str(node)], peer.held_back_s)
        awaited.add_metric([str(node)], peer.awaited_s)
        if peer.clock_offset_s is not None:
            clock.add_metric([str(node)], peer.clock_offset_s)
        refused.add_metric([str(node)], int(peer.clock_refused))
    yield from (heard, alive, in_view, held, awaited, clock, refused)
    for name, doc, label, values in (
        ("amcast_member_suspicions", "members of the view suspected after suspect_timeout "
         "of silence, by peer", "peer", s.suspicions),
        ("amcast_joiners_held_back", "times this daemon, as coordinator, left a heard "
         "daemon out of view changes because it answered none that would take it in, by "
         "peer", "peer", s.held_back),
        ("amcast_member_exclusions", "members the views installed here removed, by cause: "
         "excluded (crashed, paused, cut off or restarted), left (graceful leave)", "cause",
         s.exclusions),
        ("amcast_quorum_lost", "times this daemon dropped out of the primary component, by "
         "reason (no_quorum, excluded, paused, left)", "reason", s.quorum_lost),
        ("amcast_messages_in_doubt", "own messages of a view this daemon was excluded from "
         "that the primary component did not deliver; amcast never re-sends them after a "
         "view change: undelivered = reported to the client as undelivered, delivered_here "
         "= delivered here in the view's last moments but not by the primary component, "
         "unknown = this daemon never learned how the view ended (reported as undelivered "
         "with outcome unknown)",
         "outcome", s.in_doubt),
    ):
        fam = CounterMetricFamily(name, doc, labels=[label])
        for key, n in sorted(values.items(), key=lambda kv: str(kv[0])):
            fam.add_metric([str(key)], n)
        yield fam
    yield from _federation_families(s.federation or NO_FEDERATION)


NO_FEDERATION: Mapping[str, Any] = MappingProxyType({
    "in_flight": 0, "sent": 0, "delivered": 0, "stalled": 0, "undelivered": 0,
    "remote_drops": {},
    "reachable": {}})
"""What a daemon without ``[federation]`` exports: zeros (alert rules find the series)."""


def _federation_families(f: Mapping[str, Any]) -> Iterator[Metric]:
    """The ``[federation]`` metrics (``amcast.daemon.federation``)."""
    yield GaugeMetricFamily("amcast_federation_in_flight",
                            "cross-cluster messages this daemon's member has not delivered "
                            "yet (sent or learned, waiting for other clusters' answers)",
                            value=f["in_flight"])
    for name, doc, key in (
        ("amcast_federation_messages_sent", "cross-cluster messages sent by this daemon's "
         "clients", "sent"),
        ("amcast_federation_messages_delivered", "cross-cluster messages delivered here",
         "delivered"),
        ("amcast_federation_stalled", "stall reports: a cross-cluster message older than "
         "federation.stall_after_s still waits for another cluster", "stalled"),
        ("amcast_federation_undelivered", "own cross-cluster messages reported undelivered "
         "to their clients (not acknowledged by every destination within "
         "federation.deadline_s, or at shutdown; outcome unknown)", "undelivered"),
    ):
        yield CounterMetricFamily(name, doc, value=f[key])
    fam = CounterMetricFamily("amcast_federation_remote_drops",
                              "cross-cluster datagrams refused, by reason (auth_failed, "
                              "stale, replayed, malformed, wrong_cluster, unknown_sender, "
                              "and the protocol's own)", labels=["reason"])
    for reason, n in sorted(f["remote_drops"].items()):
        fam.add_metric([reason], n)
    yield fam
    gauge = GaugeMetricFamily("amcast_federation_cluster_reachable",
                              "1 while a datagram of that cluster arrived within the last "
                              "3 s (every daemon pings the other clusters every second); "
                              "this daemon's own cluster is 1", labels=["cluster"])
    for cluster, up in sorted(f["reachable"].items()):
        gauge.add_metric([cluster], 1 if up else 0)
    yield gauge


class Metrics:
    """The registry, its collector, the two per-batch histograms and the flush one."""

    def __init__(self, source: Callable[[], MetricsSnapshot]) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(AmcastCollector(source))
        self.latency = Histogram(
            "amcast_delivery_latency_seconds",
            "send (sender's clock) to local delivery, per delivered vertex",
            buckets=LATENCY_BUCKETS, registry=self.registry,
        )
        self.ntail = Histogram(
            "amcast_delivery_ntail", "Ntail(G) at delivery, per delivered vertex",
            labelnames=["variant"], buckets=NTAIL_BUCKETS, registry=self.registry,
        )
        self.federation_latency = Histogram(
            "amcast_federation_latency_seconds",
            "cross-cluster messages: send (sender's wall clock) to delivery here",
            buckets=FEDERATION_BUCKETS, registry=self.registry,
        )
        self.flush_duration = Histogram(
            "amcast_flush_duration_seconds",
            "view change: from freezing the old view to installing the next one, per flush",
            buckets=FLUSH_BUCKETS, registry=self.registry,
        )
        self._server: MetricsHttpServer | None = None
        self._core: Gauge | None = None

    def set_core(self, core: Mapping[str, str]) -> None:
        """``amcast_core_info``: 1, labelled with which implementation runs each part of
        the data path (``Daemon.core``, ``Node.core``'s parts: ``decode``, ``seal``,
        ``order``, ``reliable``)."""
        if self._core is None:
            self._core = Gauge("amcast_core_info",
                               "1; the labels say which implementation runs each part of "
                               "the data path (native or pure)",
                               labelnames=sorted(core), registry=self.registry)
        self._core.labels(**core).set(1)

    def count_event(self, counters: Counters, ev: object) -> None:
        """Count one membership event of ``Node.events()`` (on the event loop)."""
        if isinstance(ev, ViewInstalled):
            counters.exclusions["excluded"] += len(ev.excluded)
            counters.exclusions["left"] += len(ev.left)
        elif isinstance(ev, QuorumLost):
            counters.quorum_lost[str(ev.reason)] += 1
        elif isinstance(ev, MemberSuspected):
            counters.suspicions[int(ev.node)] += 1
        elif isinstance(ev, JoinerHeldBack):
            counters.held_back[int(ev.node)] += 1
        elif isinstance(ev, FlushCompleted):
            self.flush_duration.observe(max(0.0, ev.duration_s))
        elif isinstance(ev, MessagesInDoubt):
            if ev.cut_known:
                counters.in_doubt["undelivered"] += _messages(ev.payloads)
                counters.in_doubt["delivered_here"] += _messages(ev.delivered_here)
            else:
                counters.in_doubt["unknown"] += _messages(ev.payloads + ev.delivered_here)

    async def serve(self, section: Any) -> int:
        """Serve the registry on the running loop as ``section`` (a ``MetricsSection``)
        says (``amcast.daemon.metrics_http``); returns the bound port (``port=0`` picks
        one). Unusable TLS or users files raise ``ConfigurationError`` first."""
        self._server = MetricsHttpServer(self.registry, section, load_access(section))
        return await self._server.start()

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
