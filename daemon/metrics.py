"""Prometheus metrics of one daemon, read at scrape time from plain counters.

Theory of operation: the hot path never touches a Prometheus object per message. The
daemon keeps cumulative counters as plain attributes of ``Counters`` (bumped once per
batch) and the engine keeps its own (``Node.stats``); ``AmcastCollector`` turns both into
metric families when Prometheus scrapes. Only the per-batch histograms (delivery latency,
Ntail at delivery) are prometheus-client ``Histogram`` objects, observed once per
delivered vertex. ``serve`` starts prometheus-client's HTTP server on the configured
address (default 127.0.0.1) with a private registry.

Names follow the Prometheus conventions: ``amcast_`` prefix, ``_total`` for counters,
base units (seconds, bytes). The list is in ``docs/daemon.md``.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

LATENCY_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
)
NTAIL_BUCKETS = (0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64)


@dataclasses.dataclass
class Counters:
    """The daemon's own cumulative counters (the engine's are in ``Node.stats``)."""

    messages_sent: int = 0
    message_bytes_sent: int = 0
    messages_delivered: int = 0
    message_bytes_delivered: int = 0
    batches_delivered: int = 0
    deliveries_to_clients: int = 0
    backpressure_events: int = 0
    drops: Counter[str] = dataclasses.field(default_factory=Counter)
    client_errors: Counter[str] = dataclasses.field(default_factory=Counter)
    clients_disconnected: Counter[str] = dataclasses.field(default_factory=Counter)
    rules: Counter[tuple[str, str]] = dataclasses.field(default_factory=Counter)
    services: Counter[str] = dataclasses.field(default_factory=Counter)


# Engine statistics that have a conventional name; any other numeric field of
# ``Node.stats`` is exported as a gauge ``amcast_engine_<field>``.
ENGINE_COUNTERS: dict[str, tuple[str, str]] = {
    "retransmissions": ("amcast_retransmissions_total", "repair datagrams sent"),
    "nack_ranges_sent": ("amcast_nacks_sent_total", "negative acknowledgements (ranges) sent"),
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
    "backpressure_events": ("amcast_engine_backpressure_events_total",
                            "submits the engine refused"),
}
ENGINE_GAUGES: dict[str, tuple[str, str]] = {
    "pending_dag_size": ("amcast_dag_vertices", "vertices held or waiting for total order"),
    "window_occupancy": ("amcast_window_occupancy", "own unstable vertices (send window)"),
    "pending_bytes": ("amcast_pending_bytes", "submitted bytes not yet in a datagram"),
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
    """Builds the metric families from ``state()`` when scraped."""

    def __init__(self, state: Callable[[], dict[str, Any]]) -> None:
        self._state = state

    def collect(self) -> Iterator[Metric]:
        s = self._state()
        c: Counters = s["counters"]

        def counter(name: str, doc: str, value: float) -> CounterMetricFamily:
            return CounterMetricFamily(name.removesuffix("_total"), doc, value=value)

        yield counter("amcast_messages_sent_total", "application messages submitted",
                      c.messages_sent)
        yield counter("amcast_message_bytes_sent_total", "payload bytes submitted",
                      c.message_bytes_sent)
        yield counter("amcast_messages_delivered_total", "application messages delivered",
                      c.messages_delivered)
        yield counter("amcast_message_bytes_delivered_total", "payload bytes delivered",
                      c.message_bytes_delivered)
        fam = CounterMetricFamily("amcast_batches_delivered", "DAG vertices delivered",
                                  labels=["service"])
        for service, n in sorted(c.services.items()):
            fam.add_metric([service], n)
        yield fam
        yield counter("amcast_client_deliveries_total", "deliver frames written to clients",
                      c.deliveries_to_clients)
        yield counter("amcast_datagrams_sent_total", "datagrams sent", s["datagrams_sent"])
        yield counter("amcast_datagrams_received_total", "datagrams received",
                      s["datagrams_received"])
        yield counter("amcast_datagram_bytes_sent_total", "datagram bytes sent", s["bytes_sent"])
        yield counter("amcast_datagram_bytes_received_total", "datagram bytes received",
                      s["bytes_received"])
        yield counter("amcast_backpressure_events_total", "submits refused for a full window",
                      c.backpressure_events)
        for name, doc, labels, values in (
            ("amcast_drops", "datagrams dropped, by reason", "reason", c.drops),
            ("amcast_client_errors", "error frames sent to clients, by code", "code",
             c.client_errors),
            ("amcast_clients_disconnected", "clients disconnected, by reason", "reason",
             c.clients_disconnected),
        ):
            fam = CounterMetricFamily(name, doc, labels=[labels])
            for key, n in sorted(values.items()):
                fam.add_metric([key], n)
            yield fam
        fam = CounterMetricFamily("amcast_deliveries_by_rule",
                                  "vertices delivered, by ordering variant and rule",
                                  labels=["variant", "rule"])
        for (variant, rule), n in sorted(c.rules.items()):
            fam.add_metric([variant, rule], n)
        yield fam
        gauges = {
            "amcast_clients_connected": ("local clients connected", s["clients"]),
            "amcast_client_queue_bytes": ("bytes queued to local clients (sum)", s["queued"]),
            "amcast_client_queue_max_bytes": ("bytes queued to the fullest client",
                                              s["queued_max"]),
            "amcast_submit_queue_frames": ("send frames waiting for window space",
                                           s["submit_queue"]),
            "amcast_view_id": ("id of the installed view", s["view"]),
            "amcast_view_members": ("members of the installed view", s["members"]),
        }
        for name, (doc, value) in gauges.items():
            yield GaugeMetricFamily(name, doc, value=value)
        for key, by_kind in engine_kinds(s["engine"]).items():
            name, doc = ENGINE_BY_KIND[key]
            fam = CounterMetricFamily(name.removesuffix("_total"), doc, labels=["kind"])
            for kind, n in sorted(by_kind.items()):
                fam.add_metric([kind], n)
            yield fam
        seen: set[str] = set()
        for key, value in sorted(engine_stats(s["engine"]).items()):
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


class Metrics:
    """The registry, its collector and the two per-batch histograms."""

    def __init__(self, state: Callable[[], dict[str, Any]]) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(AmcastCollector(state))
        self.latency = Histogram(
            "amcast_delivery_latency_seconds",
            "send (sender's clock) to local delivery, per delivered vertex",
            buckets=LATENCY_BUCKETS, registry=self.registry,
        )
        self.ntail = Histogram(
            "amcast_delivery_ntail", "Ntail(G) at delivery, per delivered vertex",
            labelnames=["variant"], buckets=NTAIL_BUCKETS, registry=self.registry,
        )
        self._server: Any = None

    def serve(self, address: str, port: int) -> int:
        """Start the HTTP endpoint; returns the bound port (``port=0`` picks one)."""
        self._server, _thread = start_http_server(port, addr=address, registry=self.registry)
        return int(self._server.server_address[1])

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
