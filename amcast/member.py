"""The embedded member: an application process that is a member of the group itself.

By default an application reaches the group through its host's ``amcastd``: a separate
process, two unix-socket hops per message. ``Member`` runs the same daemon (the
``amcast.daemon.runner.Daemon``: the Node, the peer sockets, the API server, logs,
metrics) on the application's own event loop, and the application's ``Client``
talks to it over an in-memory stream (``amcast.daemon.inprocess``) instead of a socket.
To the other members it is a daemon like any other, with the same configuration file,
the same wire, views and guarantees; daemons and embedded members mix in one group.

    async with await Member.start("/etc/amcast/amcastd.toml", name="app") as member:
        await member.client.join("orders")
        member.client.send(b"...", "orders")
        async for event in member.client.events(): ...

What changes against a daemon: the member lives and dies with the application (a crash
of the application is the member's crash: the group installs a view without it, and
the messages it had not sent are reported to nobody but the application, which is
gone); the application's event loop runs the protocol, so a loop blocked by the
application delays the member's heartbeats (the group may exclude it); signals and
systemd's notify socket stay the application's. The API socket of the configuration is
still served, so ``amcast status -s`` and other local clients reach it too. The member
logs through structlog: as the application configured it, or, where it did not, to
stderr as ``amcastd`` does (``logs.level``, ``logs.format``), never to the
application's stdout.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import TracebackType
from typing import Any

import structlog

from .client import Client
from .daemon.config import DaemonConfig, load_config
from .daemon.logs import configure_logging
from .daemon.runner import Daemon
from .protocols.errors import AmcastError


class MemberStartError(AmcastError):
    """The embedded member did not start (its reason: a configuration or socket error,
    or the daemon's own exception as the cause)."""


class Member:
    """A member of the group inside this process: ``await Member.start(config)``."""

    def __init__(self, daemon: Daemon, task: asyncio.Task[int]) -> None:
        self.daemon = daemon
        self._task = task
        self.client: Client
        """The application's connection (the client library's ``Client``)."""
        self._clients: list[Client] = []

    @classmethod
    async def start(cls, config: DaemonConfig | str | Path, *, name: str = "",
                    timeout: float = 30.0, **client_options: Any) -> Member:
        """Start the member on the running loop and connect ``client`` to it.

        ``config``: a ``DaemonConfig`` or the path of an ``amcastd`` configuration file
        (``AMCAST_<SECTION>__<KEY>`` variables apply as for the daemon). The member is
        serving when this returns (it joins the group on its own, as a daemon does:
        ``client.wait_members`` waits for the others). ``client_options`` go to
        ``Client.attach`` (``max_unconfirmed_bytes``, ``self_discard``, ...).
        ``MemberStartError`` if it cannot start within ``timeout`` seconds."""
        cfg = config if isinstance(config, DaemonConfig) else load_config(config)
        if not structlog.is_configured():  # the application's own setup wins
            configure_logging(cfg.logs.level, cfg.logs.format)
        daemon = Daemon(cfg, embedded=True)
        task = asyncio.get_running_loop().create_task(daemon.run(), name="amcast-member")
        ready = asyncio.ensure_future(daemon.ready.wait())
        done, _ = await asyncio.wait({task, ready}, timeout=timeout,
                                     return_when=asyncio.FIRST_COMPLETED)
        if ready not in done:
            ready.cancel()
            if task in done:
                exc = task.exception()
                raise MemberStartError(f"the embedded member did not start: {exc}") from exc
            daemon.request_stop("start timed out")
            await asyncio.wait({task}, timeout=timeout)
            raise MemberStartError(f"the embedded member did not start within {timeout} s")
        self = cls(daemon, task)
        try:
            self.client = await self.connect(name=name, **client_options)
        except BaseException:
            await self.stop()
            raise
        return self

    async def connect(self, *, name: str = "", **client_options: Any) -> Client:
        """Another in-process connection to this member (as ``Client.connect`` gives
        another socket connection to a daemon)."""
        client = await Client.attach(self.daemon.api.connect_in_process, name=name,
                                     **client_options)
        self._clients.append(client)
        return client

    @property
    def node_id(self) -> int:
        return self.daemon.node_id

    @property
    def running(self) -> bool:
        return not self._task.done()

    async def stop(self, timeout: float = 20.0) -> int:
        """Leave the group and stop, as ``amcastd`` does on SIGTERM (the clients are told,
        the logs flushed); returns the daemon's exit status."""
        self.daemon.request_stop("the application stopped its member")
        try:
            return await asyncio.wait_for(asyncio.shield(self._task), timeout)
        finally:
            for client in self._clients:
                client.abort()

    async def __aenter__(self) -> Member:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        if self.running:
            await self.stop()
