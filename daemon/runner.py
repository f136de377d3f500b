"""The daemon: asyncio glue between the sockets, the API and the sans-IO ``Node``.

Theory of operation: ``Daemon.run`` opens the multicast transport, the API socket and
the metrics endpoint, then lets the event loop (uvloop) call back:

- a readable multicast socket hands a *list* of datagrams to ``Node.receive_datagram``;
- a client ``send`` frame becomes one envelope (``daemon.envelope``) and one
  ``Node.submit``; when the engine's window is full (``BackpressureError``) the envelope
  waits in a short queue and every client's reading is paused until the window opens;
- the engine's single timer is one ``loop.call_later`` handle, re-armed after every
  input when ``Node.next_timer()`` changed.

Every input only *requests* a pump (``loop.call_soon``, coalesced), so one pump per loop
iteration drains ``datagrams_to_send()`` to the socket and ``events()`` to the clients,
the logs and the metrics, whatever number of inputs arrived. The daemon decides nothing
about order: it numbers application messages in the order the engine delivers vertices.

The clock handed to the engine is ``time.monotonic()`` shifted once at start-up onto
Unix time, so it never jumps and ``send_ts`` reads as wall-clock seconds in the logs.

Shutdown (SIGTERM/SIGINT): systemd ``STOPPING=1``, stop accepting (the socket file is
removed), pause client sends, keep pumping until this node's own submitted messages are
delivered locally or ``shutdown.grace_s`` passes, tell clients ``shutting_down`` (their
queued deliveries are flushed first), close the multicast sockets, write a last metrics
snapshot and close the logs.
"""

from __future__ import annotations

import asyncio
import collections
import copy
import random
import signal
import time
from collections.abc import Mapping
from typing import Any

import structlog

from daemon import envelope
from daemon.api import ApiServer, ClientConnection
from daemon.config import DaemonConfig
from daemon.logs import DeliveryLog
from daemon.metrics import Counters, Metrics, engine_stats
from daemon.notify import Notifier
from daemon.transport import MulticastTransport
from protocols.errors import BackpressureError
from protocols.events import (
    BackpressureApplied,
    BackpressureReleased,
    BatchDelivered,
    DatagramDropped,
    ServiceLevel,
)
from protocols.node import Node

log = structlog.get_logger("amcastd")
ENVELOPE_OVERHEAD = 160  # engine header + tag + envelope framing, bytes (generous)


