"""The load (recording clients) and the health sampler.

The load is ``amcast.faultload``'s: one ``Recorder`` per running daemon, which sends a
paced stream of numbered messages and records every frame the daemon writes back
(deliveries, views, gaps, ``undelivered`` reports, the end of the connection). A daemon
that is restarted gets a fresh client (the old one saw its connection end: its messages
are owed at most once). Every other node's client sends ``safe`` rather than ``agreed``
messages, so both services run under the faults.

The sampler asks every serving daemon (and every impostor) for its ``status`` every
``interval`` seconds, each on a fresh connection (a paused or dying daemon costs one
bounded wait, never a wedged client), and keeps what the health check reads: the
health verdict, the view and whether it is primary, with the time the request was sent
(the daemon's answer describes a moment after it).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from amcast.client import Client
from amcast.client.errors import ClientError
from amcast.faultload import DELIVER, FaultRun, Recorder
from amcast.localcluster import LocalCluster


@dataclass(frozen=True)
class HealthSample:
    """One ``status`` reply: who answered (``node``; ``who`` names an impostor), when
    it was asked (``time.monotonic()``), its health and its view."""

    at: float
    node: int
    who: str
    ok: bool
    primary: bool
    view: int | None
    members: tuple[int, ...]
    problem: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class Load:
    """Recording clients of every daemon, reconnected after restarts."""

    def __init__(self, cluster: LocalCluster, rate: float) -> None:
        self.run = FaultRun(cluster, rate=rate)
        self.connect_errors: list[str] = []
        # FaultRun numbers a client (its messages' tag) by how many it connected before:
        # concurrent connects (a whole cluster restarted at once) would share a tag
        self._connecting = asyncio.Lock()
        self.joined_at: dict[int, float] = {}
        """Per client (tag): when its join was answered (``time.monotonic()``)."""

    async def connect(self, node: int) -> Recorder | None:
        """A fresh client of ``node`` (sending once the load runs); ``None`` when the
        daemon does not take it (recorded: a daemon that serves must take a client)."""
        try:
            async with self._connecting:
                rec = await self.run.connect(node, timeout=10.0)
                self.joined_at[rec.tag] = time.monotonic()
        except (OSError, TimeoutError, ConnectionError) as exc:
            self.connect_errors.append(f"node {node}: client could not connect: {exc!r}")
            return None
        if node % 2 == 1:
            await rec.stop_load()
            if self.run.loading:
                rec.start_load(self.run.rate, service="safe")
        return rec

    def settled(self) -> bool:
        """Every connected client in one primary view, every message owed (sent by a
        connected client, not reported back) delivered to that client, and the clients
        that delivered in that view at the same last position.

        ``FaultRun.settle`` asks for the same number of deliveries in the view at every
        client; a client whose join was answered mid-view (it connected while its daemon
        was outside a primary view, or just before the view's first deliveries) rightly
        has fewer, so that would wait forever: the last position is what must agree."""
        live = self.run.live()
        views = [r.current_view() for r in live]
        if not live or any(v is None or not v[1] for v in views):
            return False
        if len({v[0] for v in views if v is not None}) != 1:
            return False
        final = views[0][0] if views[0] is not None else None
        last: set[int] = set()
        for r in live:
            positions = [e[3] for e in r.timeline if e[0] == DELIVER and e[2] == final]
            if positions:
                last.add(max(p for p in positions if p is not None))
        if len(last) > 1:
            return False
        # each client's own messages reached that client (its daemon delivers them all
        # or reports them): another client having one is not enough, the sender's may
        # still be behind (a client that delivered nothing in the view yet passes the
        # position check above); one reported delivered while its daemon was away is
        # not owed to it
        for r in live:
            own = r.delivered_keys()
            if any((r.tag, k) not in own for k in range(r.next_number)
                   if k not in r.reported and k not in r.delivered_away):
                return False
        return True

    async def settle(self, timeout: float) -> None:
        """Until ``settled`` (``TimeoutError`` naming what is missing per client)."""
        try:
            await self.run.until(self.settled, timeout,
                                 "settling (one view, everything delivered)")
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}; {self.run.unsettled()}") from None

    def start(self) -> None:
        self.run.loading = True
        for r in self.run.live():
            r.start_load(self.run.rate, service="safe" if r.node % 2 else "agreed")

    async def stop(self, timeout: float) -> None:
        await self.run.stop_load(timeout)

    async def close(self) -> None:
        await self.run.close()


@dataclass
class HealthSampler:
    """Samples ``status`` of ``targets()`` (who -> (node, socket)) every ``interval``."""

    targets: Callable[[], dict[str, tuple[int, str]]]
    interval: float = 0.5
    timeout: float = 2.0
    samples: list[HealthSample] = field(default_factory=list)
    unanswered: int = 0
    _task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _loop(self) -> None:
        while True:
            await self.sample_once()
            await asyncio.sleep(self.interval)

    async def sample_once(self) -> list[HealthSample]:
        got = await asyncio.gather(*(self._one(who, node, path)
                                     for who, (node, path) in self.targets().items()))
        out = [s for s in got if s is not None]
        self.samples += out
        return out

    async def _one(self, who: str, node: int, path: str) -> HealthSample | None:
        at = time.monotonic()
        try:
            client = await Client.connect(path, name="nemesis-health", timeout=self.timeout)
        except (ClientError, OSError, TimeoutError):
            self.unanswered += 1
            return None
        try:
            st = await client.status(timeout=self.timeout)
        except (ClientError, OSError, TimeoutError):
            self.unanswered += 1
            return None
        finally:
            client.abort()
        view = st.get("view") or {}
        health = st.get("health") or {}
        problems = health.get("problems") or [""]
        return HealthSample(at, node, who, bool(health.get("ok")), bool(view.get("primary")),
                            view.get("id"), tuple(view.get("members") or ()),
                            str(problems[0])[:200])
