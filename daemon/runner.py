"""The daemon: asyncio glue between the sockets, the API and the sans-IO ``Node``.

Theory of operation: ``Daemon.run`` opens the multicast transport, the API socket and
the metrics endpoint, then lets the event loop (uvloop) call back:

- a readable multicast socket hands a *list* of datagrams to ``Node.receive_datagram``;
- a client ``send`` frame is accepted whole or refused whole (an ``error`` frame with the
  frame's ``id``). Accepted, it becomes envelopes (``amcast.socket_protocol``) entered in
  the ``Ledger`` (``amcast.daemon.submitq``) and handed to ``Node.submit``; when the
  engine's window is full (``BackpressureError``) they wait in the ``SubmitQueue`` and
  every client's reading is paused until the queue has drained into the engine
  (backpressure, not refusal: only past the queue's byte cap is a frame refused with
  ``overloaded``);
- the engine's single timer is one ``loop.call_later`` handle, re-armed after every
  input when ``Node.next_timer()`` changed.

Every input only *requests* a pump (``loop.call_soon``, coalesced), so one pump per loop
iteration drains ``datagrams_to_send()`` to the socket and ``events()`` to the clients,
the logs and the metrics, whatever number of inputs arrived. An exception raised while
handling one event (or inside one engine call) is a counted drop
(``drops{reason="event_handler_error"}`` or ``"engine_error"``) and a log line; the other
events of the batch still go out and the timer is always re-armed. The daemon decides
nothing about order: it numbers application messages in the order the engine delivers
vertices, and logs the threshold phi the engine reports (``Node.phi``).

The ``Daemon`` is the glue that owns the rest; each other job has a module of its own,
which the daemon calls with itself as the state it reads:

- ``amcast.daemon.fanout``: delivered batches and the engine's other events to the
  clients, logs and metrics, and the ledger's account of own messages;
- ``amcast.daemon.health``: health problems and warnings, the ``status`` reply and the
  clients' ``welcome``;
- ``amcast.daemon.observe``: metrics snapshots for the scrape thread, the periodic
  metrics record, log-file failures, counted handler errors;
- ``amcast.daemon.shutdown``: the graceful stop (leave or drain, report, close);
- ``amcast.daemon.reload``: what a SIGHUP's configuration changes at once;
- ``amcast.daemon.transports``: which transport the configuration names.

The clock handed to the engine is ``time.monotonic()`` shifted once at start-up onto
Unix time, so it never jumps and ``send_ts`` reads as wall-clock seconds in the logs.

Shutdown (SIGTERM/SIGINT) is ``amcast.daemon.shutdown``; its last step is
``Daemon.close_resources``.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import math
import random
import signal
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import structlog

from .. import socket_protocol as sp
from ..protocols import extension
from ..protocols.errors import BackpressureError, ClientError
from ..protocols.events import (
    BackpressureApplied,
    BackpressureReleased,
    BatchDelivered,
    DatagramDropped,
    MessagesInDoubt,
    OrderGap,
    ServiceLevel,
    ViewInstalled,
)
from ..protocols.node import Node
from . import fanout, health, observe, reload, shutdown
from .access import AccessPolicy
from .api import ApiServer, ClientConnection, ensure_fd_limit
from .config import DaemonConfig
from .federation import Federation
from .groups import Groups
from .logs import DeliveryLog
from .metrics import Counters, Metrics, MetricsSnapshot
from .notify import Notifier
from .refusals import RefusalWatch
from .state import StateFile
from .submitq import Entry, Ledger, SubmitQueue
from .trace import DatagramTrace
from .transports import AnyTransport, open_transport

log = structlog.get_logger("amcastd")
LEVELS = {level.value: level for level in ServiceLevel}
TICK_S = 1.0  # health bookkeeping and the periodic metrics snapshot
TIMER_RETRY_S = 0.1  # when the engine's next_timer() fails, pump again after this
LOOP_TICK_S = 0.001
"""uvloop (libuv) keeps time and timers in whole milliseconds, read once per loop iteration,
and rounds a ``call_later`` delay to the nearest one: a timer can fire up to a tick early,
find nothing due in the engine and cost a second wake-up (about 100 wake-ups a second of an
idle daemon, half of them empty, before this was rounded)."""
LONG_TIMER_S = 0.005
"""Engine timers at least this far off (heartbeats, membership ticks, nack retries,
suspicion) fire on the next multiple of ``TIMER_SLACK_S`` of the loop's clock, never
early: a heartbeat and a membership tick due within one slot cost one wake-up, not two.
Shorter ones (the ack delay, first nacks, repairs) keep the loop's own rounding, for
latency."""
TIMER_SLACK_S = 0.005
STATE_RETRY_S = 0.2
"""While the membership state file cannot be written (a full, read-only or failing disk)
the daemon sends nothing, and tries the write again this often."""
Item = tuple[bytes, ServiceLevel, int, int, Entry | None, int]
"""A queued envelope: (envelope, service, messages, payload bytes, ledger entry, client);
a control envelope (group membership) has no messages, no entry and client -1."""


class Daemon:
    """One amcastd: owns the Node, the transport, the API server, the queues, the logs
    and the metrics, and drives them from the event loop (module docstring)."""

    def __init__(
        self, config: DaemonConfig, *, environ: Mapping[str, str] | None = None,
        node_factory: Callable[..., Node] = Node,
        reload: Callable[[], DaemonConfig] | None = None,
        wall_clock: Callable[[], float] = time.time,
        embedded: bool = False,
    ) -> None:
        """``wall_clock``: this host's wall clock (Unix seconds), which stamps and checks
        datagram send times (replay protection) and floors incarnations; the engine's
        clock is monotonic. ``embedded``: the daemon runs inside an application's process
        (``amcast.member``): the application owns the signals and systemd's notify
        socket, so the daemon installs no signal handler and notifies nobody."""
        self.config = config
        self.embedded = embedded
        self._reload = reload
        self.node_id = config.node.id
        self._wall_clock = wall_clock
        self._clock_offset = wall_clock() - time.monotonic()
        self.started = self.now()
        self.node_config = config.node_config()
        self.limits = config.limits(self.node_config)
        # the ToTo rule, or the swap ordering that replaces the engine (docs/swap.md)
        ordering = self.node_config.ordering
        self.variant = str(self.node_config.rule) if ordering == "toto" else ordering
        self.core: dict[str, str] = {}
        """Which implementation runs each part of the data path (``Node.core``); set at
        start."""
        # one envelope should fit one datagram (the engine fragments bigger ones)
        self.envelope_bytes = self.limits.envelope_bytes
        seed = config.node.seed
        self.rng = random.Random(seed if seed is not None else random.SystemRandom().random())
        self._node_factory = node_factory
        self.view_id = 0
        self.members = list(config.node.members)
        self.counters = Counters()
        self.refusals = RefusalWatch()
        """Drops that mean a sender is configured otherwise: warnings and health."""
        self.join_refused: str | None = None
        """Why the group refused this daemon's join (``JoinRefused``, reason and detail),
        until it is in a view."""
        self.id_claimed: tuple[int, float] | None = None
        """Another daemon's incarnation heard claiming this node's id, and when
        (``NodeIdClaimed``): a health warning for ``ID_CLAIM_SHOWN_S``."""
        self.position = 0  # next total-order position in the current view, in app messages
        self.position_view = 0  # the view ``position`` counts in
        self.last_ordered: tuple[int, int] | None = None
        """(view, position) of the last ordered application message delivered in this
        life: the ``after`` of a gap notice. The engine's ``OrderGap.after`` counts its
        own payloads (envelopes and control notices), which a client never sees."""
        self.primary = False
        self.last_change: dict[str, Any] = {}
        """The last view change: view, primary, when, and its cause (joined, left,
        excluded members; or why the primary view was lost)."""
        self.last_gap: dict[str, Any] | None = None
        """The last ``gap`` frame sent to the clients, repeated in ``welcome``."""
        self.state = StateFile(config.node.state_dir, self.node_id)
        self._unwritten_state: bytes | None = None
        """The newest ``Node.state_to_persist`` record while it is not on disk: until it
        is, nothing this daemon would send goes out (``_persist_state``)."""
        self.state_error: str | None = None
        """Why the state file cannot be written (health, status); ``None`` when it can."""
        self._state_failing_since = 0.0
        self._state_retry_at = 0.0
        self._state_retry: asyncio.TimerHandle | None = None
        self._closed = False
        """``close_resources`` ran: the sockets are closed, nothing more is pumped."""
        self.log_errors: list[str] = []
        """Why log files cannot be written, as of the last tick (empty: they can)."""
        self.own_outstanding = 0  # own application messages in the engine, not delivered here
        self.queue = SubmitQueue(self.limits.submit_queue_bytes)
        self.ledger = Ledger()
        self.last_delivery = self.started
        self.pending_since: float | None = None
        """Since when own messages or DAG vertices wait (health; ``None``: none do)."""
        self.notifier = Notifier({} if embedded else environ)
        self.node: Node | None = None
        self.api = ApiServer(config.api, self, AccessPolicy.from_config(config.access))
        self.groups = Groups(self.node_id, self.api.members_of, self, agreed=False)
        """Group membership (``amcast.daemon.groups``); agreed once the engine has views."""
        self.transport: AnyTransport | None = None
        self.federation: Federation | None = None
        """``[federation]``: this daemon's member of the federation
        (``amcast.daemon.federation``), else ``None``."""
        self.metrics = Metrics(self._scrape_snapshot)
        self.ntail_histogram = self.metrics.ntail.labels(self.variant)
        """The variant's child of the Ntail histogram, looked up once: ``labels`` costs
        more than the ``observe`` of each delivered vertex."""
        self.metrics_port: int | None = None
        self.dlog: DeliveryLog | None = None
        self.trace: DatagramTrace | None = None
        """``logs.trace``: the latency trace (``amcast.daemon.trace``), else ``None``."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._pump_scheduled = False
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: float | None = None
        self._stop = asyncio.Event()
        self.ready = asyncio.Event()  # set once serving (tests, embedding)
        self.in_primary_view = asyncio.Event()  # set while in a primary view
        self.waits = shutdown.Waits()
        self._periodic: list[asyncio.TimerHandle] = []
        self.metrics_snapshot: MetricsSnapshot | None = None
        """The latest snapshot taken on the loop: what a scrape serves if the loop is busy."""
        self.stopping = False

    def now(self) -> float:
        return time.monotonic() + self._clock_offset

    def wall_time(self) -> float:
        """This host's wall clock (Unix seconds)."""
        return self._wall_clock()

    @property
    def phi(self) -> float | None:
        """The threshold the ordering engine uses (``Node.phi``), once the node exists."""
        return None if self.node is None else self.node.phi

    # ---- lifecycle ---------------------------------------------------------------
    async def run(self) -> int:
        loop = self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        cfg = self.config
        self.api.check()  # e.g. another daemon serves this socket: touch nothing of it
        self.state.prepare()
        self.node = self._node_factory(
            self.node_config, node_id=self.node_id, members=list(cfg.node.members),
            rng=self.rng, now=self.now(), durable=self.state.load(),
            incarnation_floor=int(self._wall_clock() * 1000),
        )
        self._follow_wall_clock()
        self.core = dict(self.node.core)
        self.groups = Groups(self.node_id, self.api.members_of, self,
                             agreed=hasattr(self.node, "membership"),
                             part_bytes=max(1024, self.envelope_bytes // 2))
        self.dlog = DeliveryLog(
            cfg.logs.dir, self.node_id, rotate_bytes=cfg.logs.rotate_bytes,
            keep=cfg.logs.rotate_keep, deliveries=cfg.logs.delivery_log,
            incarnation=self.node.incarnation,
        )
        self.dlog.start(members=self.members, ts=self.now())
        if cfg.logs.trace:
            self.trace = DatagramTrace(cfg.logs.dir, rotate_bytes=cfg.logs.rotate_bytes,
                                       keep=cfg.logs.rotate_keep, peek=self.node.peek)
        try:
            self.transport = open_transport(cfg.network, self.node_id,
                                            functools.partial(observe.log_unresolved, self))
            self.transport.on_send_error = functools.partial(observe.log_send_error, self)
            self.core["io"] = self.transport.io
            self.metrics.set_core(self.core)
            if cfg.federation.enabled:
                self.federation = Federation(
                    cfg.federation, self.node_id,
                    None if self.node_config.insecure else self.node_config.keyring, self,
                    wall_clock=self._wall_clock)
            ensure_fd_limit(cfg.api.max_clients + cfg.api.max_pending_hellos)
            await self.api.start()
            self._take_metrics_snapshot()
            if cfg.metrics.enabled:
                self.metrics_port = await self.metrics.serve(cfg.metrics)
        except BaseException:
            self.close_resources()
            raise
        # Everything imported and built so far lives as long as the daemon: move it out of
        # the collector's reach, so a full collection walks only what the traffic made
        # (gen-2 pauses of 10-20 ms at start-up, now spared on the delivery path).
        if not self.embedded:  # an application's own objects are not the daemon's to pin
            gc.freeze()
        self.transport.start(loop, self._on_datagrams)
        if self.federation is not None:
            self.federation.start(loop)
            self._every(cfg.federation.tick_s, self.federation.tick)
        if not self.embedded:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self.request_stop, sig.name)
            if self._reload is not None:
                loop.add_signal_handler(signal.SIGHUP, self.reload)
        self._every(cfg.logs.snapshot_interval_s, self.snapshot_metrics)
        self._every(TICK_S, self._tick)
        if cfg.systemd.watchdog and self.notifier.watchdog_interval_s:
            self._every(self.notifier.watchdog_interval_s, self.notifier.watchdog)
        self.request_pump()
        log.info(
            "amcastd ready", node=self.node_id, members=self.members,
            transport=cfg.network.transport,
            group=f"{cfg.network.group}:{cfg.network.port}", interface=cfg.network.interface,
            socket=self.api.path, metrics_port=self.metrics_port, log_dir=cfg.logs.dir,
            rcvbuf=self.transport.rcvbuf, variant=self.variant, phi=self.phi, core=self.core,
            max_message_bytes=self.limits.max_message_bytes,
        )
        observe.log_sealing(self)
        if (stale := extension.stale()) is not None:
            log.warning("native extension not used", node=self.node_id, reason=stale)
        self.notifier.ready(f"node {self.node_id} serving {self.api.path}")
        self.ready.set()
        await self._stop.wait()
        await shutdown.shutdown(self)
        return 0

    def reload(self) -> None:
        """SIGHUP: re-read the configuration (``amcast.daemon.reload``)."""
        assert self._reload is not None
        reload.reload(self, self._reload)

    def request_stop(self, why: str = "request") -> None:
        if not self._stop.is_set():
            log.info("amcastd stopping", node=self.node_id, reason=why)
            self._stop.set()

    def close_resources(self) -> None:
        self._closed = True  # a pump already scheduled finds nothing to send on
        for handle in self._periodic:
            handle.cancel()
        for handle in (self._timer, self._state_retry):
            if handle is not None:
                handle.cancel()
        if self._loop is not None and not self.embedded:
            for sig in (signal.SIGTERM, signal.SIGINT):
                self._loop.remove_signal_handler(sig)
            self._loop.remove_signal_handler(signal.SIGHUP)
        if self.transport is not None:
            self.transport.close()
        if self.federation is not None:
            self.federation.close()
        self.api.close_listener()
        self.metrics.close()
        if self.dlog is not None:
            self.dlog.close()
        if self.trace is not None:
            self.trace.close()
        self.notifier.close()

    # ---- periodic ------------------------------------------------------------------
    def _every(self, interval: float, fn: Any) -> None:
        """Call ``fn`` every ``interval`` seconds on the loop until the daemon closes."""
        assert self._loop is not None
        loop = self._loop

        def tick() -> None:
            try:
                fn()
            except Exception:  # counted; the next tick is armed whatever happened
                self._failed("periodic_error", getattr(fn, "__name__", "periodic"))
            finally:
                self._periodic[index] = loop.call_later(interval, tick)

        index = len(self._periodic)
        self._periodic.append(loop.call_later(interval, tick))

    def _tick(self) -> None:
        """Periodic, on the loop: health bookkeeping, group requests that could not be
        ordered for ``health.stall_after_s`` (answered ``pending``), a fresh metrics
        snapshot."""
        self.groups.expire(self.now(), self.config.health.stall_after_s)
        observe.check_logs(self)
        now = time.monotonic()
        self.api.check_readers(now)
        self.api.check_frames(now)
        self._follow_wall_clock()
        for notice in self.refusals.update(self.counters.drops, now):
            log.warning("datagrams refused: the sender and this daemon are not configured "
                        "alike", node=self.node_id, reason=notice.reason, count=notice.count,
                        check=notice.cause)
        self._take_metrics_snapshot()

    def _follow_wall_clock(self) -> None:
        """Send times are stamped and checked on the wall clock (replay protection):
        follow its steps, which the monotonic engine clock does not see."""
        node = self.node
        if node is not None and hasattr(node, "wall_offset"):
            node.wall_offset = self._wall_clock() - self.now()

    # ---- inputs --------------------------------------------------------------------
    def _on_datagrams(self, datagrams: list[bytes]) -> None:
        node = self.node
        assert node is not None
        now = self.now()
        if self.trace is not None:
            self.trace.received(now, datagrams)
        receive = node.receive_datagram
        renewed_only = True  # every datagram only renewed a sender's liveness: no pump
        for data in datagrams:
            try:
                if not receive(data, now):
                    renewed_only = False
            except Exception:  # the engine promises never to raise here; count if it does
                self._failed("engine_error", "receive_datagram")
                renewed_only = False
        if not renewed_only:
            self.request_pump()

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = None
        assert self.node is not None
        try:
            self.node.handle_timer(self.now())
        except Exception:
            self._failed("engine_error", "handle_timer")
        self._pump()

    def send(
        self, conn: ClientConnection, groups: list[str], service: str, payloads: list[bytes],
        ref: Any = None, clusters: list[str] | None = None,
    ) -> str | None:
        """Accept a send frame whole (``None``) or refuse it whole (an error code);
        ``clusters`` other than this daemon's: a cross-cluster send
        (``amcast.daemon.federation``)."""
        if self.stopping:
            return "shutting_down"
        fed = self.federation
        if clusters is not None and (fed is None or not fed.is_local(clusters)):
            return self._send_global(conn, groups, payloads, clusters, ref)
        level = LEVELS[service]
        cid = conn.id
        total = sum(map(len, payloads))
        if total + 8 * len(payloads) <= self.envelope_bytes:
            parts = [(sp.encode_envelope(cid, groups, payloads), len(payloads), total)]
        else:
            parts = [
                (sp.encode_envelope(cid, groups, part), len(part), sum(map(len, part)))
                for part in sp.split_payloads(payloads, self.envelope_bytes)
            ]
        queue = self.queue
        if queue and not queue.fits(sum(queue.cost(p[0]) for p in parts)):
            return "overloaded"
        entry = self.ledger.accepted(cid, ref, len(payloads))
        if self.trace is not None:
            self.trace.client_frame(self.now(), cid, len(payloads))
        self.counters.messages_accepted += len(payloads)
        if self.pending_since is None:  # health: waiting starts now
            self.pending_since = self.now()
        for envelope, count, nbytes in parts:
            item = (envelope, level, count, nbytes, entry, cid)
            if queue:
                queue.push(item)
            elif not self._submit(item):
                queue.push(item)  # an empty queue holds any one frame (config checks)
                self.counters.backpressure_events += 1
                self.api.pause_sends()
        self.request_pump()
        return None

    def _send_global(self, conn: ClientConnection, groups: list[str],
                     payloads: list[bytes], clusters: list[str], ref: Any = None) -> str | None:
        fed = self.federation
        if fed is None:
            return "unknown_cluster"
        refused = fed.refusal(groups[0], payloads, clusters)
        if refused is not None:
            return refused
        queue = self.queue
        if queue and not queue.fits(sum(map(len, payloads)) + 256 * len(payloads)):
            return "overloaded"
        self.counters.messages_accepted += len(payloads)
        refused = fed.multicast(conn.id, groups[0], payloads, clusters, ref)
        self.request_pump()
        return refused

    def submit_federation(self, envelope: bytes) -> None:
        """A federation record to multicast ``safe`` in this cluster's order, behind the
        clients' envelopes (never refused: the federation bounds what it has in flight)."""
        item: Item = (envelope, ServiceLevel.SAFE, 0, 0, None, -1)
        if self.queue:
            self.queue.push(item)
        elif not self._submit(item):
            self.queue.push(item)
            self.counters.backpressure_events += 1
            self.api.pause_sends()
        self.request_pump()

    def _submit(self, item: Item) -> bool:
        """Hand one envelope to the engine; ``False`` when its window is full."""
        assert self.node is not None
        try:
            self.node.submit(item[0], self.now(), service=item[1])
        except BackpressureError:
            return False
        except ClientError as exc:  # cannot happen: the engine's limit is derived from ours
            self._engine_refused(item, exc)
            return True
        c = self.counters
        c.messages_sent += item[2]
        c.message_bytes_sent += item[3]
        self.own_outstanding += item[2]
        return True

    def _engine_refused(self, item: Item, exc: ClientError) -> None:
        self.counters.drops["engine_refused"] += 1
        log.error("the engine refused an accepted envelope", node=self.node_id,
                  code=exc.code, detail=exc.detail, bytes=len(item[0]))
        entry = item[4]
        if entry is None:
            return  # a control envelope: the next view's snapshot carries its change
        self.ledger.withdraw(entry, item[2])
        conn = self.api.clients.get(item[5])
        if conn is not None:
            conn.fail(exc.code, f"the engine refused {item[2]} message(s): {exc.detail}",
                      ref=entry.ref)

    def _drain_queue(self) -> None:
        queue = self.queue
        while queue:
            if not self._submit(queue.head()):
                return
            queue.pop()
        if not self.stopping:
            self.api.resume_sends()

    def forget_client(self, client_id: int) -> None:
        self.ledger.forget(client_id)
        self.groups.disconnect(client_id, view=self.view_id, position=self.position)

    # ---- group membership (amcast.daemon.groups) -------------------------------------
    def group_request(self, conn: ClientConnection, kind: str, groups: list[str], ref: Any,
                      watch: bool) -> None:
        """A client's ``join``/``leave``: answered when it takes effect in the total order
        (at once without agreed membership)."""
        self.groups.request(conn.id, conn.name, kind, groups, ref, watch,
                            view=self.view_id, position=self.position, now=self.now())
        self.request_pump()

    def submit_control(self, envelope: bytes) -> None:
        """A group-membership control envelope to multicast ``agreed``, in order with the
        clients' envelopes (behind the submit queue; never refused)."""
        item: Item = (envelope, ServiceLevel.AGREED, 0, 0, None, -1)
        if self.queue:
            self.queue.push(item)
        elif not self._submit(item):
            self.queue.push(item)
            self.counters.backpressure_events += 1
            self.api.pause_sends()
        self.request_pump()

    def to_client(self, client: int, frame: dict[str, Any]) -> None:
        conn = self.api.clients.get(client)
        if conn is not None:
            conn.reply(frame)

    # ---- the pump ------------------------------------------------------------------
    def request_pump(self) -> None:
        if not self._pump_scheduled and self._loop is not None:
            self._pump_scheduled = True
            self._loop.call_soon(self._pump)

    def _pump(self) -> None:
        self._pump_scheduled = False
        node = self.node
        transport = self.transport
        if node is None or transport is None or self._closed:
            return
        known_at: tuple[float | None] | None = None
        try:
            if self.queue:
                self._drain_queue()
            for _ in range(8):  # events can free window space, which can submit more
                # each engine call guarded on its own: one failing loses none of the others
                try:
                    # A timer due now is handled here, before the sends and before the
                    # deliveries wake any client: the armed one, or one the input made
                    # due now (a receiver's ack, ``quiet_ack_delay`` = 0), so the ack
                    # leaves before the deliveries' writes and does not wait a loop turn.
                    at = node.next_timer()
                    if at is not None and at <= self.now():
                        node.handle_timer(self.now())
                except Exception:
                    self._failed("engine_error", "timer")
                try:
                    out = node.datagrams_to_send()
                    record = node.state_to_persist()
                    if record is not None:  # supersedes an older record still unwritten
                        self._unwritten_state = record
                    # durable before anything of this step (or a later one) is sent
                    if self._unwritten_state is not None and not self._persist_state():
                        if out:  # as if the network had lost them: the protocols resend
                            self.counters.drops["state_unwritable"] += len(out)
                        out = []
                    if out:
                        if self.trace is None:
                            transport.send(out)
                        else:  # stamped as handed to the kernel, recorded after
                            sent_at = self.now()
                            transport.send(out)
                            self.trace.sent(sent_at, out)
                except Exception:
                    self._failed("engine_error", "datagrams_to_send")
                try:
                    events = node.events()
                except Exception:
                    self._failed("engine_error", "events")
                    events = []
                if not events:
                    at = node.next_timer()
                    if at is None or at > self.now():
                        known_at = (at,)  # nothing changed since: _arm_timer needs no new call
                        break
                    try:  # due now: handle it and go round once more
                        node.handle_timer(self.now())
                    except Exception:
                        self._failed("engine_error", "timer")
                    continue
                for ev in events:
                    try:
                        kind = type(ev)
                        if kind is BatchDelivered:
                            fanout.deliver_batch(self, ev)
                        elif kind is DatagramDropped:
                            self.counters.drops[str(ev.reason)] += 1
                        elif kind is BackpressureReleased:
                            if self.queue:
                                self._drain_queue()
                        elif kind is BackpressureApplied:
                            pass  # counted when a submit is refused (see ``send``)
                        else:
                            self._other_event(ev)
                    except Exception:
                        self._failed("event_handler_error", type(ev).__name__)
        except Exception:
            self._failed("engine_error", "pump")
        finally:
            self.waits.after_pump(node, self.own_outstanding, bool(self.queue))
            self._arm_timer(known_at)

    def _persist_state(self) -> bool:
        """Write the unwritten state record; ``False`` while it cannot be (then this step
        sends nothing). A failing write is tried again every ``STATE_RETRY_S``, by a pump
        of its own if no input comes."""
        record = self._unwritten_state
        assert record is not None and self._loop is not None
        now = self.now()
        if now < self._state_retry_at:
            # a retry due later than the timer armed for an earlier failure (a newer
            # record failed since): the pump that timer makes lands here, so arm again
            if self._state_retry is None:
                self._state_retry = self._loop.call_later(self._state_retry_at - now,
                                                          self._retry_state)
            return False
        try:
            self.state.write(record)
        except OSError as exc:
            if self.state_error is None:
                self._state_failing_since = now
                log.error("cannot write the membership state file: this daemon sends "
                          "nothing until it can (the other members exclude it after "
                          "their suspicion timeout)", node=self.node_id,
                          path=str(self.state.path), error=exc.strerror or str(exc),
                          retry_every_s=STATE_RETRY_S)
            self.state_error = f"{self.state.path}: {exc.strerror or exc}"
            self.counters.state_write_failures += 1
            self._state_retry_at = now + STATE_RETRY_S
            if self._state_retry is None:
                self._state_retry = self._loop.call_later(STATE_RETRY_S, self._retry_state)
            return False
        self._unwritten_state = None
        if self.state_error is not None:
            log.warning("the membership state file is written again: sending resumes",
                        node=self.node_id, path=str(self.state.path),
                        after_s=round(now - self._state_failing_since, 3),
                        failed_writes=self.counters.state_write_failures)
            self.state_error = None
        return True

    def _retry_state(self) -> None:
        self._state_retry = None
        if self._unwritten_state is not None:
            self.request_pump()

    def _arm_timer(self, known_at: tuple[float | None] | None = None) -> None:
        assert self.node is not None and self._loop is not None
        try:
            at = self.node.next_timer() if known_at is None else known_at[0]
        except Exception:
            self._failed("engine_error", "next_timer")
            at = self.now() + TIMER_RETRY_S
        if at == self._timer_at:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = at
        if at is None:
            self._timer = None
            return
        now = self.now()
        delay = at - now
        if delay >= LONG_TIMER_S:
            slot = math.ceil(at / TIMER_SLACK_S) * TIMER_SLACK_S
            delay = slot - now + LOOP_TICK_S
        self._timer = self._loop.call_later(max(0.0, delay), self._on_timer)

    def _failed(self, reason: str, where: str) -> None:
        """Count (and log, sparsely) an exception caught while handling one input/event."""
        observe.failed(self, reason, where)

    # ---- outputs (amcast.daemon.fanout) ---------------------------------------------
    def _other_event(self, ev: Any) -> None:
        """Any event but deliveries, drops and backpressure (``membership_event``)."""
        fanout.membership_event(self, ev)
        if self.federation is not None:
            if type(ev) is ViewInstalled:
                self.federation.on_view(ev.members, ev.joined)
            elif type(ev) is OrderGap:
                self.federation.on_gap()

    def report_in_doubt(self, ev: MessagesInDoubt) -> None:
        """Own messages the engine gave up on, to their clients (``report_in_doubt``)."""
        fanout.report_in_doubt(self, ev)

    # ---- status and health (amcast.daemon.health) -------------------------------------
    def welcome(self) -> dict[str, Any]:
        """The frame a connecting client gets first."""
        return health.welcome(self)

    def health(self) -> dict[str, Any]:
        """``{"ok", "problems", "warnings"}`` (``amcast.daemon.health``)."""
        return health.health(self)

    def membership_status(self) -> dict[str, Any]:
        """``view``, ``peers`` and ``quorum``, as the ``status`` reply has them."""
        return health.membership_status(self)

    def status(self) -> dict[str, Any]:
        """The ``status`` reply."""
        return health.status(self)

    def datagrams_by_kind(self) -> dict[str, dict[str, int]]:
        """The engine's datagram counters by kind, sent and received."""
        return health.datagrams_by_kind(self)

    # ---- the rest of the API's backend (amcast.daemon.api.Backend) ----------------------
    def count_client_error(self, code: str) -> None:
        self.counters.client_errors[code] += 1

    def count_disconnect(self, reason: str) -> None:
        self.counters.clients_disconnected[reason] += 1

    def count_denied(self, request: str) -> None:
        self.counters.requests_denied[request] += 1

    def flow_hold(self, on: bool) -> None:
        """A client reads slower than the group delivers (``ApiServer.reader_behind``):
        hold the engine's releases until it catches up, so the senders slow down."""
        node = self.node
        if node is None:
            return
        if on:
            self.counters.flow_holds += 1
        node.hold_deliveries(on, self.now())
        self.request_pump()

    # ---- metrics and logs (amcast.daemon.observe) --------------------------------------
    def _take_metrics_snapshot(self) -> MetricsSnapshot:
        """Copy what a scrape reports (on the event loop only)."""
        return observe.take_metrics_snapshot(self)

    def _scrape_snapshot(self) -> MetricsSnapshot:
        """The collector's source (``scrape_snapshot``): never reads live state from
        the scrape thread."""
        return observe.scrape_snapshot(self, self._loop, self._loop_thread)

    def snapshot_metrics(self) -> None:
        """The periodic metrics record of the delivery log."""
        observe.log_snapshot(self)
