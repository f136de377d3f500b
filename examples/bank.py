"""A sharded bank on federated amcast clusters: accounts spread over the clusters,
transfers inside and across shards, replicas that agree and money that is never made or
lost.

Start a federation (``amcast cluster start --clusters 3 --nodes 3 --dir var/fed``) and
run one replica per daemon, in one process or several::

    python examples/bank.py --replica a0=var/fed/a/node0.sock --replica a1=... \\
        --replicas 9 --transfers 100

What it shows:

- sharding by cluster: account ``b7`` lives in cluster ``b``; every replica of a cluster
  holds the balances of that cluster's accounts (``--accounts`` each, starting at
  ``--balance``), nothing of the others;
- one order across shards: a transfer goes to the clusters of its two accounts and to
  the sender's own (``send(..., clusters=...)``); every replica of every one of them
  delivers it in the same order relative to every other transfer they share, so the
  debit in one shard and the credit in the other are the same transfer at the same place
  of both histories, and no shard ever needs the other's balances (overdrafts are
  allowed: every transfer is applied, so the sum is conserved exactly);
- causality the sender can rely on: a sender's own cluster is in every transfer it
  sends, so once its own replica has delivered them, a later message (its ``done``
  marker, to every cluster) comes after them in every cluster (Skeen's timestamps: the
  own cluster's clock has passed theirs);
- the start: each replica joins the group, says ``ready`` to every cluster and sends
  transfers only once every replica said it (each joined before saying so, so it gets
  every transfer that follows).

When a replica has delivered the ``done`` of every replica it prints its shard (the
balances and a hash chained over every transfer its cluster delivered, so the replicas
of one cluster must print the same) as one JSON line. ``--check`` (with every replica in
the process) also checks that the replicas of each cluster agree and that the total over
the shards is the total at the start.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from amcast.client import Client, DeliveredBatch

GROUP = "bank"


@dataclass
class Shard:
    """One cluster's accounts, as one replica holds them."""

    cluster: str
    balances: dict[str, int]
    chain: str = hashlib.sha256().hexdigest()
    transfers: int = 0
    """Transfers that touched this shard (a debit, a credit or both)."""
    ready: set[str] = field(default_factory=set)
    done: set[str] = field(default_factory=set)

    def apply(self, message: dict[str, Any], raw: bytes) -> None:
        kind = message["t"]
        if kind == "ready":
            self.ready.add(message["name"])
        elif kind == "done":
            self.done.add(message["name"])
        elif kind == "xfer":
            self.chain = hashlib.sha256(self.chain.encode() + raw).hexdigest()
            src, dst, amount = message["from"], message["to"], int(message["amount"])
            touched = False
            if src in self.balances:
                self.balances[src] -= amount
                touched = True
            if dst in self.balances:
                self.balances[dst] += amount
                touched = True
            self.transfers += touched

    def summary(self, name: str) -> dict[str, Any]:
        return {"name": name, "cluster": self.cluster, "chain": self.chain,
                "transfers": self.transfers, "total": sum(self.balances.values()),
                "balances": dict(sorted(self.balances.items()))}


def accounts(cluster: str, count: int) -> list[str]:
    return [f"{cluster}{i}" for i in range(count)]


def shard_of(account: str) -> str:
    return account.rstrip("0123456789")


