"""``amcast bench scale``: what one ordered message costs as the group grows (issue 13).

For each group size n the real engines (``amcast.protocols.node.Node``: codec, HMAC,
reliable causal layer, membership, GL-ToTo engine) run in the deterministic cluster
simulator, no loss, LAN-like links (50 us one-way, 10 us jitter), 100-byte agreed
messages, under two loads:

- ``light``: node 0 alone sends, 20 messages/s, one message per vertex; every other
  member answers each data vertex with an ack-only vertex (ToTo needs their votes);
- ``all``: every node sends, one message per 50 us on average (less than
  ``ack_delay``), one message per vertex; the acknowledgements ride on data vertices.

Measured per n and load, divided by the ordered (application) messages of the run:

- header bytes per message of the DATA datagrams, split into prefix + HMAC tag (18
  bytes), the ack vector (the msgpack bytes of the vertex's changed acknowledgements)
  and the rest (kind, sender, view, hb_seq, origin, seq, service, send time, msgpack
  framing); plus every byte sent and received (all kinds) per message;
- datagrams sent and received per message, by kind, from the nodes' ``stats``;
- CPU per message: process CPU time of the whole simulation, and its split by layer,
  measured with wrappers installed by this module only (``protocols/`` has no timing
  code): wire (encode, decode, HMAC), ordering engine (``TotalOrderEngine.insert`` and
  ``close``: the Python engine, on any core), the rest of the Node (reliable layer,
  session, membership; the Python reliable layer, encoder and sealer too, on any core), and
  the simulator's own loop. Every receiver decodes and authenticates its own copy, as a
  daemon does (the simulator's shared decode cache is turned off here);
- the GL-ToTo threshold phi (n/2) and the votes a message waits for: the early rule
  needs nvt > phi votes, the stable prefix Ntail(G) >= n - phi voters; the mean nvt and
  Ntail seen at delivery, and the share of messages each rule ordered;
- the growth of CPU and bytes per message from n/2 to n ("per doubling").

The datagram budget is 9000 bytes (jumbo frames) at every n: 1472 cannot carry the
ack vector of more than 96 members (``check_budget``). With one message per vertex the
budget does not change the header. Message counts shrink at large n to keep the default
run near 1.5 minutes on a 2-core machine; the table gives them.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import msgpack
from amcast.protocols import node as node_module
from amcast.protocols.node import Node
from amcast.protocols.node_config import NodeConfig
from amcast.protocols.ordering import OrderingConfig, TotalOrderEngine
from amcast.protocols.ordering import native as ordering_native
from amcast.protocols.ordering.messages import DeliveryRule, MessageDelivered
from amcast.protocols.reliable import native as reliable_native
from amcast.protocols.reliable.layer import ReliableLayer
from amcast.protocols.simulation.cluster import Cluster, Workload
from amcast.protocols.simulation.network import LinkFaults, NetworkConfig
from amcast.protocols.vocabulary import ServiceLevel
from amcast.protocols.wire.auth import Authenticator
from amcast.protocols.wire.codec import Datagram, Kind
from amcast.protocols.wire.limits import SEAL_HEADER_BYTES, TAG_BYTES
from amcast.protocols.wire.native import encode_plain

from .options import group_sizes

NAME = "scale"
HELP = "header bytes, datagrams and CPU per ordered message against the group size n"
KEY = b"benchmark-group-key!"
BUDGET = 9000
LIGHT_INTERVAL = 0.001
"""Mean gap between node 0's submissions under ``light``: W1's 1,000 msgs/s, longer than
an ordering round on the simulated links, so each message is a vertex of its own; the
lazy ackers' acks (``lazy_ack_delay``) each cover several messages."""
ALL_INTERVAL = 0.00005
"""Mean gap between one node's submissions under ``all``: shorter than ``ack_delay``
(0.2 ms), so acknowledgements ride on data vertices."""
LINK = LinkFaults(delay=0.00005, jitter=0.00001)
"""LAN-like links: 50 us one-way, 10 us jitter (a short run is mostly steady state)."""
DEFAULT_NODES = "4,8,16,32,64,128"
KINDS = ("data", "ack_only", "heartbeat", "nack", "repair")
LAYERS = ("wire", "ordering", "node", "simulator")
EMPTY_LIST = len(msgpack.packb([]))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nodes", default=DEFAULT_NODES,
                        help=f"group sizes, comma-separated (default {DEFAULT_NODES})")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true",
                        help="n = 4, 8, 16 and few messages (CI smoke test)")


def _progress(line: str) -> None:
    print(f"[bench scale] {line}", file=sys.stderr, flush=True)