class Daemon:
    def __init__(self, config: DaemonConfig, *, environ: Mapping[str, str] | None = None) -> None:
        self.config = config
        self.node_id = config.node.id
        self._clock_offset = time.time() - time.monotonic()
        self.started = self.now()
        self.node_config = config.node_config()
        self.variant = str(self.node_config.rule)
        phi = self.node_config.phi
        self.phi = float(len(config.node.members) / 2 if phi is None else phi)
        # one envelope should fit one datagram (the engine fragments bigger ones)
        self.envelope_bytes = max(256, self.node_config.datagram_budget - ENVELOPE_OVERHEAD)
        seed = config.node.seed
        self.rng = random.Random(seed if seed is not None else random.SystemRandom().random())
        self.view_id = 0
        self.members = list(config.node.members)
        self.counters = Counters()
        self.position = 0  # next total-order position, in application messages
        self.own_outstanding = 0  # own application messages not yet delivered here
        self.notifier = Notifier(environ)
        self.node: Node | None = None
        self.api = ApiServer(config.api, self)
        self.transport: MulticastTransport | None = None
        self.metrics = Metrics(self._metrics_state)
        self.metrics_port: int | None = None
        self.dlog: DeliveryLog | None = None
        self._blocked: collections.deque[tuple[bytes, ServiceLevel, int, int]] = (
            collections.deque()
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pump_scheduled = False
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: float | None = None
        self._stop = asyncio.Event()
        self.ready = asyncio.Event()  # set once serving (tests, embedding)
        self._flushed: asyncio.Event | None = None
        self._periodic: list[asyncio.TimerHandle] = []
        self._engine_stats: Any = None
        self.stopping = False

    def now(self) -> float:
        return time.monotonic() + self._clock_offset

    # ---- lifecycle ---------------------------------------------------------------
    async def run(self) -> int:
        loop = self._loop = asyncio.get_running_loop()
        cfg = self.config
        self.node = Node(
            self.node_config, node_id=self.node_id, members=list(cfg.node.members),
            rng=self.rng, now=self.now(),
        )
        self.dlog = DeliveryLog(
            cfg.logs.dir, self.node_id, rotate_bytes=cfg.logs.rotate_bytes,
            keep=cfg.logs.rotate_keep, deliveries=cfg.logs.delivery_log,
        )
        self.dlog.view(view=self.view_id, members=self.members, ts=self.now())
        try:
            self.transport = MulticastTransport(cfg.network)
            self.transport.on_send_error = self._log_send_error
            await self.api.start()
            if cfg.metrics.enabled:
                self.metrics_port = self.metrics.serve(cfg.metrics.address, cfg.metrics.port)
        except BaseException:
            self._close_resources()
            raise
        self.transport.start(loop, self._on_datagrams)
        self._copy_engine_stats()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_stop, sig.name)
        self._every(cfg.logs.snapshot_interval_s, self._snapshot)
        self._every(1.0, self._copy_engine_stats)
        if cfg.systemd.watchdog and self.notifier.watchdog_interval_s:
            self._every(self.notifier.watchdog_interval_s, self.notifier.watchdog)
        self._request_pump()
        log.info(
            "amcastd ready", node=self.node_id, members=self.members,
            group=f"{cfg.network.group}:{cfg.network.port}", interface=cfg.network.interface,
            socket=self.api.path, metrics_port=self.metrics_port, log_dir=cfg.logs.dir,
            rcvbuf=self.transport.rcvbuf, variant=self.variant,
        )
        self.notifier.ready(f"node {self.node_id} serving {self.api.path}")
        self.ready.set()
        await self._stop.wait()
        await self._shutdown()
        return 0

    def request_stop(self, why: str = "request") -> None:
        if not self._stop.is_set():
            log.info("amcastd stopping", node=self.node_id, reason=why)
            self._stop.set()

    async def _shutdown(self) -> None:
        self.stopping = True
        self.notifier.stopping()
        self.api.close_listener()
        self.api.pause_sends()
        self._flushed = asyncio.Event()
        self._request_pump()
        if self.own_outstanding > 0 or self._blocked:
            try:
                await asyncio.wait_for(self._flushed.wait(), self.config.shutdown.grace_s)
            except TimeoutError:
                log.warning("shutdown grace expired", node=self.node_id,
                            undelivered_own_messages=self.own_outstanding,
                            unsubmitted_frames=len(self._blocked))
        self.api.close_clients("shutting_down", "the daemon is stopping")
        await asyncio.sleep(0)  # let the transports flush and close
        self._snapshot()
        self._close_resources()
        log.info("amcastd stopped", node=self.node_id,
                 delivered=self.counters.messages_delivered)

    def _close_resources(self) -> None:
        for handle in self._periodic:
            handle.cancel()
        if self._timer is not None:
            self._timer.cancel()
        if self._loop is not None:
            for sig in (signal.SIGTERM, signal.SIGINT):
                self._loop.remove_signal_handler(sig)
        if self.transport is not None:
            self.transport.close()
        self.api.close_listener()
        self.metrics.close()
        if self.dlog is not None:
            self.dlog.close()
        self.notifier.close()

    def _every(self, interval: float, fn: Any) -> None:
        assert self._loop is not None
        loop = self._loop

        def tick() -> None:
            fn()
            self._periodic[index] = loop.call_later(interval, tick)

        index = len(self._periodic)
        self._periodic.append(loop.call_later(interval, tick))

    # ---- inputs --------------------------------------------------------------------
    def _on_datagrams(self, datagrams: list[bytes]) -> None:
        node = self.node
        assert node is not None
        now = self.now()
        receive = node.receive_datagram
        for data in datagrams:
            receive(data, now)
        self._request_pump()

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = None
        assert self.node is not None
        self.node.handle_timer(self.now())
        self._pump()

    def send(
        self, conn: ClientConnection, groups: list[str], service: str, payloads: list[bytes]
    ) -> str | None:
        if self.stopping:
            return "shutting_down"
        level = ServiceLevel(service)
        total = sum(map(len, payloads))
        if total + 8 * len(payloads) <= self.envelope_bytes:
            items = [(envelope.encode(conn.id, groups, payloads), level, len(payloads), total)]
        else:
            items = [
                (envelope.encode(conn.id, groups, part), level, len(part), sum(map(len, part)))
                for part in envelope.split(payloads, self.envelope_bytes)
            ]
        if self._blocked and len(self._blocked) + len(items) > self.config.api.submit_queue_frames:
            return "overloaded"
        for item in items:
            if self._blocked:
                self._blocked.append(item)
            elif not self._submit(item):
                self._blocked.append(item)
                self.counters.backpressure_events += 1
                self.api.pause_sends()
        self._request_pump()
        return None

    def _submit(self, item: tuple[bytes, ServiceLevel, int, int]) -> bool:
        assert self.node is not None
        try:
            self.node.submit(item[0], self.now(), service=item[1])
        except BackpressureError:
            return False
        c = self.counters
        c.messages_sent += item[2]
        c.message_bytes_sent += item[3]
        self.own_outstanding += item[2]
        return True

    def _drain_blocked(self) -> None:
        blocked = self._blocked
        while blocked:
            if not self._submit(blocked[0]):
                return
            blocked.popleft()
        if not self.stopping:
            self.api.resume_sends()

    # ---- the pump ------------------------------------------------------------------
    def _request_pump(self) -> None:
        if not self._pump_scheduled and self._loop is not None:
            self._pump_scheduled = True
            self._loop.call_soon(self._pump)

    def _pump(self) -> None:
        self._pump_scheduled = False
        node = self.node
        transport = self.transport
        if node is None or transport is None:
            return
        if self._blocked:
            self._drain_blocked()
        for _ in range(8):  # events can free window space, which can submit more
            at = node.next_timer()
            if at is not None and at <= self.now():  # due now: no trip through the loop
                node.handle_timer(self.now())
            out = node.datagrams_to_send()
            if out:
                transport.send(out)
            events = node.events()
            if not events:
                at = node.next_timer()
                if at is None or at > self.now():
                    break
                continue
            for ev in events:
                kind = type(ev)
                if kind is BatchDelivered:
                    self._delivered(ev)
                elif kind is DatagramDropped:
                    self.counters.drops[str(ev.reason)] += 1
                elif kind is BackpressureReleased:
                    if self._blocked:
                        self._drain_blocked()
                elif kind is BackpressureApplied:
                    pass  # counted when a submit is refused (see ``send``)
                else:
                    self._other_event(ev)
        if self._flushed is not None and self.own_outstanding <= 0 and not self._blocked:
            self._flushed.set()
        self._arm_timer()

    def _arm_timer(self) -> None:
        assert self.node is not None and self._loop is not None
        at = self.node.next_timer()
        if at == self._timer_at:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = at
        self._timer = (
            None if at is None else self._loop.call_later(max(0.0, at - self.now()), self._on_timer)
        )

    # ---- outputs -------------------------------------------------------------------
    def _delivered(self, ev: BatchDelivered) -> None:
        c = self.counters
        ts = self.now()
        envs: list[list[Any]] = []
        count = 0
        nbytes = 0
        decode = envelope.decode
        for p in ev.payloads:
            env = decode(p)
            if env is None:
                c.drops["bad_envelope"] += 1
                continue
            body = env[2]
            envs.append([env[0], env[1], count, body])
            count += len(body)
            nbytes += sum(map(len, body))
        service = str(ev.service)
        rule = "causal" if ev.rule is None else str(ev.rule)
        position: int | None = None
        if ev.position is not None:
            position = self.position
            self.position += count
        if ev.sender == self.node_id:
            self.own_outstanding -= count
        c.messages_delivered += count
        c.message_bytes_delivered += nbytes
        c.batches_delivered += 1
        c.services[service] += 1
        c.rules[(self.variant, rule)] += 1
        if envs:
            c.deliveries_to_clients += self.api.deliver(
                {"t": "deliver", "sender": ev.sender, "seq": ev.seq, "service": service,
                 "position": position, "view": self.view_id, "send_ts": ev.send_ts},
                envs,
            )
        self.metrics.latency.observe(max(0.0, ts - ev.send_ts))
        if ev.ntail is not None:
            self.metrics.ntail.labels(self.variant).observe(ev.ntail)
        if self.dlog is not None and count:
            self.dlog.delivery(
                view=self.view_id, variant=self.variant, phi=self.phi, sender=ev.sender,
                seq=ev.seq, position=position, count=count, nbytes=nbytes, service=service,
                activation=ev.activation, rule=rule, ntail=ev.ntail, unseen=ev.unseen,
                nvt=ev.nvt, send_ts=ev.send_ts, ts=ts, envelopes=len(envs),
            )

    def _other_event(self, ev: Any) -> None:
        """Membership seam: a view event from the engine (dynamic membership issue)."""
        members = getattr(ev, "members", None)
        view = getattr(ev, "view", getattr(ev, "view_id", None))
        if members is not None and isinstance(view, int):
            self.view_id = view
            self.members = list(members)
            if self.dlog is not None:
                self.dlog.view(view=view, members=self.members, ts=self.now())
            self.api.broadcast({"t": "view", "view": view, "members": self.members})
            log.info("view installed", node=self.node_id, view=view, members=self.members)

    def _log_send_error(self, reason: str, hint: str) -> None:
        log.warning("multicast send failed", node=self.node_id, reason=reason, hint=hint)

    # ---- status, metrics, snapshots -------------------------------------------------
    def welcome(self) -> dict[str, Any]:
        cfg = self.config.api
        return {"node": self.node_id, "view": self.view_id, "members": self.members,
                "max_frame_bytes": cfg.max_frame_bytes,
                "max_message_bytes": cfg.max_message_bytes}

    def status(self) -> dict[str, Any]:
        c = self.counters
        engine = engine_stats(self.node.stats if self.node is not None else None)
        t = self.transport
        return {
            "node": self.node_id, "view": self.view_id, "members": self.members,
            "variant": self.variant, "now": self.now(), "uptime_s": self.now() - self.started,
            "position": self.position,
            "clients": [conn.info() for conn in self.api.clients.values()],
            "submit_queue": len(self._blocked),
            "counters": {
                "messages_sent": c.messages_sent, "messages_delivered": c.messages_delivered,
                "message_bytes_sent": c.message_bytes_sent,
                "message_bytes_delivered": c.message_bytes_delivered,
                "batches_delivered": c.batches_delivered,
                "datagrams_sent": t.datagrams_sent if t else 0,
                "datagrams_received": t.datagrams_received if t else 0,
                "backpressure_events": c.backpressure_events,
                "drops": dict(c.drops) | (dict(t.send_errors) if t else {}),
                "client_errors": dict(c.client_errors),
                "clients_disconnected": dict(c.clients_disconnected),
            },
            "engine": engine,
        }

    def count_client_error(self, code: str) -> None:
        self.counters.client_errors[code] += 1

    def count_disconnect(self, reason: str) -> None:
        self.counters.clients_disconnected[reason] += 1

    def _metrics_state(self) -> dict[str, Any]:
        t = self.transport
        queued = [conn.queued_bytes for conn in list(self.api.clients.values())]
        counters = self.counters
        if t is not None and t.send_errors:
            merged = Counters(**{**counters.__dict__, "drops": counters.drops + t.send_errors})
            counters = merged
        return {
            "counters": counters, "clients": len(queued), "queued": sum(queued),
            "queued_max": max(queued, default=0), "submit_queue": len(self._blocked),
            "view": self.view_id, "members": len(self.members),
            "datagrams_sent": t.datagrams_sent if t else 0,
            "datagrams_received": t.datagrams_received if t else 0,
            "bytes_sent": t.bytes_sent if t else 0, "bytes_received": t.bytes_received if t else 0,
            "engine": self._engine_stats,
        }

    def _copy_engine_stats(self) -> None:
        """Scrapes run on prometheus-client's thread: give them a copy taken here."""
        if self.node is not None:
            self._engine_stats = copy.deepcopy(self.node.stats)

    def _snapshot(self) -> None:
        if self.dlog is None:
            return
        s = self.status()
        c = s["counters"]
        e = s["engine"]
        self.dlog.metrics({
            "ts": s["now"], "view": self.view_id, "variant": self.variant,
            "messages_sent": c["messages_sent"], "messages_delivered": c["messages_delivered"],
            "datagrams_sent": c["datagrams_sent"], "datagrams_received": c["datagrams_received"],
            "retransmissions": int(e.get("retransmissions", 0)),
            "nacks_sent": int(e.get("nack_ranges_sent", 0)),
            "drops": c["drops"],
            "pending": int(e.get("pending_dag_size", 0)),
            "backpressure_events": c["backpressure_events"],
            "clients": len(s["clients"]), "position": self.position, "engine": e,
        })