class Replica:
    """One replica: a client of one daemon, its shard, its transfers."""

    def __init__(self, name: str, socket: str, args: argparse.Namespace) -> None:
        self.name = name
        self.socket = socket
        self.args = args
        self.client: Client | None = None
        self.shard: Shard | None = None
        self.own_sent: set[str] = set()
        self.own_delivered: set[str] = set()
        self.progress = asyncio.Event()

    async def start(self) -> None:
        self.client = await Client.connect(self.socket, name=f"bank-{self.name}")
        cluster = self.client.cluster
        if not cluster:
            raise SystemExit(f"{self.socket}: this daemon runs no [federation]")
        self.shard = Shard(cluster, dict.fromkeys(accounts(cluster, self.args.accounts),
                                                  self.args.balance))
        await self.client.join(GROUP)

    def send(self, message: dict[str, Any], clusters: list[str]) -> None:
        assert self.client is not None
        self.client.send(json.dumps(message, sort_keys=True).encode(), GROUP, "safe",
                         clusters=clusters)

    async def receive(self) -> None:
        """Apply every delivery; return once every replica's ``done`` was delivered."""
        assert self.client is not None and self.shard is not None
        shard = self.shard
        while len(shard.done) < self.args.replicas:
            batch = await self.client.next_event()
            if not isinstance(batch, DeliveredBatch):
                continue
            for d in batch:
                message = json.loads(d.payload)
                shard.apply(message, d.payload)
                if message["t"] == "xfer" and message["id"] in self.own_sent:
                    self.own_delivered.add(message["id"])
            self.progress.set()

    async def wait(self, condition: Any) -> None:
        while not condition():
            self.progress.clear()
            await self.progress.wait()

    async def run(self) -> dict[str, Any]:
        assert self.client is not None and self.shard is not None
        receiver = asyncio.create_task(self.receive())
        everywhere = list(self.client.clusters)
        own = self.shard.cluster
        rng = random.Random(f"{self.args.seed}/{self.name}")
        every = [a for c in everywhere for a in accounts(c, self.args.accounts)]
        try:
            self.send({"t": "ready", "name": self.name}, everywhere)
            await self.wait(lambda: len(self.shard.ready) >= self.args.replicas)
            for k in range(self.args.transfers):
                src = rng.choice(every)
                if rng.random() < self.args.local_share:  # inside one shard
                    dst = rng.choice(accounts(shard_of(src), self.args.accounts))
                else:
                    dst = rng.choice(every)
                tid = f"{self.name}-{k}"
                self.own_sent.add(tid)
                self.send({"t": "xfer", "id": tid, "from": src, "to": dst,
                           "amount": rng.randrange(1, 50)},
                          sorted({shard_of(src), shard_of(dst), own}))
                if self.args.interval:
                    await asyncio.sleep(self.args.interval)
            await self.client.sync()
            await self.wait(lambda: self.own_delivered >= self.own_sent)
            self.send({"t": "done", "name": self.name}, everywhere)
            await receiver
        finally:
            receiver.cancel()
            await self.client.close()
        return self.shard.summary(self.name)


def check(results: list[dict[str, Any]], clusters: int, accounts_each: int,
          balance: int) -> list[str]:
    """What is wrong with the replicas' final shards (nothing: an empty list)."""
    problems = []
    by_cluster: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        by_cluster.setdefault(r["cluster"], []).append(r)
    for cluster, rs in sorted(by_cluster.items()):
        shown = {(r["chain"], json.dumps(r["balances"])) for r in rs}
        if len(shown) != 1:
            problems.append(f"the replicas of cluster {cluster} disagree")
    if len(by_cluster) != clusters:
        problems.append(f"replicas of {len(by_cluster)} clusters, not {clusters}")
    total = sum(rs[0]["total"] for rs in by_cluster.values())
    if total != clusters * accounts_each * balance:
        problems.append(f"the total is {total}, not {clusters * accounts_each * balance}")
    return problems


async def main_async(args: argparse.Namespace) -> list[dict[str, Any]]:
    replicas = []
    for spec in args.replica:
        name, _, sock = spec.partition("=")
        replicas.append(Replica(name, sock, args))
    await asyncio.gather(*(r.start() for r in replicas))
    return list(await asyncio.wait_for(asyncio.gather(*(r.run() for r in replicas)),
                                       args.deadline))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replica", action="append", required=True, metavar="NAME=SOCKET",
                    help="a replica of this process: its name and its daemon's socket")
    ap.add_argument("--replicas", type=int, required=True,
                    help="replicas in all (every process), to wait for")
    ap.add_argument("--accounts", type=int, default=10, help="accounts per cluster")
    ap.add_argument("--balance", type=int, default=1000, help="each account's start")
    ap.add_argument("--transfers", type=int, default=100, help="transfers per replica")
    ap.add_argument("--local-share", type=float, default=0.3,
                    help="share of transfers inside one shard")
    ap.add_argument("--interval", type=float, default=0.0, help="seconds between transfers")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--deadline", type=float, default=120.0, help="give up after this long")
    ap.add_argument("--check", action="store_true",
                    help="every replica is in this process: check agreement and the total")
    args = ap.parse_args(argv)
    started = time.monotonic()
    results = asyncio.run(main_async(args))
    for r in results:
        print(json.dumps(r, sort_keys=True), flush=True)
    if args.check:
        clusters = len({r["cluster"] for r in results})
        problems = check(results, clusters, args.accounts, args.balance)
        print(json.dumps({"ok": not problems, "problems": problems,
                          "transfers": args.transfers * len(results),
                          "seconds": round(time.monotonic() - started, 2)}), flush=True)
        return 1 if problems else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
