"""A replicated key-value store on amcast: every replica applies the same writes in the
same total order, so every replica holds the same contents.

Run one replica per node of a cluster (``amcast cluster start -n 3 --dir var/cluster``)::

    python examples/kvstore.py -s var/cluster/node0.sock --name r0 --replicas 3
    python examples/kvstore.py -s var/cluster/node1.sock --name r1 --replicas 3
    python examples/kvstore.py -s var/cluster/node2.sock --name r2 --replicas 3

What it shows:

- the start-up barrier: each replica joins the group ``kv`` watching its members and
  waits (``wait_for_members``) until ``--replicas`` replicas are in it before it writes,
  so no replica misses a write made before its own join took effect;
- state transfer (``amcast.client.state``): a replica that joins a group that already
  has members (a late start, or a restart after its process was killed) asks for the
  state, gets a snapshot taken at the place of its request in the total order, and
  applies what comes after; one whose daemon missed part of the order (``OrderGap``)
  does the same;
- not losing a write: a replica keeps what it sent (by message number) and sends again
  the writes its daemon reports ``Undelivered`` (its daemon was cut off from the view
  they were sent in) unless the others delivered them (outcome ``delivered``: they are
  in the state the replica gets by transfer);
- writes from every replica: ``--writes`` ``set`` commands (keys of its own and keys
  shared by all), then a ``done`` marker. When a replica has applied the ``done`` of
  every one of the ``--replicas`` names, it has applied the same writes as every other
  replica at that same place of the total order: it prints its contents as one JSON
  line (and writes them to ``--out``) and exits.

The state is the table, the set of replicas done, and a hash chained over every write
applied (so equal hashes mean the same writes in the same order).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

from amcast.client import Client, Delivery, Undelivered
from amcast.client.state import StateTransfer

GROUP = "kv"


class Store:
    """The replicated state: a table of strings, who is done, a hash of the history."""

    def __init__(self) -> None:
        self.data: dict[str, str] = {}
        self.done: set[str] = set()
        self.chain = hashlib.sha256().hexdigest()
        self.applied = 0

    def apply(self, d: Delivery) -> None:
        """Apply one command: ``set KEY VALUE`` or ``done NAME``."""
        self.chain = hashlib.sha256(self.chain.encode() + d.payload).hexdigest()
        self.applied += 1
        verb, _, rest = d.payload.decode().partition(" ")
        if verb == "set":
            key, _, value = rest.partition(" ")
            self.data[key] = value
        elif verb == "done":
            self.done.add(rest)

    def snapshot(self) -> bytes:
        return json.dumps({"data": self.data, "done": sorted(self.done),
                           "chain": self.chain}).encode()

    def restore(self, blob: bytes) -> None:
        state = json.loads(blob)
        self.data = dict(state["data"])
        self.done = set(state["done"])
        self.chain = str(state["chain"])

    def contents(self) -> dict[str, Any]:
        return {"data": dict(sorted(self.data.items())), "done": sorted(self.done),
                "chain": self.chain}


def say(*words: object) -> None:
    print(*words, flush=True)


async def write(client: Client, st: StateTransfer, name: str, writes: int,
                interval: float, sent: dict[int, bytes]) -> None:
    async def send(command: str) -> None:
        payload = st.wrap(command.encode())
        sent[await client.send_wait(payload, GROUP)] = payload

    for i in range(writes):
        await send(f"set {name}/{i % 20} {i}")
        await send(f"set shared/{i % 10} {name}:{i}")
        if interval:
            await asyncio.sleep(interval)
    await send(f"done {name}")
    await client.sync()
    say("wrote", writes)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    store = Store()
    st = StateTransfer(GROUP, store.snapshot, store.restore, store.apply,
                       retry_after=args.retry_after)
    deadline = time.monotonic() + args.deadline
    async with await Client.connect(args.socket, name=args.name) as client:
        await client.join(GROUP, members=True)
        await client.wait_for_members(GROUP, args.replicas, timeout=args.deadline)
        say("barrier", args.replicas)
        sent: dict[int, bytes] = {}
        writer = asyncio.create_task(write(client, st, args.name, args.writes, args.interval,
                                           sent))
        ready = False
        reported = 0
        try:
            while len(store.done) < args.replicas:
                event = await st.next_async(client,
                                            timeout=max(0.0, deadline - time.monotonic()))
                if isinstance(event, Undelivered) and event.outcome != "delivered":
                    say("resending", event.count)
                    for m in event.messages:
                        sent[await client.send_wait(sent[m], GROUP)] = sent[m]
                if st.ready and not ready:
                    ready = True
                    say("ready", "restored" if st.stats.restored else "founded")
                if store.applied >= reported + 50:
                    reported = store.applied - store.applied % 50
                    say("applied", store.applied)
            await writer
        finally:
            writer.cancel()
    out = {"name": args.name, **store.contents(),
           "stats": {"restored": st.stats.restored, "discarded": st.stats.discarded,
                     "replayed": st.stats.replayed, "requests": st.stats.requests,
                     "snapshots_sent": st.stats.snapshots_sent, "gaps": st.stats.gaps}}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-s", "--socket", required=True, help="the local amcastd's socket")
    ap.add_argument("--name", required=True, help="this replica's name (unique)")
    ap.add_argument("--replicas", type=int, default=3, help="replicas to wait for")
    ap.add_argument("--writes", type=int, default=200, help="writes of this replica")
    ap.add_argument("--interval", type=float, default=0.005, help="seconds between writes")
    ap.add_argument("--retry-after", type=float, default=2.0,
                    help="ask for the state again after this long without it")
    ap.add_argument("--deadline", type=float, default=60.0, help="give up after this long")
    ap.add_argument("--out", type=Path, help="also write the final contents here (JSON)")
    args = ap.parse_args(argv)
    out = asyncio.run(run(args))
    line = json.dumps(out, sort_keys=True)
    if args.out is not None:
        args.out.write_text(line + "\n")
    say(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