def message_counts(n: int, quick: bool) -> tuple[int, int]:
    """(messages of the one sender in ``light``, messages per node in ``all``) at n:
    fewer at large n, where one light message costs seconds of CPU (n^2 receptions)."""
    if quick:
        return 12, 8
    light = 40 if n <= 16 else 20 if n <= 32 else 10 if n <= 64 else 5
    return light, max(4, 512 // n)


# ---------------------------------------------------------------------- probes


@dataclass(slots=True)
class Probe:
    """CPU by layer (exclusive process time of nested wrapped calls), the DATA datagrams
    sent and the ordering engine's deliveries, collected while installed."""

    cpu: dict[str, float] = field(default_factory=lambda: dict.fromkeys(LAYERS, 0.0))
    data: list[tuple[Datagram, int]] = field(default_factory=list)
    delivered: list[MessageDelivered] = field(default_factory=list)
    _stack: list[list[float]] = field(default_factory=list)

    def timed(self, layer: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        clock, stack, cpu = time.process_time, self._stack, self.cpu

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            frame = [0.0]
            stack.append(frame)
            start = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                elapsed = clock() - start
                stack.pop()
                cpu[layer] += elapsed - frame[0]
                if stack:
                    stack[-1][0] += elapsed

        return wrapper


@contextmanager
def installed(probe: Probe) -> Iterator[Probe]:
    """Wrap the codec, the engine and the Node's entry points for the duration."""
    saved: list[tuple[Any, str, Any]] = []

    def patch(owner: Any, name: str, new: Any) -> None:
        saved.append((owner, name, owner.__dict__[name]))
        setattr(owner, name, new)

    encode = probe.timed("wire", node_module.encode)

    def encode_and_keep(dg: Any, auth: Any, wall_ms: int) -> bytes:
        raw = encode(dg, auth, wall_ms)
        if isinstance(dg, Datagram) and dg.kind is Kind.DATA:
            probe.data.append((dg, len(raw)))
        return raw

    insert = probe.timed("ordering", TotalOrderEngine.insert)

    def insert_and_keep(engine: TotalOrderEngine, message: Any) -> list[MessageDelivered]:
        out = insert(engine, message)
        probe.delivered.extend(out)
        return out

    patch(node_module, "encode", encode_and_keep)
    # a received datagram: authenticated, then decoded unless it repeats a heartbeat
    patch(Authenticator, "open", probe.timed("wire", Authenticator.open))
    make_decoder = node_module.make_decoder  # each Node builds its decoder once

    def timed_decoder(limits: Any, core: Any = None) -> Any:
        return probe.timed("wire", make_decoder(limits, core))

    patch(node_module, "make_decoder", timed_decoder)
    # the layers are timed by wrapping Python methods, so the views order with the Python
    # engine, whatever the core (``amcast bench engine`` times the native one)
    patch(ordering_native, "engine_class", lambda core=None, n=1: TotalOrderEngine)
    # and with the Python reliable layer and encoder: the native ones are not wrapped (a
    # native encoder would bypass ``encode`` above and no DATA header would be counted)
    patch(reliable_native, "layer_class", lambda core=None, node_id=0, members=None: ReliableLayer)
    patch(node_module, "make_encoder", lambda core=None: encode_plain)
    # and with the Python sealer, whose ``open`` is the one timed above
    make_sealer = node_module.make_sealer

    def python_sealer(*args: Any, **kwargs: Any) -> Any:
        return make_sealer(*args, **{**kwargs, "seal": "pure"})

    patch(node_module, "make_sealer", python_sealer)
    patch(TotalOrderEngine, "insert", insert_and_keep)
    patch(TotalOrderEngine, "close", probe.timed("ordering", TotalOrderEngine.close))
    for name in ("receive_datagram", "handle_timer", "datagrams_to_send", "submit",
                 "next_timer", "events", "state_to_persist"):
        patch(Node, name, probe.timed("node", Node.__dict__[name]))
    try:
        yield probe
    finally:
        for owner, name, old in reversed(saved):
            setattr(owner, name, old)


class OwnDecodeCluster(Cluster):
    """Every receiver decodes and authenticates its copy itself, as a daemon does."""

    def _decoded(self, node: Node, data: bytes) -> Any:
        return None

    def deliver_in_flight(self) -> None:
        """Hand every datagram still on the wire to its receiver (answers included; no
        timers): a run stops the instant everything is delivered, which can be the instant
        the members send their heartbeats (they beat together, on the grid), and a
        datagram counted as sent should be counted as received too."""
        while self._heap:
            self._step(self._heap[0][0], "net", -1)


# ---------------------------------------------------------------------- one run


def run_point(n: int, load: str, *, messages: int, seed: int) -> dict[str, Any]:
    """One simulation of ``n`` nodes under ``load`` (``light`` or ``all``): its figures."""
    workload = Workload(messages_per_node=messages, senders=1 if load == "light" else None,
                        interval=LIGHT_INTERVAL if load == "light" else ALL_INTERVAL,
                        services=((ServiceLevel.AGREED, 1.0),),
                        min_size=100, max_size=100, large_fraction=0.0)
    cfg = NodeConfig(group_key=KEY, datagram_budget=BUDGET)
    probe = Probe()
    with installed(probe):  # before the Nodes: their first views' engines are made with them
        cluster = OwnDecodeCluster(n, seed=seed, node_config=cfg,
                                   network=NetworkConfig(default=LINK))
        start = time.process_time()
        result = cluster.run(workload, max_time=600.0)
        cluster.deliver_in_flight()
        total_cpu = time.process_time() - start
    if not result.ok:
        bad = {k: v[:3] for k, v in result.violations.items() if v}
        raise RuntimeError(f"safety violated: n={n}, load {load}, seed {seed}: {bad}")
    ordered = len(result.sent)
    expected = n * ordered
    got = sum(len(log) for log in result.logs.values())
    if got != expected:
        raise RuntimeError(f"n={n}, load {load}, seed {seed}: {got} deliveries of {expected}")
    probe.cpu["simulator"] = total_cpu - sum(probe.cpu[k] for k in LAYERS if k != "simulator")

    sent = dict.fromkeys(KINDS, 0)
    received = dict.fromkeys(KINDS, 0)
    bytes_sent = bytes_received = 0
    for nd in result.nodes.values():
        stats = nd.stats
        for kind in KINDS:
            sent[kind] += stats.datagrams_sent[kind]
            received[kind] += stats.datagrams_received[kind]
        bytes_sent += stats.bytes_sent
        bytes_received += stats.bytes_received

    payload = ack = total = items = 0
    for dg, size in probe.data:
        v = dg.vertices[0]
        flat = [x for pair in v.acks for x in pair]
        ack += len(msgpack.packb(flat)) - EMPTY_LIST
        payload += sum(len(it) for it in v.items if isinstance(it, bytes))
        items += len(v.items)
        total += size
    mac = (SEAL_HEADER_BYTES + TAG_BYTES) * len(probe.data)
    header = total - payload

    phi = OrderingConfig().resolve_phi(n)
    delivered = probe.delivered
    count = max(1, len(delivered))
    rules = {r.value: sum(1 for d in delivered if d.rule is r) / count
             for r in (DeliveryRule.EARLY, DeliveryRule.GL_PREFIX, DeliveryRule.DEFAULT)}
    per = 1 / ordered
    return {
        "n": n,
        "load": load,
        "messages": ordered,
        "messages per data vertex": items / max(1, len(probe.data)),
        "virtual seconds": result.end_time,
        "header bytes": header * per,
        "header: seal (AEAD header+tag)": mac * per,
        "header: ack vector": ack * per,
        "header: other": (header - mac - ack) * per,
        "bytes sent": bytes_sent * per,
        "bytes received": bytes_received * per,
        "sent": {k: sent[k] * per for k in KINDS},
        "received": {k: received[k] * per for k in KINDS},
        "datagrams sent": sum(sent.values()) * per,
        "datagrams received": sum(received.values()) * per,
        "cpu ms": total_cpu * 1000 * per,
        "cpu ms per node": total_cpu * 1000 * per / n,
        "cpu ms by layer": {k: probe.cpu[k] * 1000 * per for k in LAYERS},
        "phi": phi,
        "early votes": math.floor(phi) + 1,
        "min voters": math.ceil(n - phi),
        "mean nvt at delivery": sum(d.nvt for d in delivered) / count,
        "mean ntail at delivery": sum(d.ntail for d in delivered) / count,
        "rule share": rules,
    }


# ---------------------------------------------------------------------- report


def _growth(points: list[dict[str, Any]], key: str) -> dict[int, float]:
    """Ratio of ``key`` at n over its value at n/2 (when both were measured)."""
    by_n = {p["n"]: p[key] for p in points}
    return {n: v / by_n[n // 2] for n, v in by_n.items() if n % 2 == 0 and by_n.get(n // 2)}


def _slope(points: list[dict[str, Any]], key: str) -> float:
    """Least-squares exponent b of ``key`` ~ n**b over the measured sizes."""
    xs = [math.log(p["n"]) for p in points]
    ys = [math.log(p[key]) for p in points]
    if len(xs) < 2:
        return float("nan")
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den


def sizes_of(args: argparse.Namespace) -> list[int]:
    if args.quick and args.nodes == DEFAULT_NODES:
        return [4, 8, 16]
    return sorted(set(group_sizes(args.nodes, "--nodes", minimum=2)))


def run(args: argparse.Namespace) -> dict[str, Any]:
    points: dict[str, list[dict[str, Any]]] = {"light": [], "all": []}
    for n in sizes_of(args):
        light, each = message_counts(n, args.quick)
        for load, messages in (("light", light), ("all", each)):
            what = f"{messages} messages" if load == "light" else f"{messages} per node"
            _progress(f"n={n}, {load}: {what}")
            t0 = time.perf_counter()
            points[load].append(run_point(n, load, messages=messages, seed=args.seed))
            _progress(f"n={n}, {load}: done in {time.perf_counter() - t0:.1f} s")

    rows_bytes, rows_dg, rows_cpu, rows_votes = [], [], [], []
    figures: dict[str, Any] = {}
    for load, pts in points.items():
        cpu_x = _growth(pts, "cpu ms")
        header_x = _growth(pts, "header bytes")
        rx_x = _growth(pts, "datagrams received")
        for p in pts:
            n = p["n"]
            rows_bytes.append([load, n, p["messages"], p["header bytes"],
                               p["header: seal (AEAD header+tag)"], p["header: ack vector"],
                               p["header: other"], _ratio(header_x.get(n)), p["bytes sent"],
                               p["bytes received"]])
            rows_dg.append([load, n, *(p["sent"][k] for k in KINDS), p["datagrams received"],
                            _ratio(rx_x.get(n))])
            cpu = p["cpu ms by layer"]
            rows_cpu.append([load, n, p["cpu ms"], p["cpu ms per node"],
                             *(cpu[k] for k in LAYERS), _ratio(cpu_x.get(n)),
                             p["cpu ms"] * 1000 / p["datagrams received"]])
            share = p["rule share"]
            rows_votes.append([load, n, p["phi"], p["early votes"], p["min voters"],
                               p["mean nvt at delivery"], p["mean ntail at delivery"],
                               share["early"], share["gl_prefix"], share["default"]])
            figures[f"{load}: header bytes/message, n={n}"] = p["header bytes"]
            figures[f"{load}: cpu ms/message (whole cluster), n={n}"] = p["cpu ms"]
        for key in ("cpu ms", "header bytes", "datagrams received"):
            figures[f"{load}: {key} per message ~ n^b, fitted b"] = _slope(pts, key)
    return {
        "title": "amcast bench scale: cost per ordered message against n (simulated Nodes)",
        "tables": [
            {"title": "bytes per ordered message: DATA header (split) and every byte sent / "
                      "received by the cluster",
             "columns": ["load", "n", "messages", "header", "seal", "ack vector",
                         "other", "header x n/2", "bytes sent", "bytes received"],
             "rows": rows_bytes},
            {"title": "datagrams sent per ordered message by kind (cluster), and received "
                      "(all kinds; = sent x (n-1) without loss)",
             "columns": ["load", "n", *(f"tx {k}" for k in KINDS), "rx all", "rx x n/2"],
             "rows": rows_dg},
            {"title": "process CPU ms per ordered message: whole cluster, per node, and by "
                      "layer (cluster)",
             "columns": ["load", "n", "cpu ms", "per node", *LAYERS, "cpu x n/2",
                         "us/reception"],
             "rows": rows_cpu},
            {"title": "GL-ToTo threshold and votes: early rule needs nvt > phi, the stable "
                      "prefix Ntail(G) >= n - phi; mean seen at delivery, share by rule",
             "columns": ["load", "n", "phi", "nvt > phi", "Ntail >= n-phi", "mean nvt",
                         "mean Ntail", "early", "gl_prefix", "default"],
             "rows": rows_votes},
        ],
        "figures": figures,
        "points": points,
        "notes": [
            f"seed {args.seed}; no loss, 50 us one-way delay, 10 us jitter, 100-byte agreed "
            f"messages, one message per vertex, datagram_budget {BUDGET} (jumbo) at every n, "
            "rule gltoto, phi = n/2",
            "light: node 0 sends alone, 1,000 msgs/s (W1's light load); all: every node "
            "sends, one message per "
            f"{ALL_INTERVAL * 1e6:g} us on average (acks ride on data)",
            "cpu: process time of the whole simulation (all n nodes, one process) divided "
            "by the ordered messages; 'per node' divides it by n; the layers come from "
            "wrappers around the codec, the engine and the Node's entry points (their own "
            "overhead lands in the layer they wrap); every receiver decodes its own copy",
            "x n/2: the figure at n over the figure at n/2 (per doubling); us/reception: "
            "cpu ms over the datagrams received (the cost of one reception, all layers)",
            "light-load heartbeats are partly the end of the run (idle members report "
            "stability until every message is stable): per message they are overstated "
            "where a run has few messages (n = 64 and 128)",
        ],
    }


def _ratio(value: float | None) -> str:
    return "" if value is None else f"x{value:.2f}"
