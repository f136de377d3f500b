"""The nodes of ``amcast bench cluster --mode embedded``: application processes that each
embed their member, in place of ``amcastd`` processes with a client each.

Theory of operation: the ``LocalCluster`` writes the same configuration files as for
its daemons; each node's process is the embedded load generator (``embedded_load``:
``amcast.member.Member`` from that file on its own event loop, ``amcast.loadgen``'s load),
``--wait-members N`` (no message goes out before all N joined the group: the members
start on their own, there is no daemon start-up to wait for) and ``--hold`` (it prints
its report when its load is done and stays in the group until SIGTERM, so that the
bench's last sample still finds every member). The embedded members serve their
configuration's API socket, so the bench samples them exactly as it samples daemons
(``status`` and ``/proc``); each ``NodeProcess`` takes its process's PID.
``start`` returns once every member reports a primary view of all N, or raises
``RuntimeError`` with the last line a failed process wrote.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence

from amcast.client import BlockingClient, ClientError
from amcast.localcluster import LocalCluster

from . import children

READY_TIMEOUT = 120.0
"""Seconds for every member to start and see the others (two busy cores, N = 16)."""


def member_env(core_vars: Mapping[str, str]) -> dict[str, str]:
    """The environment of a member's process: this one (the checkout's root on its
    import path, ``children.env``) without its ``AMCAST_`` variables
    (a member reads them as configuration overrides, as ``amcastd`` does), plus the
    core selection (``AMCAST_CORE``, ``AMCAST_SEAL``, ``AMCAST_RELIABLE``)."""
    env = {k: v for k, v in children.env().items() if not k.startswith("AMCAST_")}
    env["PYTHONUNBUFFERED"] = "1"
    return {**env, **core_vars}


def _view_size(socket: str) -> int:
    """Members of the primary view the member at ``socket`` reports (0: not serving yet
    or not in a primary view)."""
    try:
        with BlockingClient(socket, name="bench-probe") as c:
            view = c.status()["view"]
    except (OSError, ClientError):  # not serving yet
        return 0
    return len(view["members"]) if view.get("primary") else 0


def _last_line(p: subprocess.Popen[str]) -> str:
    _, err = p.communicate(timeout=10)
    lines = [ln for ln in (err or "").strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "no output"


def start(cluster: LocalCluster, extra: Sequence[Sequence[str]],
          core_vars: Mapping[str, str], timeout: float = READY_TIMEOUT
          ) -> list[subprocess.Popen[str]]:
    """Write the configurations, start one member process per node (``extra[i]``: node
    i's load-generator arguments) and wait until all N see a primary view of all N."""
    cluster.write_configs()
    n = len(cluster.nodes)
    env = member_env(core_vars)
    procs: list[subprocess.Popen[str]] = []
    try:
        for i, node in enumerate(cluster.nodes):
            p = subprocess.Popen(
                [sys.executable, "-m", "bench.embedded_load", "--config", str(node.config),
                 "--tag", str(i), "--wait-members", str(n), "--hold", *extra[i]],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                cwd=children.ROOT)
            procs.append(p)
            node.pid = p.pid
        deadline = time.monotonic() + timeout
        waiting = list(range(n))
        while waiting:
            for i in waiting:
                if procs[i].poll() is not None:
                    raise RuntimeError(f"embedded member {i} exited {procs[i].returncode}: "
                                       f"{_last_line(procs[i])}")
            waiting = [i for i in waiting if _view_size(cluster.nodes[i].socket) < n]
            if waiting and time.monotonic() > deadline:
                raise RuntimeError(f"embedded members {waiting} not in a primary view of "
                                   f"all {n} after {timeout:.0f} s")
            if waiting:
                time.sleep(0.1)
    except BaseException:
        stop(procs)
        raise
    return procs


def stop(procs: Sequence[subprocess.Popen[str]]) -> None:
    """SIGTERM every member still running (each leaves the group and exits once its
    report is out); ``communicate`` then collects the reports."""
    for p in procs:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                p.send_signal(signal.SIGTERM)


def kill(procs: Sequence[subprocess.Popen[str]]) -> None:
    """SIGKILL and reap what is left (after a failed run)."""
    for p in procs:
        if p.poll() is None:
            p.kill()
        with contextlib.suppress(subprocess.TimeoutExpired, ValueError):
            p.communicate(timeout=10)
