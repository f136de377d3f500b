"""Carrying a schedule's steps out on a ``LocalCluster``, and the ground truth of outages.

Signals and restarts are ``LocalCluster``'s own (``kill``, ``pause``, ``terminate``,
``restart``: the helpers the failover tests use); partitions and lossy links are
``tools.faultrelay.FaultRelay``'s ``cut`` and ``set_faults`` on the unicast transport
(no root, no namespaces: every directed link already runs through the relay). Clock
steps use libfaketime: each daemon runs under ``env LD_PRELOAD=libfaketime ...`` (a
``LocalCluster`` wrapper, which execs the daemon in place) reading its offset from a
file of its own, so a step is a write to that file; the monotonic clock is left alone
(``FAKETIME_DONT_FAKE_MONOTONIC``), as a real wall-clock step would. A daemon with a
duplicate id, another key or other ordering settings is a real ``amcastd`` run from a
copy of a node's config with that one thing changed.

Every action is timestamped (``time.monotonic()``) and logged in ``actions``; what the
health check needs to know, which node could not be heard by which others from when to
when, is kept in ``outages``. An action that fails (a daemon that does not come back
from a restart) is an ``errors`` entry: a finding, not a crash of the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from amcast.protocols.errors import AmcastError
from amcast.protocols.node_config import NodeConfig
from amcast.protocols.simulation.network import LinkFaults

from amcast.keygen import new_keyring, write_keyring
from amcast.localcluster import LocalCluster, free_port, render_toml, write_private
from nemesis import schedule as S
from tools.faultrelay import FaultRelay

FAKETIME_LIBS = ("/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
                 "/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1",
                 "/usr/lib/faketime/libfaketimeMT.so.1",
                 "/usr/local/lib/faketime/libfaketimeMT.so.1")
REPLAY_WINDOW = NodeConfig(insecure=True).replay_window
"""A clock stepped further than this is refused by the others (and refuses them)."""
FLAKY_LINKS = LinkFaults(loss=0.05, duplicate=0.05, jitter=0.002, reorder=0.05,
                         reorder_window=0.02)
WAIT = 30.0
"""Bound on one action's wait (a daemon's exit, its READY=1) on a loaded 2-core host."""


def faketime_library() -> str | None:
    """libfaketime's multi-threaded build, where installed (``apt-get install faketime``)."""
    return next((p for p in FAKETIME_LIBS if os.path.exists(p)), None)


def clock_wrappers(library: str, directory: Path, nodes: int) -> list[list[str]]:
    """Per-node command prefixes that run a daemon under libfaketime at offset 0, its
    offset re-read (at most a second late) from ``directory/clock<i>``."""
    out = []
    for i in range(nodes):
        path = directory / f"clock{i}"
        path.write_text("+0s\n")
        out.append(["env", f"LD_PRELOAD={library}", f"FAKETIME_TIMESTAMP_FILE={path}",
                    "FAKETIME_CACHE_DURATION=1", "FAKETIME_DONT_FAKE_MONOTONIC=1"])
    return out


@dataclass(frozen=True)
class Outage:
    """``node`` could not be heard by ``by`` (every other node when ``None``) from
    ``since`` until ``until`` (``None``: not yet healed), because of ``why``."""

    node: int
    since: float
    until: float | None
    by: frozenset[int] | None
    why: str

    def covers(self, observer: int, at: float) -> bool:
        return ((self.by is None or observer in self.by) and self.since <= at
                and (self.until is None or at < self.until))


@dataclass
class Impostor:
    """A daemon that is not one of the cluster's own: a duplicate id, say."""

    name: str
    node: int
    config: Path
    socket: str
    process: subprocess.Popen[bytes]


