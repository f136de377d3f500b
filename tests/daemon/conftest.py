"""In-process daemons (real sockets on loopback multicast) for API tests.

Each daemon runs the real ``Node`` unless a test hands ``node_factory`` (a fake engine,
tests/daemon/fakes.py).
"""

from __future__ import annotations

import asyncio
import random
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from amcast.daemon.config import DaemonConfig
from amcast.daemon.runner import Daemon

from amcast.localcluster import free_port
from tests.steady import STEADY


class InProcessCluster:
    """``n`` daemons in this event loop, sharing one fresh loopback multicast group."""

    def __init__(
        self, n: int, base: Path, overrides: dict[str, dict[str, Any]],
        node_factory: Callable[..., Any] | None = None,
    ) -> None:
        self.base = base
        group = f"239.255.{random.randrange(1, 255)}.{random.randrange(1, 255)}"
        port = free_port()
        self.daemons: list[Daemon] = []
        self.tasks: list[asyncio.Task[int]] = []
        for i in range(n):
            data: dict[str, dict[str, Any]] = {
                "node": {"id": i, "members": list(range(n)), "seed": i + 1,
                         "state_dir": str(base / f"state{i}")},
                "network": {"group": group, "port": port, "ttl": 0},
                "api": {"socket": str(base / f"n{i}.sock")},
                "metrics": {"port": 0},
                "logs": {"dir": str(base / f"logs{i}"), "format": "json",
                         "level": "warning"},
                "protocol": {"insecure": True, **STEADY},
                "shutdown": {"grace_s": 2.0},
            }
            for section, values in overrides.items():
                data.setdefault(section, {}).update(values)
            extra = {} if node_factory is None else {"node_factory": node_factory}
            self.daemons.append(Daemon(DaemonConfig.model_validate(data), environ={}, **extra))

    async def start(self) -> None:
        self.tasks = [asyncio.create_task(d.run()) for d in self.daemons]
        for d, t in zip(self.daemons, self.tasks, strict=True):
            ready = asyncio.create_task(d.ready.wait())
            done, _ = await asyncio.wait({ready, t}, timeout=15,
                                         return_when=asyncio.FIRST_COMPLETED)
            if t in done:
                ready.cancel()
                t.result()  # raises the start-up error
            assert ready in done, "daemon not ready in 15 s"
        if all(not hasattr(d.node, "membership") for d in self.daemons):
            return  # a fake engine: no views
        for d in self.daemons:  # clients connect once the first view is installed
            await asyncio.wait_for(d.in_primary_view.wait(), 15)

    async def stop(self) -> list[int]:
        for d in self.daemons:
            d.request_stop("test")
        return list(await asyncio.wait_for(asyncio.gather(*self.tasks), 20))

    def socket(self, i: int) -> str:
        return self.daemons[i].api.path


@pytest.fixture
async def make_cluster() -> AsyncIterator[Callable[..., Any]]:
    made: list[InProcessCluster] = []
    base = Path(tempfile.mkdtemp(prefix="amc-", dir="/tmp"))  # short: unix socket paths

    async def make(
        n: int = 2, *, node_factory: Callable[..., Any] | None = None,
        **overrides: dict[str, Any],
    ) -> InProcessCluster:
        c = InProcessCluster(n, base / str(len(made)), overrides, node_factory)
        made.append(c)
        await c.start()
        return c

    yield make
    for c in made:
        if not all(t.done() for t in c.tasks):
            await c.stop()
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(params=["pure", "native"])
def socket_io(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a transport test on each ``socket_io`` implementation (``AMCAST_IO``): the
    Python loop and the native batched one (skipped where the extension is not built)."""
    from amcast.daemon import socket_io as sio
    if request.param == "native" and sio.native_class("native") is None:
        pytest.skip("amcast_native is not built (make rust)")
    monkeypatch.setenv(sio.IO_ENV, request.param)
    monkeypatch.delenv(sio.CORE_ENV, raising=False)
    return str(request.param)
