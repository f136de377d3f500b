"""``amcast bench node``: the reliable causal layer and the full Node, in figures.

Everything runs in the deterministic cluster simulator (``amcast.protocols.simulation``), so
the message counts are exact and reproducible per seed; only the throughput figure uses
the wall clock (one process, compare ratios within one run on a shared machine).

Figures (issue 3, item 10):

- control datagrams (ack-only, nack, repair, heartbeat) per data datagram, at saturation
  with every node sending and at light load;
- header bytes per application message (datagram bytes minus payload bytes) at n = 8 and
  n = 64, one message per vertex, with one sender and with every node sending;
- repair latency at 5% loss: causal-service delivery latency at receivers that lost the
  first copy, next to the latency at those that did not;
- nacks and retransmissions per lost copy (suppression at work);
- Node throughput: messages per second through the full stack, n = 4 simulated nodes;
- an idle member's heartbeat: microseconds per repeated heartbeat at the receiver (the
  renewal-only path, ``heartbeats``) against one that must be applied in full.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from amcast.protocols.node_config import NodeConfig
from amcast.protocols.simulation.cluster import Cluster, RunResult, Workload
from amcast.protocols.simulation.network import LinkFaults, NetworkConfig
from amcast.protocols.vocabulary import ServiceLevel

from amcast.argtypes import whole

from .heartbeats import heartbeat_costs

NAME = "node"
HELP = "control overhead, header size, repair latency and throughput of the full Node"
KEY = b"benchmark-group-key!"
AGREED_ONLY = ((ServiceLevel.AGREED, 1.0),)
CAUSAL_ONLY = ((ServiceLevel.CAUSAL, 1.0),)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--messages", type=whole(1), default=400,
                        help="messages per sender in the saturation and throughput runs")
    parser.add_argument("--quick", action="store_true", help="smaller runs (CI smoke test)")


def _progress(line: str) -> None:
    print(f"[bench node] {line}", file=sys.stderr, flush=True)


def _sent(result: RunResult) -> dict[str, int]:
    total: dict[str, int] = {}
    for nd in result.nodes.values():
        for kind, count in nd.stats.datagrams_sent.items():
            total[kind] = total.get(kind, 0) + count
    return total


def _control_ratio(result: RunResult) -> tuple[float, dict[str, int]]:
    sent = _sent(result)
    control = sent["ack_only"] + sent["nack"] + sent["repair"] + sent["heartbeat"]
    return control / max(1, sent["data"]), sent


def _run(n: int, workload: Workload, *, seed: int, loss: float = 0.0,
         cfg: NodeConfig | None = None, track: bool = False) -> tuple[RunResult, float]:
    net = NetworkConfig(default=LinkFaults(loss=loss))
    cluster = Cluster(n, seed=seed, node_config=cfg or NodeConfig(group_key=KEY), network=net)
    cluster.track_losses = track
    start = time.perf_counter()
    result = cluster.run(workload, max_time=600.0)
    elapsed = time.perf_counter() - start
    if not result.ok:
        raise RuntimeError(f"safety violated in benchmark run: {result.violations}")
    return result, elapsed


def _header_bytes(n: int, senders: int, seed: int, per_sender: int) -> float:
    workload = Workload(messages_per_node=per_sender, senders=senders, interval=0.05,
                        services=AGREED_ONLY, min_size=100, max_size=100, large_fraction=0.0)
    result, _ = _run(n, workload, seed=seed)
    data_bytes = 0
    payload_bytes = sum(len(m.payload) for m in result.sent)
    messages = len(result.sent)
    for nd in result.nodes.values():
        data_bytes += nd.stats.data_bytes_sent
    return (data_bytes - payload_bytes) / messages


def run(args: argparse.Namespace) -> dict[str, Any]:
    seed = args.seed
    per = 60 if args.quick else args.messages
    rows_control = []
    figures: dict[str, Any] = {}

    sat = Workload(messages_per_node=per, interval=0.0, services=AGREED_ONLY,
                   min_size=100, max_size=100, large_fraction=0.0)
    light = Workload(messages_per_node=max(10, per // 10), interval=0.05, services=AGREED_ONLY,
                     min_size=100, max_size=100, large_fraction=0.0)
    for label, workload in (("saturation, all send", sat), ("light load, all send", light)):
        for n in (4, 8):
            _progress(f"control overhead: {label}, n={n}")
            result, _ = _run(n, workload, seed=seed)
            ratio, sent = _control_ratio(result)
            rows_control.append([label, n, sent["data"], sent["ack_only"], sent["nack"],
                                 sent["repair"], sent["heartbeat"], ratio,
                                 len(result.sent) / max(1, sent["data"])])
            figures[f"control/data, {label}, n={n}"] = ratio

    header_rows = []
    for n in (8, 64):
        for senders in (1, n):
            _progress(f"header bytes: n={n}, {senders} sender(s)")
            per_sender = max(2, (8 if args.quick else 40) * 8 // (senders * 2))
            hb = _header_bytes(n, senders, seed, per_sender)
            header_rows.append([n, senders, hb])
            figures[f"header bytes/message, n={n}, senders={senders}"] = hb

    repair_workload = Workload(messages_per_node=20 if args.quick else 100, interval=0.01,
                               services=CAUSAL_ONLY, min_size=100, max_size=100,
                               large_fraction=0.0)

    def pct(xs: list[float], q: float) -> float:
        return xs[min(len(xs) - 1, int(q * len(xs)))] * 1000 if xs else float("nan")

    repair_rows = []
    for ack_delay in (NodeConfig(group_key=KEY).ack_delay, 0.005):
        _progress(f"repair latency: n=8, 5% loss, ack_delay {ack_delay * 1000:g} ms")
        cfg = NodeConfig(group_key=KEY, ack_delay=ack_delay)
        result, _ = _run(8, repair_workload, seed=seed, loss=0.05, track=True, cfg=cfg)
        repaired = sorted(result.repair_latencies)
        clean = sorted(result.clean_latencies)
        ratio, sent = _control_ratio(result)
        lost = result.network.stats.lost
        tag = f"ack_delay {ack_delay * 1000:g} ms"
        repair_rows.append([ack_delay * 1000, len(repaired), pct(repaired, 0.5),
                            pct(repaired, 0.95), pct(clean, 0.5),
                            sent["nack"] / max(1, lost), sent["repair"] / max(1, lost), ratio])
        figures[f"repair latency p50 ms (5% loss, n=8, {tag})"] = pct(repaired, 0.5)
        figures[f"repair latency p95 ms (5% loss, n=8, {tag})"] = pct(repaired, 0.95)
        figures[f"nack datagrams per lost copy ({tag})"] = sent["nack"] / max(1, lost)
        figures[f"retransmissions per lost copy ({tag})"] = sent["repair"] / max(1, lost)

    tp = Workload(messages_per_node=per * 4, interval=0.0, services=AGREED_ONLY,
                  min_size=100, max_size=100, large_fraction=0.0)
    _progress("throughput: n=4, full stack")
    result, elapsed = _run(4, tp, seed=seed)
    messages = len(result.sent)
    figures["throughput msgs/s (n=4, full stack, one process)"] = messages / elapsed
    figures["throughput deliveries/s (each message at 4 nodes)"] = 4 * messages / elapsed
    tp1 = Workload(messages_per_node=per * 4, interval=0.0005, services=AGREED_ONLY,
                   min_size=100, max_size=100, large_fraction=0.0)
    result, elapsed = _run(4, tp1, seed=seed)
    figures["throughput msgs/s, unbatched (one message per vertex)"] = len(result.sent) / elapsed
    _progress("idle heartbeats: n=3, one receiver")
    figures.update(heartbeat_costs(1000 if args.quick else 5000))

    return {
        "title": "amcast bench node: reliable causal multicast + ToTo (S-ToTo) Node, simulated",
        "tables": [
            {
                "title": "control datagrams per data datagram (no loss, 100-byte messages)",
                "columns": ["load", "n", "data", "ack-only", "nack", "repair", "heartbeat",
                            "control/data", "msgs/vertex"],
                "rows": rows_control,
            },
            {
                "title": "header bytes per message (one 100-byte message per vertex, tag incl.)",
                "columns": ["n", "senders", "header bytes/message"],
                "rows": header_rows,
            },
            {
                "title": "5% loss, n=8, causal service, 100 msgs/s per node: delivery latency "
                         "at receivers that lost the first copy (repaired) and that did not",
                "columns": ["ack_delay ms", "repaired", "repaired p50 ms", "repaired p95 ms",
                            "not lost p50 ms", "nacks/lost copy", "repairs/lost copy",
                            "control/data"],
                "rows": repair_rows,
            },
        ],
        "figures": figures,
        "notes": [
            f"seed {seed}; virtual-time simulation, 0.5 ms one-way delay",
            "'not lost' receivers may still wait for a lost vertex in the causal past; "
            "a short ack_delay puts more ack-only vertices there",
            "throughput is wall-clock on this machine: compare ratios within one run",
        ],
    }