@dataclass
class Faults:
    """The nemesis' hands on one cluster (module docstring).

    ``on_started(node)`` is awaited after each (re)start of a cluster node (the load
    connects a client to it)."""

    cluster: LocalCluster
    relay: FaultRelay | None
    clock_dir: Path | None
    on_started: Callable[[int], Awaitable[object]]
    t0: float = field(default_factory=time.monotonic)
    log: Callable[[str], None] = print
    actions: list[dict[str, Any]] = field(default_factory=list)
    outages: list[Outage] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    impostors: list[Impostor] = field(default_factory=list)
    state: dict[int, str] = field(default_factory=dict)
    """Per node: ``up``, ``paused``, ``down`` (killed or stopped), ``misconfigured``."""
    _open: dict[tuple[int, str], Outage] = field(default_factory=dict)
    _configs: dict[int, Path] = field(default_factory=dict)
    _misconfigured: dict[int, str] = field(default_factory=dict)
    _cuts: dict[S.Step, set[tuple[int, int]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.state = {n.node: "up" for n in self.cluster.nodes}
        self._configs = {n.node: n.config for n in self.cluster.nodes}

    # ---- bookkeeping ----------------------------------------------------------------
    def _note(self, what: str, **extra: Any) -> float:
        at = time.monotonic()
        self.actions.append({"t": round(at - self.t0, 3), "action": what, **extra})
        self.log(f"  [{at - self.t0:7.2f}s] {what}")
        return at

    def _down(self, node: int, why: str, at: float, by: frozenset[int] | None = None,
              token: str = "") -> None:
        """``node`` cannot be heard (by ``by``) from ``at``; ``token`` tells apart the
        outages of two steps that overlap (two partitions, two clock steps)."""
        self._open.setdefault((node, token or why), Outage(node, at, None, by, why))

    def _up(self, node: int, why: str, at: float, token: str = "") -> None:
        o = self._open.pop((node, token or why), None)
        if o is not None:
            self.outages.append(Outage(o.node, o.since, at, o.by, o.why))

    def all_outages(self) -> list[Outage]:
        """Healed outages and those still open."""
        return [*self.outages, *self._open.values()]

    def serving(self) -> list[int]:
        """Cluster nodes whose daemon runs and is not paused (they answer ``status``)."""
        return [n for n, s in self.state.items() if s in ("up", "misconfigured")]

    def others(self, nodes: tuple[int, ...]) -> frozenset[int]:
        return frozenset(n.node for n in self.cluster.nodes) - set(nodes)

    # ---- steps ----------------------------------------------------------------------
    async def begin(self, step: S.Step) -> None:
        try:
            await self._begin(step)
        except (AmcastError, OSError, subprocess.SubprocessError) as exc:
            self.errors.append(f"{step.describe().strip()}: begin failed: {exc}")
            self.log(f"  !! {step.kind} failed: {str(exc).splitlines()[0]}")

    async def end(self, step: S.Step) -> None:
        try:
            await self._end(step)
        except (AmcastError, OSError, subprocess.SubprocessError) as exc:
            self.errors.append(f"{step.describe().strip()}: heal failed: "
                               f"{str(exc)[:2000]}")
            self.log(f"  !! healing {step.kind} failed: {str(exc).splitlines()[0]}")

    async def _begin(self, step: S.Step) -> None:
        c = self.cluster
        kind, nodes = step.kind, step.nodes
        if kind == S.KILL:
            at = c.kill(nodes[0])
            self._note(f"kill -9 node {nodes[0]}")
            self.state[nodes[0]] = "down"
            self._down(nodes[0], "killed", at)
            await asyncio.to_thread(c.wait_exit, nodes[0], WAIT)
        elif kind == S.PAUSE:
            at = c.pause(nodes[0])
            self._note(f"SIGSTOP node {nodes[0]}")
            self.state[nodes[0]] = "paused"
            self._down(nodes[0], "paused", at)
        elif kind == S.TERMINATE:
            await self._terminate(nodes[0], "terminated")
        elif kind == S.PARTITION:
            assert self.relay is not None
            rest = self.others(nodes)
            self._cuts[step] = self._links(step)
            self.relay.cut(nodes, rest)
            if step.arg == "both":
                self.relay.cut(rest, nodes)
            at = self._note(f"partition {list(nodes)} | {sorted(rest)} ({step.arg})")
            token = f"partition@{step.at}"
            for n in nodes:
                self._down(n, "partitioned", at, rest, token)
            if step.arg == "both":
                for n in rest:
                    self._down(n, "partitioned", at, frozenset(nodes), token)
        elif kind == S.FLAKY:
            assert self.relay is not None
            self.relay.set_faults(FLAKY_LINKS)
            self._note("flaky links (loss, duplication, reordering)")
        elif kind == S.CLOCK:
            self._step_clock(nodes[0], int(step.arg), f"clock@{step.at}")
        elif kind == S.DUPID:
            self._impostor(nodes[0], "dupid", {})
        elif kind == S.MISCONFIG:
            await self._misconfigure(nodes[0], step.arg)
        elif kind == S.RESTART_ALL:
            await self._stop_all(step.arg)

    async def _end(self, step: S.Step) -> None:
        kind, nodes = step.kind, step.nodes
        if kind in (S.KILL, S.TERMINATE):
            await self.restart(nodes[0])
        elif kind == S.PAUSE:
            at = self.cluster.resume(nodes[0])
            self._note(f"SIGCONT node {nodes[0]}")
            self.state[nodes[0]] = "up"
            self._up(nodes[0], "paused", at)
        elif kind == S.PARTITION:
            assert self.relay is not None
            # the relay heals every cut at once: those of other partitions go back
            self._cuts.pop(step, None)
            self.relay.heal()
            for links in self._cuts.values():
                for src, dst in links:
                    self.relay.cut([src], [dst])
            at = self._note(f"partition {list(nodes)} healed")
            for n in self.cluster.nodes:
                self._up(n.node, "partitioned", at, f"partition@{step.at}")
        elif kind == S.FLAKY:
            assert self.relay is not None
            self.relay.set_faults(LinkFaults())
            self._note("links clean again")
        elif kind == S.CLOCK:
            self._step_clock(nodes[0], 0, f"clock@{step.at}")
        elif kind == S.DUPID:
            await self._stop_impostors()
        elif kind == S.MISCONFIG:
            await self._terminate(nodes[0], "misconfigured")
            self.cluster.nodes[nodes[0]].config = self._configs[nodes[0]]
            await self.restart(nodes[0])
        elif kind == S.RESTART_ALL:
            # all at once, as after a power cut: a daemon alone may wait for the others
            # before it reports READY=1, so one at a time would serialise those waits
            got = await asyncio.gather(*(self.restart(n.node) for n in self.cluster.nodes),
                                       return_exceptions=True)
            for n, exc in zip(self.cluster.nodes, got, strict=True):
                if isinstance(exc, AmcastError):
                    self.errors.append(f"node {n.node} did not come back: {str(exc)[:2000]}")
                elif isinstance(exc, BaseException):
                    raise exc

    # ---- the actions ----------------------------------------------------------------
    async def _terminate(self, node: int, why: str) -> None:
        at = self.cluster.terminate(node)
        self._note(f"SIGTERM node {node}")
        self.state[node] = "down"
        self._down(node, why, at)
        try:
            await asyncio.to_thread(self.cluster.wait_exit, node, WAIT)
        except AmcastError:
            self.errors.append(f"node {node} still ran {WAIT:g} s after SIGTERM: killed")
            self.cluster.kill(node)
            await asyncio.to_thread(self.cluster.wait_exit, node, WAIT)

    async def restart(self, node: int) -> None:
        """Start a stopped node again (its own config and state directory) and wait for
        its READY=1; then ``on_started``. The outage ends when it serves again."""
        r = await asyncio.to_thread(self.cluster.restart, node, WAIT)
        self._note(f"restarted node {node}")
        misconfigured = self.cluster.nodes[node].config != self._configs[node]
        self.state[node] = "misconfigured" if misconfigured else "up"
        # another key: nobody can hear it until it runs with its own again; other
        # ordering settings: whether the group takes it in is the daemons' call
        cut_off = misconfigured and self._misconfigured.get(node) == "key"
        for why in ("killed", "terminated", "misconfigured"):
            if not (cut_off and why == "misconfigured"):
                self._up(node, why, r.ready_at)
        await self.on_started(node)

    async def _stop_all(self, how: str) -> None:
        c = self.cluster
        for n in c.nodes:
            sig = signal.SIGKILL if how == "kill" else signal.SIGTERM
            with contextlib.suppress(ProcessLookupError):
                at = c.kill_node(n.node, sig)
                self.state[n.node] = "down"
                self._down(n.node, "killed" if how == "kill" else "terminated", at)
        self._note(f"every daemon stopped ({'SIGKILL' if how == 'kill' else 'SIGTERM'})")
        for n in c.nodes:
            try:
                await asyncio.to_thread(c.wait_exit, n.node, WAIT)
            except AmcastError:
                self.errors.append(f"node {n.node} still ran {WAIT:g} s after SIGTERM")
                c.kill(n.node)
                await asyncio.to_thread(c.wait_exit, n.node, WAIT)

    def _links(self, step: S.Step) -> set[tuple[int, int]]:
        """The directed links a partition cuts."""
        rest = self.others(step.nodes)
        links = {(a, b) for a in step.nodes for b in rest}
        if step.arg == "both":
            links |= {(b, a) for a in step.nodes for b in rest}
        return links

    def _step_clock(self, node: int, offset: int, token: str) -> None:
        assert self.clock_dir is not None
        (self.clock_dir / f"clock{node}").write_text(f"{offset:+d}s\n")
        at = self._note(f"clock of node {node} at {offset:+d} s")
        others = self.others((node,))
        if abs(offset) > REPLAY_WINDOW:
            self._down(node, "clock", at, others, token)
            for n in others:
                self._down(n, "clock", at, frozenset({node}), token)
        else:
            for n in self.cluster.nodes:
                self._up(n.node, "clock", at, token)

    def _config_of(self, node: int) -> dict[str, Any]:
        return tomllib.loads(self._configs[node].read_text())

    def _other_key(self) -> Path:
        path = self.cluster.directory / "other-authkey"
        if not path.exists():
            write_keyring(path, new_keyring())
        return path

    async def _misconfigure(self, node: int, what: str) -> None:
        """Restart ``node`` from a copy of its config with another key file or another
        ordering rule (an operator's mistake), its own state directory kept."""
        tables = self._config_of(node)
        if what == "key":
            tables.setdefault("security", {})["key_file"] = str(self._other_key())
        else:
            proto = tables.setdefault("protocol", {})
            rule = proto.get("rule", NodeConfig(insecure=True).rule)
            proto["rule"] = "lex" if rule != "lex" else "gltoto"
        path = self._configs[node].with_name(f"amcastd-{what}.toml")
        write_private(path, render_toml(tables))
        await self._terminate(node, "misconfigured")
        self._misconfigured[node] = what
        self.cluster.nodes[node].config = path
        self._note(f"node {node} restarting with another {what}")
        await self.restart(node)

    def _impostor(self, node: int, what: str, protocol: dict[str, Any]) -> None:
        """Start a daemon with ``node``'s id from a copy of its config, with its own
        socket, logs and state directory (and its own unicast port: it sends to the
        others through ``node``'s relay links, so it reads as ``node`` to them)."""
        tables = self._config_of(node)
        k = len(self.impostors)
        home = self.cluster.directory / f"impostor{k}"
        home.mkdir(mode=0o700, exist_ok=True)
        tables["node"]["state_dir"] = str(home / "state")
        tables["api"]["socket"] = str(self.cluster.directory / f"imp{k}.sock")
        tables["logs"]["dir"] = str(home / "logs")
        tables["metrics"]["enabled"] = False
        tables.setdefault("protocol", {}).update(protocol)
        if tables["network"].get("transport") == "unicast":
            tables["network"]["port"] = free_port()
        path = home / "amcastd.toml"
        write_private(path, render_toml(tables))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AMCAST_",
                                                                          "NOTIFY_"))}
        wrapper = self.cluster.wrappers[node] if self.cluster.wrappers else []
        with open(home / "amcastd.log", "ab") as out:
            proc = subprocess.Popen([*wrapper, sys.executable, "-m", "amcast.daemon",
                                     "--config", str(path)], env=env,
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=out)
        self.impostors.append(Impostor(f"impostor{k}", node, path,
                                       tables["api"]["socket"], proc))
        self._note(f"started a second daemon with node {node}'s id ({what}), pid {proc.pid}")

    async def _stop_impostors(self) -> None:
        for imp in self.impostors:
            if imp.process.poll() is None:
                imp.process.terminate()
                try:
                    await asyncio.to_thread(imp.process.wait, WAIT)
                except subprocess.TimeoutExpired:
                    imp.process.kill()
                    await asyncio.to_thread(imp.process.wait)
                self._note(f"stopped {imp.name} (node {imp.node}'s id), exit "
                           f"{imp.process.returncode}")

    async def heal_all(self) -> None:
        """Undo whatever is still in effect (a step whose end failed): every daemon
        running, resumed, with its own config, clean links, clocks back at 0."""
        if self.relay is not None:
            self.relay.heal()
            self.relay.set_faults(LinkFaults())
        if self.clock_dir is not None:
            for n in self.cluster.nodes:
                (self.clock_dir / f"clock{n.node}").write_text("+0s\n")
        await self._stop_impostors()
        now = time.monotonic()
        self._cuts.clear()
        for key, o in list(self._open.items()):
            if o.why in ("partitioned", "clock"):
                self._up(key[0], o.why, now, key[1])
        for node, state in list(self.state.items()):
            if state == "paused":
                self._up(node, "paused", self.cluster.resume(node))
                self.state[node] = "up"
            elif state == "misconfigured":
                await self._terminate(node, "misconfigured")
            if self.cluster.nodes[node].config != self._configs[node]:
                self.cluster.nodes[node].config = self._configs[node]
            if self.state[node] == "down":
                try:
                    await self.restart(node)
                except AmcastError as exc:
                    self.errors.append(f"node {node} could not be restarted at the end: "
                                       f"{str(exc)[:2000]}")
