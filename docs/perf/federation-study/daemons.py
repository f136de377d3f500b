"""Cross-cluster latency on real daemons: two federated clusters of two ``amcastd`` each
on loopback (``LocalFederation``, as ``amcast cluster start --clusters 2 --nodes 2``).

One sender on daemon ``a0`` sends, one at a time, a local message (cluster ``a`` only,
agreed service), a local one with safe service (the service the federation's records
use) and a cross-cluster one (clusters ``a`` and ``b``), in turn; a listener on every
daemon notes when each message reaches it (a thread per listener, one monotonic clock).
The latency of a message is until its last addressee's listener has it: the two of
cluster ``a`` for a local message, all four for a cross-cluster one. Closed loop: the
next message leaves when the previous one arrived everywhere, so there is no queueing.

Run from the repository's root: ``.venv/bin/python docs/perf/federation-study/daemons.py
[COUNT] [OUT.json]`` (200 of each kind by default; the JSON goes to this folder's
``daemons-2x2.json`` unless named).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

from amcast.client import BlockingClient, ClientTimeout, DeliveredBatch
from amcast.localfederation import LocalFederation

HERE = Path(__file__).resolve().parent
GROUP = "g"
KINDS = ("local", "local, safe", "cross-cluster")


def _listen(client: BlockingClient, seen: dict[bytes, dict[str, float]], name: str,
            stop: threading.Event, lock: threading.Lock) -> None:
    while not stop.is_set():
        try:
            event = client.next_event(0.5)
        except ClientTimeout:
            continue
        if isinstance(event, DeliveredBatch):
            now = time.monotonic()
            with lock:
                for d in event:
                    seen.setdefault(d.payload, {})[name] = now


def _percentile(xs: list[float], q: float) -> float:
    ys = sorted(xs)
    return ys[min(len(ys) - 1, int(q * len(ys)))]


def measure(count: int) -> dict[str, object]:
    path = Path(tempfile.mkdtemp(prefix="amcfed-"))
    fed = LocalFederation(2, 2, path, protocol={"suspect_timeout": 5.0}, metrics=False)
    fed.start(timeout=60)
    stop, lock = threading.Event(), threading.Lock()
    seen: dict[bytes, dict[str, float]] = {}
    listeners, threads = [], []
    try:
        for name in fed.names:
            for i, sock in enumerate(fed.sockets(name)):
                client = BlockingClient(sock, name=f"listen-{name}{i}", timeout=20)
                client.join(GROUP)
                listeners.append(client)
                t = threading.Thread(target=_listen,
                                     args=(client, seen, f"{name}{i}", stop, lock))
                t.start()
                threads.append(t)
        sender = BlockingClient(fed.sockets("a")[0], name="sender", timeout=20)
        for warm in range(5):  # connections and views settled
            sender.send(f"warm-{warm}".encode(), GROUP, clusters=["a", "b"])
            sender.flush()
        time.sleep(2.0)
        lat: dict[str, list[float]] = {kind: [] for kind in KINDS}
        lost = 0
        for k in range(len(KINDS) * count):
            kind = KINDS[k % len(KINDS)]
            cross = kind == "cross-cluster"
            want = {"a0", "a1", "b0", "b1"} if cross else {"a0", "a1"}
            payload = f"{kind}-{k}".encode()
            t0 = time.monotonic()
            sender.send(payload, GROUP, "safe" if kind == "local, safe" else "agreed",
                        clusters=["a", "b"] if cross else None)
            sender.flush()
            deadline = t0 + 10.0
            while time.monotonic() < deadline:
                with lock:
                    got = seen.get(payload, {})
                    if want <= got.keys():
                        lat[kind].append(max(got[n] for n in want) - t0)
                        break
                sender.poll()
                time.sleep(0.0002)
            else:
                lost += 1
        sender.close(10)
    finally:
        stop.set()
        for t in threads:
            t.join(5)
        for client in listeners:
            client.abort()
        fed.stop(timeout=10)
        shutil.rmtree(path, ignore_errors=True)
    out: dict[str, object] = {
        "setup": "2 clusters x 2 amcastd on loopback, one sender on a0, closed loop",
        "cpus": os.cpu_count(), "loadavg_at_end": os.getloadavg(), "timeouts": lost}
    for kind, xs in lat.items():
        out[kind] = {"count": len(xs), "p50_ms": round(_percentile(xs, 0.5) * 1000, 2),
                     "p99_ms": round(_percentile(xs, 0.99) * 1000, 2),
                     "mean_ms": round(sum(xs) / len(xs) * 1000, 2)}
    return out


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    dest = Path(sys.argv[2]) if len(sys.argv) > 2 else HERE / "daemons-2x2.json"
    result = measure(count)
    dest.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
