"""The reliable causal layer's cost per datagram received, native vs pure.

A simulated cluster of real Nodes on the native core (``Cluster(cores=("native",))``),
one sender at light load, is run three times for the same seed: with the Python
reliable layer, and with ``AMCAST_RELIABLE=native`` releasing through the session's
per-vertex loop (``session.FUSED_RELEASE = False``: a call into the layer and one into
the engine per vertex) and through the fused native calls (the default). Timed:
``ViewSession.receive`` (the layer, the engine, the holdback and the deliveries a
received datagram makes), per datagram received, and the whole run's wall time per
datagram received. The runs must deliver the same (the layer is a drop-in); the
figures are printed as JSON.

    python -m bench.reliable_cost --nodes 4,8 --messages 300 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

from amcast.protocols import session as session_module
from amcast.protocols.simulation.cluster import Cluster, Workload


def run_point(n: int, reliable: str, *, messages: int, seed: int,
              fused: bool = True) -> dict[str, Any]:
    os.environ["AMCAST_RELIABLE"] = reliable
    session_module.FUSED_RELEASE = fused
    spent = [0.0, 0]
    original = session_module.ViewSession.receive

    def timed(self: Any, dg: Any, now: float) -> bool:
        start = time.perf_counter()
        out: bool = original(self, dg, now)
        spent[0] += time.perf_counter() - start
        spent[1] += 1
        return out

    cluster = Cluster(n, seed=seed, cores=("native",))
    session_module.ViewSession.receive = timed  # type: ignore[method-assign]
    try:
        start = time.perf_counter()
        result = cluster.run(Workload(messages_per_node=messages, senders=1, interval=0.01),
                             max_time=60.0 + messages * 0.05)
        wall = time.perf_counter() - start
    finally:
        session_module.ViewSession.receive = original  # type: ignore[method-assign]
        session_module.FUSED_RELEASE = True
    assert result.ok, result.violations
    layers = {n.core["reliable"] for n in result.nodes.values()}
    return {"nodes": n, "reliable": reliable,
            "release": "fused" if fused and reliable == "native" else "loop",
            "layers": sorted(layers),
            "datagrams": spent[1],
            "session_us_per_datagram": round(spent[0] / max(1, spent[1]) * 1e6, 2),
            "run_us_per_datagram": round(wall / max(1, spent[1]) * 1e6, 2),
            "delivered": sum(len(log) for log in result.logs.values())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="4,8")
    parser.add_argument("--messages", type=int, default=400)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=1,
                        help="runs of each point: the fastest's figures (the same run each time)")
    args = parser.parse_args()
    points = []
    for n in (int(x) for x in args.nodes.split(",")):
        runs = [min((run_point(n, r, messages=args.messages, seed=args.seed, fused=f)
                     for _ in range(max(1, args.repeat))),
                    key=lambda p: p["run_us_per_datagram"])
                for r, f in (("pure", False), ("native", False), ("native", True))]
        assert len({r["delivered"] for r in runs}) == 1
        points.extend(runs)
    print(json.dumps(points, indent=1))


if __name__ == "__main__":
    main()
