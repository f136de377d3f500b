"""The cost of encoding a sent datagram's body, native vs Python.

A simulated cluster of real Nodes on the native core, one sender at light load (as
``bench.reliable_cost``), records every datagram its nodes send; each is then encoded
again by ``wire.native.encode_plain`` (the Python encoder) and by the native
``Encoder``, which must write the same bytes. Printed as JSON: the datagrams sent, the
received datagrams per sent one, and the best of ``--repeat`` passes over them of each
encoder in µs per datagram.

    python -m bench.encode_cost --nodes 4,8 --messages 300 --repeat 5
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from amcast.protocols import node as node_module
from amcast.protocols.simulation.cluster import Cluster, Workload
from amcast.protocols.wire.native import encode_plain, make_encoder


def run_point(n: int, *, messages: int, seed: int, repeat: int) -> dict[str, Any]:
    sent: list[Any] = []
    make = node_module.make_encoder

    def recording(core: str | None = None) -> Any:
        encode = make(core)

        def recorded(dg: Any) -> bytes:
            sent.append(dg)
            out: bytes = encode(dg)
            return out

        return recorded

    node_module.make_encoder = recording  # type: ignore[assignment]
    try:
        result = Cluster(n, seed=seed, cores=("native",)).run(
            Workload(messages_per_node=messages, senders=1, interval=0.01),
            max_time=60.0 + messages * 0.05)
    finally:
        node_module.make_encoder = make
    assert result.ok, result.violations
    received = sum(sum(node.stats.datagrams_received.values())
                   for node in result.nodes.values())
    native = make_encoder("native")
    assert all(native(dg) == encode_plain(dg) for dg in sent)
    best = {"python": float("inf"), "native": float("inf")}
    for _ in range(max(1, repeat)):
        for name, encode in (("python", encode_plain), ("native", native)):
            start = time.perf_counter()
            for dg in sent:
                encode(dg)
            best[name] = min(best[name], (time.perf_counter() - start) / len(sent) * 1e6)
    return {"nodes": n, "sent": len(sent), "received_per_sent": round(received / len(sent), 2),
            "python_us_per_datagram": round(best["python"], 2),
            "native_us_per_datagram": round(best["native"], 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="4,8")
    parser.add_argument("--messages", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(json.dumps([run_point(int(n), messages=args.messages, seed=args.seed,
                                repeat=args.repeat) for n in args.nodes.split(",")], indent=1))


if __name__ == "__main__":
    main()
