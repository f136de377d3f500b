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

Health (``status`` reply, ``amcast_healthy``): when own messages or DAG vertices are
pending and nothing was delivered for ``health.stall_after_s``, the daemon cannot order
and says so. Metrics: the scrape thread reads only ``MetricsSnapshot`` objects built on
the event loop (``amcast.daemon.metrics``).

The clock handed to the engine is ``time.monotonic()`` shifted once at start-up onto
Unix time, so it never jumps and ``send_ts`` reads as wall-clock seconds in the logs.

Shutdown (SIGTERM/SIGINT): systemd ``STOPPING=1``, stop accepting (the socket file is
removed), pause client sends, keep pumping until this node's accepted messages are
delivered locally or ``shutdown.grace_s`` passes, report each send frame whose messages
this daemon did not deliver (``undelivered``, from the ledger), tell clients
``shutting_down`` (their queued deliveries are flushed first), close the multicast
sockets, write a last metrics snapshot and close the logs.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import gc
import math
import random
import signal
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import structlog
from amcast.daemon.access import AccessPolicy
from amcast.daemon.api import ApiServer, ClientConnection, ensure_fd_limit
from amcast.daemon.config import DaemonConfig
from amcast.daemon.groups import Groups
from amcast.daemon.keyfile import load_keyring
from amcast.daemon.logs import DeliveryLog, StderrLogger
from amcast.daemon.metrics import (
    Counters,
    Metrics,
    MetricsSnapshot,
    engine_kinds,
    engine_stats,
)
from amcast.daemon.notify import Notifier
from amcast.daemon.redundant import RedundantTransport
from amcast.daemon.refusals import RECENT_S, RefusalWatch
from amcast.daemon.state import StateFile
from amcast.daemon.submitq import Entry, Ledger, SubmitQueue
from amcast.daemon.trace import DatagramTrace
from amcast.daemon.transport import MulticastTransport, open_transport
from amcast.daemon.unicast import UnicastTransport
from amcast.protocols.errors import BackpressureError, ClientError
from amcast.protocols.events import (
    BackpressureApplied,
    BackpressureReleased,
    BatchDelivered,
    DatagramDropped,
    FlushCompleted,
    JoinerHeldBack,
    JoinRefused,
    MemberSuspected,
    MessagesInDoubt,
    NodeIdClaimed,
    OrderGap,
    PeerClockRefused,
    QuorumLost,
    ServiceLevel,
    ViewChangeBlocked,
    ViewInstalled,
    ViewProposed,
)
from amcast.protocols.membership.quorum import has_quorum
from amcast.protocols.node import Node

from amcast import socket_protocol as sp

log = structlog.get_logger("amcastd")
LEVELS = {level.value: level for level in ServiceLevel}
TICK_S = 1.0  # health bookkeeping and the periodic metrics snapshot
ID_CLAIM_SHOWN_S = 600.0
"""How long health warns of another daemon heard claiming this node's id."""
SCRAPE_WAIT_S = 1.0  # a scrape waits this long for a fresh snapshot from the loop
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
OUTCOMES = {True: "not_delivered", False: "unknown"}
"""The ``outcome`` of an ``undelivered`` error with ``count``: the primary component did
not deliver them (beyond the cut this daemon learned), or whether it did is unknown
(``MessagesInDoubt.cut_known``)."""
Item = tuple[bytes, ServiceLevel, int, int, Entry | None, int]
"""A queued envelope: (envelope, service, messages, payload bytes, ledger entry, client);
a control envelope (group membership) has no messages, no entry and client -1."""


def _messages_per_client(envelopes: tuple[bytes, ...]) -> dict[int, int]:
    """How many application messages of each client ``envelopes`` carry."""
    counts: dict[int, int] = {}
    for payload in envelopes:
        env = sp.decode_envelope(payload)
        if env is not None:
            counts[env[0]] = counts.get(env[0], 0) + len(env[2])
    return counts


class Daemon:
    def __init__(
        self, config: DaemonConfig, *, environ: Mapping[str, str] | None = None,
        node_factory: Callable[..., Node] = Node,
        reload: Callable[[], DaemonConfig] | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        """``wall_clock``: this host's wall clock (Unix seconds), which stamps and checks
        datagram send times (replay protection) and floors incarnations; the engine's
        clock is monotonic."""
        self.config = config
        self._reload = reload
        self.node_id = config.node.id
        self._wall_clock = wall_clock
        self._clock_offset = wall_clock() - time.monotonic()
        self.started = self.now()
        self.node_config = config.node_config()
        self.limits = config.limits(self.node_config)
        self.variant = str(self.node_config.rule)
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
        """``_close_resources`` ran: the sockets are closed, nothing more is pumped."""
        self._log_errors: list[str] = []
        """Why log files cannot be written, as of the last tick (empty: they can)."""
        self.own_outstanding = 0  # own application messages in the engine, not delivered here
        self.queue = SubmitQueue(self.limits.submit_queue_bytes)
        self.ledger = Ledger()
        self.last_delivery = self.started
        self._pending_since: float | None = None
        self.notifier = Notifier(environ)
        self.node: Node | None = None
        self.api = ApiServer(config.api, self, AccessPolicy.from_config(config.access))
        self.groups = Groups(self.node_id, self.api.members_of, self, agreed=False)
        """Group membership (``amcast.daemon.groups``); agreed once the engine has views."""
        self.transport: MulticastTransport | UnicastTransport | RedundantTransport | None = None
        self.metrics = Metrics(self._scrape_snapshot)
        self._ntail = self.metrics.ntail.labels(self.variant)
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
        self._flushed: asyncio.Event | None = None
        self._sent: asyncio.Event | None = None  # stopping: every accepted message is in a vertex
        self._left: asyncio.Event | None = None
        self._periodic: list[asyncio.TimerHandle] = []
        self._metrics_snapshot: MetricsSnapshot | None = None
        self.stopping = False

    def now(self) -> float:
        return time.monotonic() + self._clock_offset

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
            self.transport = open_transport(cfg.network, self.node_id, self._log_unresolved)
            self.transport.on_send_error = self._log_send_error
            ensure_fd_limit(cfg.api.max_clients + cfg.api.max_pending_hellos)
            await self.api.start()
            self._take_metrics_snapshot()
            if cfg.metrics.enabled:
                self.metrics_port = await self.metrics.serve(cfg.metrics)
        except BaseException:
            self._close_resources()
            raise
        # Everything imported and built so far lives as long as the daemon: move it out of
        # the collector's reach, so a full collection walks only what the traffic made
        # (gen-2 pauses of 10-20 ms at start-up, now spared on the delivery path).
        gc.freeze()
        self.transport.start(loop, self._on_datagrams)
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_stop, sig.name)
        if self._reload is not None:
            loop.add_signal_handler(signal.SIGHUP, self.reload)
        self._every(cfg.logs.snapshot_interval_s, self._snapshot)
        self._every(TICK_S, self._tick)
        if cfg.systemd.watchdog and self.notifier.watchdog_interval_s:
            self._every(self.notifier.watchdog_interval_s, self.notifier.watchdog)
        self._request_pump()
        log.info(
            "amcastd ready", node=self.node_id, members=self.members,
            transport=cfg.network.transport,
            group=f"{cfg.network.group}:{cfg.network.port}", interface=cfg.network.interface,
            socket=self.api.path, metrics_port=self.metrics_port, log_dir=cfg.logs.dir,
            rcvbuf=self.transport.rcvbuf, variant=self.variant, phi=self.phi,
            max_message_bytes=self.limits.max_message_bytes,
        )
        self._log_sealing()
        self.notifier.ready(f"node {self.node_id} serving {self.api.path}")
        self.ready.set()
        await self._stop.wait()
        await self._shutdown()
        return 0

    def _log_unresolved(self, node: int, host: str) -> None:
        log.warning("peer address does not resolve (yet): its datagrams wait for it",
                    node=self.node_id, peer=node, host=host,
                    retry_every_s=self.config.network.resolve_interval_s)

    def _log_sealing(self) -> None:
        keys = self.node_config.keys()
        if keys is None:
            log.warning(
                "INSECURE: protocol.insecure = true; datagrams are neither encrypted nor "
                "authenticated: anyone on the network can read, forge and replay them",
                node=self.node_id)
        else:
            log.info("datagrams sealed with AES-256-GCM", node=self.node_id,
                     key_file=self.config.security.key_file, key_ids=list(keys.ids))

    def _reload_keys(self, new: DaemonConfig) -> None:
        """A key rollover: the key file is read again; the engine accepts every key of
        the new ring at once and moves its sending key as the peers advertise theirs."""
        node = self.node
        if self.config.insecure or new.insecure or node is None:
            return
        try:
            keys = load_keyring(new.security.key_file)
            if keys == self.node_config.keys():
                return
            node.set_keyring(keys, self.now())
        except Exception as exc:
            log.error("reload: key file refused, keeping the running keys", node=self.node_id,
                      error=str(exc))
            return
        self.node_config = dataclasses.replace(self.node_config, keyring=keys, group_key=None)
        log.info("key ring reloaded", node=self.node_id, key_ids=list(keys.ids),
                 sending_with=node.key_status().get("sends_with"))

    def reload(self) -> None:
        """SIGHUP: re-read the configuration; a changed ``[access]`` applies to the
        requests that follow (groups already joined are kept); a changed ``node.members``
        takes effect at the next view change (``Node.reconfigure``), changed
        ``network.peers`` (unicast) and key file at once; any other change needs a restart
        and is only logged. A configuration that does not load is logged and ignored."""
        assert self._reload is not None
        try:
            new = self._reload()
        except Exception as exc:
            log.error("reload failed: keeping the running configuration", node=self.node_id,
                      error=str(exc))
            return
        if new.access != self.config.access:
            self.api.access = AccessPolicy.from_config(new.access)
            self.config = self.config.model_copy(update={"access": new.access})
            log.info("access rules reloaded", node=self.node_id, rules=len(new.access.rules),
                     default=new.access.default)
        old = self.config
        self._reload_keys(new)
        if new.node.members != old.node.members:
            try:
                assert self.node is not None
                self.node.reconfigure(list(new.node.members), self.now())
            except Exception as exc:
                log.error("reload failed: member list refused", node=self.node_id,
                          error=str(exc))
                return
            log.info("member list reloaded", node=self.node_id,
                     old=list(old.node.members), new=list(new.node.members))
            self.config = old.model_copy(update={"node": new.node})
            self._request_pump()
        if (isinstance(self.transport, UnicastTransport | RedundantTransport)
                and new.network.peers != old.network.peers):
            self.transport.set_peers(new.network.peers)  # names: at the next lookup round
            log.info("peer addresses reloaded", node=self.node_id,
                     peers={str(k): v for k, v in new.network.peers.items()})
            self.config = self.config.model_copy(update={
                "network": self.config.network.model_copy(update={"peers": new.network.peers})})
        skip = {"node": {"members"}, "security": {"key_file"}, "network": {"peers"},
                "access": True}
        rest_old = old.model_dump(exclude=skip)
        rest_new = new.model_dump(exclude=skip)
        if rest_old != rest_new:
            changed = sorted(k for k in rest_new if rest_new[k] != rest_old.get(k))
            log.warning("reload: only node.members, network.peers, the key file's keys and "
                        "[access] take effect without a restart",
                        node=self.node_id, changed_sections=changed)

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
        # A graceful leave: hand every accepted message to the view, then say goodbye at
        # once; the view change's flush delivers our last messages here as at the others
        # (no wait for the ordering of each). Without anyone to leave to: wait for them.
        leaving = self._can_leave()
        if leaving:
            self._sent = asyncio.Event()
        waiting = self._sent if self._sent is not None else self._flushed
        self._request_pump()
        if self.own_outstanding > 0 or self.queue:
            try:
                await asyncio.wait_for(waiting.wait(), self.config.shutdown.grace_s)
            except TimeoutError:
                log.warning("shutdown grace expired", node=self.node_id,
                            undelivered_own_messages=self.own_outstanding,
                            unsubmitted_messages=self.queue.messages)
        if leaving:
            await self._leave()
        self.queue.clear()  # never handed to the engine: reported just below
        reported = self._report_undelivered()
        self.api.close_clients("shutting_down", "the daemon is stopping")
        # let the transports flush: clients read their last frames, see EOF and close
        await self.api.wait_closed(self.config.api.close_grace_s)
        self._snapshot()
        self._close_resources()
        c = self.counters
        log.info("amcastd stopped", node=self.node_id, delivered=c.messages_delivered,
                 accepted=c.messages_accepted, own_delivered=c.own_messages_delivered,
                 reported_undelivered=reported)

    def _can_leave(self) -> bool:
        """In a primary view whose other members can go on without us (otherwise there
        is nobody to leave to: our own messages are delivered, then we just stop)."""
        node = self.node
        if node is None or not node.primary or len(self.members) < 2:
            return False
        view = node.view
        rest = [n for n in self.members if n != self.node_id]
        return view is None or has_quorum(rest, view.potential,
                                          self.node_config.expected_votes)

    async def _leave(self) -> None:
        """Leave the group gracefully: the others install a view without us at once
        (no suspicion timeout); give up after ``shutdown.leave_timeout_s``."""
        node = self.node
        assert node is not None
        self._left = asyncio.Event()
        node.leave(self.now())
        self._request_pump()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._left.wait(), self.config.shutdown.leave_timeout_s)
        if node.left:
            log.info("left the group", node=self.node_id, view=self.view_id)
        else:
            log.warning("leave not confirmed before shutdown.leave_timeout_s",
                        node=self.node_id, view=self.view_id)

    def _report_undelivered(self) -> int:
        """``undelivered`` for every send frame of a connected client not delivered here."""
        reported = 0
        for conn in list(self.api.clients.values()):
            for ref, first, count in self.ledger.pending(conn.id):
                reported += count - first
                conn.fail(
                    "undelivered",
                    f"messages {first}..{count - 1} of this send frame were accepted but this "
                    "daemon stopped before delivering them (other members may deliver them)",
                    ref=ref, extra={"first": first},
                )
        self.counters.messages_reported_undelivered += reported
        return reported

    def _close_resources(self) -> None:
        self._closed = True  # a pump already scheduled finds nothing to send on
        for handle in self._periodic:
            handle.cancel()
        for handle in (self._timer, self._state_retry):
            if handle is not None:
                handle.cancel()
        if self._loop is not None:
            for sig in (signal.SIGTERM, signal.SIGINT):
                self._loop.remove_signal_handler(sig)
            self._loop.remove_signal_handler(signal.SIGHUP)
        if self.transport is not None:
            self.transport.close()
        self.api.close_listener()
        self.metrics.close()
        if self.dlog is not None:
            self.dlog.close()
        if self.trace is not None:
            self.trace.close()
        self.notifier.close()

    def _every(self, interval: float, fn: Any) -> None:
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
            self._request_pump()

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
        ref: Any = None,
    ) -> str | None:
        """Accept a send frame whole (``None``) or refuse it whole (an error code)."""
        if self.stopping:
            return "shutting_down"
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
        if self._pending_since is None:  # health: waiting starts now
            self._pending_since = self.now()
        for envelope, count, nbytes in parts:
            item = (envelope, level, count, nbytes, entry, cid)
            if queue:
                queue.push(item)
            elif not self._submit(item):
                queue.push(item)  # an empty queue holds any one frame (config checks)
                self.counters.backpressure_events += 1
                self.api.pause_sends()
        self._request_pump()
        return None

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
        self._request_pump()

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
        self._request_pump()

    def to_client(self, client: int, frame: dict[str, Any]) -> None:
        conn = self.api.clients.get(client)
        if conn is not None:
            conn.reply(frame)

    # ---- the pump ------------------------------------------------------------------
    def _request_pump(self) -> None:
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
                            self._delivered(ev)
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
            if self._flushed is not None and self.own_outstanding <= 0 and not self.queue:
                self._flushed.set()
            if self._sent is not None and not self.queue and node.unsent == 0:
                self._sent.set()
            if self._left is not None and node.left:
                self._left.set()
            self._arm_timer(known_at)

    def _persist_state(self) -> bool:
        """Write the unwritten state record; ``False`` while it cannot be (then this step
        sends nothing). A failing write is tried again every ``STATE_RETRY_S``, by a pump
        of its own if no input comes."""
        record = self._unwritten_state
        assert record is not None and self._loop is not None
        now = self.now()
        if now < self._state_retry_at:
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
            self._request_pump()

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
        drops = self.counters.drops
        drops[reason] += 1
        n = drops[reason]
        if n & (n - 1) == 0:  # the 1st, 2nd, 4th, 8th, ... occurrence
            log.error("exception while handling an event; it was dropped", node=self.node_id,
                      reason=reason, where=where, count=n, exc_info=True)

    # ---- outputs -------------------------------------------------------------------
    def _delivered(self, ev: BatchDelivered) -> None:
        c = self.counters
        ts = self.now()
        if ev.view != self.position_view:  # positions count from 0 in every view
            self.position_view = ev.view
            self.position = 0
        ordered = ev.position is not None
        position = self.position if ordered else None
        service = str(ev.service)
        header = {"t": "deliver", "sender": ev.sender, "seq": ev.seq, "service": service,
                  "position": position, "view": ev.view, "send_ts": ev.send_ts}
        envs: list[list[Any]] = []
        nenvs = 0
        count = 0
        nbytes = 0
        decode = sp.decode_envelope
        own = ev.sender == self.node_id
        ledger = self.ledger
        for p in ev.payloads:
            env = decode(p)
            if env is None:
                control = sp.decode_control(p) if position is not None else None
                if control is None:
                    c.drops["bad_control" if sp.is_control(p) else "bad_envelope"] += 1
                    continue
                if envs:  # split the vertex's deliver frame around the notice
                    c.deliveries_to_clients += self.api.deliver(header, envs)
                    envs = []
                assert position is not None
                self.groups.delivered(ev.sender, control, ev.view, position + count)
                continue
            body = env[2]
            envs.append([env[0], env[1], count, body])
            nenvs += 1
            count += len(body)
            nbytes += sum(map(len, body))
            if own:
                ledger.delivered(env[0], len(body))
        rule = "causal" if ev.rule is None else str(ev.rule)
        if ordered and count:
            self.position += count
            self.last_ordered = (ev.view, self.position - 1)
        if own:
            self.own_outstanding -= count
            c.own_messages_delivered += count
        c.messages_delivered += count
        c.message_bytes_delivered += nbytes
        c.batches_delivered += 1
        c.services[service] += 1
        c.rules[(self.variant, rule)] += 1
        self.last_delivery = ts
        if envs:
            c.deliveries_to_clients += self.api.deliver(header, envs)
        self.metrics.latency.observe(max(0.0, ts - ev.send_ts))
        if ev.ntail is not None:
            self._ntail.observe(ev.ntail)
        if self.dlog is not None and count:
            assert self.node is not None
            self.dlog.delivery(
                view=ev.view, variant=self.variant, phi=self.node.phi, sender=ev.sender,
                seq=ev.seq, position=position, count=count, nbytes=nbytes, service=service,
                activation=ev.activation, rule=rule, ntail=ev.ntail, unseen=ev.unseen,
                nvt=ev.nvt, send_ts=ev.send_ts, ts=ts, envelopes=nenvs,
            )

    def _other_event(self, ev: Any) -> None:
        """Membership events: views to clients and logs; the rest to logs (issue 12
        adds metrics and more client frames)."""
        self.metrics.count_event(self.counters, ev)
        kind = type(ev)
        if kind is ViewInstalled:
            self.view_id = ev.view
            self.members = list(ev.members)
            self.primary = True
            self.join_refused = None
            self.last_change = {"view": ev.view, "primary": True, "at": self.now(),
                                "previous": ev.previous, "joined": list(ev.joined),
                                "left": list(ev.left), "excluded": list(ev.excluded)}
            self.in_primary_view.set()
            self.notifier.status(f"primary view {ev.view} ({len(self.members)} members)")
            if self.dlog is not None:
                self.dlog.view(view=ev.view, members=self.members, previous=ev.previous,
                               joined=ev.joined, left=ev.left, excluded=ev.excluded,
                               ts=self.now())
            self.api.broadcast({
                "t": "view", "view": ev.view, "members": self.members, "primary": True,
                "joined": list(ev.joined), "left": list(ev.left),
                "excluded": list(ev.excluded), "previous": ev.previous,
            })
            self.groups.view_installed(ev.view, ev.members, ev.joined, ev.left, ev.excluded)
            log.info("view installed", node=self.node_id, view=ev.view, members=self.members,
                     joined=list(ev.joined), left=list(ev.left), excluded=list(ev.excluded),
                     previous=ev.previous, phi=ev.phi)
        elif kind is QuorumLost:
            self.primary = False
            self.groups.quorum_lost()
            self.in_primary_view.clear()
            self.last_change = {"view": ev.view, "primary": False, "at": self.now(),
                                "reason": ev.reason, "reachable": list(ev.reachable)}
            self.notifier.status(f"not in a primary view: {ev.reason}")
            if self.dlog is not None:
                self.dlog.lost(view=ev.view, reason=ev.reason, reachable=list(ev.reachable),
                               ts=self.now())
            self.api.broadcast({
                "t": "view", "view": ev.view, "members": list(ev.reachable),
                "primary": False, "reason": ev.reason,
            })
            log.warning("not in a primary view", node=self.node_id, view=ev.view,
                        reason=ev.reason, reachable=list(ev.reachable))
        elif kind is OrderGap:
            # In the units of the deliver frames (application messages), not the
            # engine's: an application transfers state from the last message it saw.
            # The engine's ``after`` is None exactly when this life delivered nothing
            # ordered; one that delivered only control notices delivered no message.
            after = self.last_ordered
            if self.dlog is not None:
                self.dlog.gap(view=ev.view, after=after, ts=self.now())
            self.last_gap = {"t": "gap", "view": ev.view,
                             "after": None if after is None else list(after)}
            self.api.broadcast(self.last_gap)
            log.info("order gap", node=self.node_id, view=ev.view, after=after,
                     engine_after=ev.after)
        elif kind is MemberSuspected:
            log.warning("member suspected", node=self.node_id, member=ev.node, view=ev.view,
                        silent_s=round(ev.silent_s, 3))
        elif kind is ViewProposed:
            log.info("view proposed", node=self.node_id, view=ev.view, members=list(ev.members),
                     ballot=list(ev.ballot), reason=ev.reason)
        elif kind is FlushCompleted:
            log.info("flush done", node=self.node_id, view=ev.view, delivered=ev.delivered,
                     duration_s=round(ev.duration_s, 4))
        elif kind is JoinerHeldBack:
            log.warning("joiner held back: it is heard but answered no view change that "
                        "would take it in; it may not hear this node (a one-way cut, a "
                        "firewall dropping what comes in)", node=self.node_id,
                        member=ev.node, view=ev.view, rounds_missed=ev.missed,
                        hold_s=round(ev.hold_s, 3), renewed_without_round=ev.renewed)
        elif kind is ViewChangeBlocked:
            log.warning("view change blocked: the view proposed again may have been decided "
                        "by the vote of a member not heard from, and no live member holding "
                        "its cut has voted; it goes on once one of the awaited members "
                        "starts again from its state directory (its state says whether it "
                        "voted)", node=self.node_id, view=ev.view, awaited=list(ev.awaited),
                        rounds=ev.rounds, blocked_s=round(ev.blocked_s, 3))
        elif kind is PeerClockRefused:
            log.warning("peer clock out of the replay window: its datagrams are refused as "
                        "stale or future, and it is excluded like a silent member; "
                        "synchronise the clocks (NTP, chrony), or old traffic of it is "
                        "being replayed", node=self.node_id, peer=ev.peer,
                        offset_s=round(ev.offset_s, 3), replay_window_s=ev.window_s)
        elif kind is JoinRefused:
            log.error("join refused", node=self.node_id, member=ev.node, reason=ev.reason,
                      detail=ev.detail, refused_here=ev.local)
            if ev.local:
                self.join_refused = f"{ev.reason}: {ev.detail}"
        elif kind is NodeIdClaimed:
            log.error("another daemon claims this node's id: two daemons were started with "
                      "one node.id; the group refuses the other one while this one is a "
                      "member; stop it, or give it its own id",
                      node=self.node_id, claimed_by_incarnation=ev.incarnation,
                      incarnation=ev.mine)
            self.id_claimed = (ev.incarnation, self.now())
        elif kind is MessagesInDoubt:
            self._report_in_doubt(ev)

    def _report_in_doubt(self, ev: MessagesInDoubt) -> None:
        """Own messages of a view this daemon was excluded from that the primary component
        did not deliver: each client hears which of its messages (``undelivered`` with
        ``first`` and ``count``); they are not sent again. The ledger counts each
        client's messages in send order, so the older ones the primary component did
        deliver (and this daemon never did: they lie in its gap) are retired first."""
        elsewhere = 0
        for cid, count in _messages_per_client(ev.delivered_elsewhere).items():
            # delivered by the primary component while this daemon was away: in its
            # gap, never delivered here; the sender's client hears it per message
            conn = self.api.clients.get(cid)
            for ref, first, n in self.ledger.fail_oldest(cid, count):
                if conn is not None:
                    conn.fail(
                        "undelivered",
                        f"messages {first}..{first + n - 1} of this send frame were "
                        f"delivered by the primary component in view {ev.view} while this "
                        "daemon was away from it; this daemon will not deliver them (they "
                        "lie in its order gap: transfer state from another member)",
                        ref=ref, extra={"first": first, "count": n, "outcome": "delivered"},
                    )
            self.own_outstanding -= count
            elsewhere += count
        if elsewhere:
            log.info("own messages delivered by the primary component, not here",
                     node=self.node_id, view=ev.view, messages=elsewhere)
        if not (ev.payloads or ev.delivered_here):
            return
        reported = 0
        for cid, count in _messages_per_client(ev.payloads).items():
            conn = self.api.clients.get(cid)
            for ref, first, n in self.ledger.fail_oldest(cid, count):
                reported += n
                self.own_outstanding -= n
                if conn is not None:
                    conn.fail(
                        "undelivered",
                        f"messages {first}..{first + n - 1} of this send frame were sent in "
                        f"view {ev.view}, which this daemon was excluded from, and "
                        + ("the primary component did not deliver them" if ev.cut_known else
                           "it could not learn whether the primary component delivered "
                           "them (outcome unknown)")
                        + "; they are not sent again",
                        ref=ref, extra={"first": first, "count": n,
                                        "outcome": OUTCOMES[ev.cut_known]},
                    )
        self.counters.messages_reported_undelivered += reported
        self.counters.drops["own_messages_in_doubt"] += reported + len(ev.delivered_here)
        log.warning("own messages not delivered by the primary component" if ev.cut_known
                    else "own messages of unknown outcome", node=self.node_id,
                    view=ev.view, reported=reported, delivered_here=len(ev.delivered_here))

    def _log_send_error(self, reason: str, hint: str) -> None:
        log.warning("multicast send failed", node=self.node_id, reason=reason, hint=hint)

    # ---- status, health, metrics, snapshots -----------------------------------------
    last_gap: dict[str, Any] | None = None  # the last gap frame sent, for welcome

    def welcome(self) -> dict[str, Any]:
        lim = self.limits
        return {"node": self.node_id, "view": self.view_id, "members": self.members,
                "primary": self.primary, "gap": self.last_gap,
                "max_frame_bytes": lim.max_frame_bytes,
                "max_message_bytes": lim.max_message_bytes}

    def health(self) -> dict[str, Any]:
        """``{"ok", "problems", "warnings"}``: the daemon cannot order when messages are
        pending and nothing was delivered for ``health.stall_after_s``, and so on;
        ``warnings`` say what an operator should act on that does not stop this daemon
        (``ok`` reads the problems alone: a readiness probe)."""
        problems: list[str] = []
        warnings: list[str] = []
        now = self.now()
        claimed = self.id_claimed
        if claimed is not None and now - claimed[1] < ID_CLAIM_SHOWN_S:
            warnings.append(
                f"another daemon claims this node's id {self.node_id} (incarnation "
                f"{claimed[0]}, {now - claimed[1]:.0f} s ago): the group refuses it while "
                "this daemon is a member; stop it or give it its own node.id")
        overdue = self._view_change_overdue(now)
        if overdue is not None:
            problems.append(overdue)
        dag = int(self.node.stats.pending_dag_size) if self.node is not None else 0
        own = self.own_outstanding + self.queue.messages
        if own > 0 or dag > 0:
            if self._pending_since is None:
                self._pending_since = now
            quiet = now - max(self.last_delivery, self._pending_since)
            if quiet >= self.config.health.stall_after_s:
                problems.append(
                    f"cannot order: {own} own messages and {dag} DAG vertices pending, "
                    f"nothing delivered for {quiet:.1f} s"
                )
        else:
            self._pending_since = None
        if not self.primary and self.node is not None and hasattr(self.node, "membership"):
            clock = self._clock_problem()
            mismatched = self.refusals.recent()
            # the cause first: ``amcast status --health`` prints the first problem
            if self.join_refused is not None:
                problems.append(f"the group refused this daemon's join: {self.join_refused} "
                                "(docs/membership.md, 'Joins, restarts, refusals, reloads')")
            if clock is not None:
                problems.append(clock)
            elif mismatched:
                problems.append(f"datagrams arrive but are refused: "
                                f"{self.refusals.describe(mismatched)} in the last "
                                f"{RECENT_S:g} s")
            why = self.last_change.get("reason") if not self.last_change.get("primary") else None
            problems.append("not in a primary view" + (f" ({why})" if why else "")
                            + ": nothing ordered is delivered")
            last = self.node.quorum.get("last_view")
            if last is not None and last["reachable"] < last["needed"]:
                problems.append(
                    f"the last view (id {last['id']}) listed {last['listed']} nodes "
                    f"{last['nodes']}: "
                    f"{last['needed']} of them must agree on the next view, and only "
                    f"{last['reachable']} can be reached (docs/membership.md, "
                    "'Shrinking the member list')")
            deaf = None if clock is not None or mismatched else self._heard_nobody_for(now)
            if deaf is not None:
                problems.append(
                    f"heard nothing from any other listed member for {deaf:.1f} s: they are "
                    "all down, or this host does not receive the group's traffic (a "
                    "firewall dropping it, no multicast route, the wrong network.interface; "
                    "amcast status on another member shows whether it hears this one)")
        # (engines without membership, and the tests' fakes, have no view changes)
        blocked = getattr(self.node, "view_change_blocked", None)
        if blocked is not None:
            problems.append(
                f"view change blocked for {blocked['blocked_s']:.1f} s: view "
                f"{blocked['view']} may have been decided by node(s) {blocked['awaited']}, "
                "not heard from; start them again from their state directories "
                "(docs/membership.md, 'View changes')")
        if self.state_error is not None:
            problems.append(f"cannot write the membership state file {self.state_error}: "
                            "sending nothing until it can")
        if self.stopping:
            problems.append("shutting down")
        return {"ok": not problems, "problems": problems, "warnings": warnings}

    def _view_change_overdue(self, now: float) -> str | None:
        """A primary view holding members that have been silent for longer than a view
        change takes to exclude them (suspicion, then up to four flush timeouts): the
        view this daemon reports is no longer the group's, whatever blocks the change."""
        if not self.primary or self.node is None or not hasattr(self.node, "peers"):
            return None
        cfg = self.node_config
        limit = 2 * cfg.suspect_timeout + 4 * cfg.flush_timeout
        silent = {n: now - info["last_heard"] for n, info in self.node.peers().items()
                  if info["in_view"] and not info["alive"] and info["last_heard"] is not None
                  and now - info["last_heard"] > limit}
        if not silent:
            return None
        who = ", ".join(f"node {n} for {s:.1f} s" for n, s in sorted(silent.items()))
        return (f"view change overdue: view {self.view_id} still holds members not heard "
                f"from ({who}), beyond the {limit:g} s a view change takes to exclude them")

    def _clock_problem(self) -> str | None:
        """The health problem of peers refused for their send times (``None``: none is):
        which, by how much, and whose clock is likely off when every peer heard is off
        the same way."""
        peers = self.node.peers() if self.node is not None and hasattr(self.node, "peers") else {}
        heard = {n: float(info["clock_offset_s"]) for n, info in peers.items()
                 if info.get("clock_offset_s") is not None}
        refused = {n: heard.get(n, 0.0) for n, info in peers.items() if info.get("clock_refused")}
        if not refused:
            return None
        window = self.node_config.replay_window
        offsets = ", ".join(f"node {n} {off:+.1f} s" for n, off in sorted(refused.items()))
        signs = {off > 0 for off in heard.values()}
        mine = (len(heard) >= 2 and len(heard) == len(refused) and len(signs) == 1)
        return (f"datagrams refused for their send times: the clocks of {offsets} differ "
                f"from this host's by more than protocol.replay_window ({window:g} s)"
                + ("; every other member heard is off the same way, so this host's clock "
                   "is likely the wrong one" if mine else "")
                + ": synchronise the clocks (NTP, chrony), or old traffic is being replayed")

    def _heard_nobody_for(self, now: float) -> float | None:
        """Seconds since any other listed member was last heard (since this daemon
        started, if never), once that is more than twice ``suspect_timeout``; ``None``
        before, or alone in the list."""
        peers = self.node.peers() if self.node is not None and hasattr(self.node, "peers") else {}
        if not peers:
            return None
        heard = [info["last_heard"] for info in peers.values() if info["last_heard"] is not None]
        silent = now - max(heard, default=self.started)
        return silent if silent > 2 * self.node_config.suspect_timeout else None

    def membership_status(self) -> dict[str, Any]:
        """``view`` (id, members, primary, previous, since, last change and its cause),
        ``peers`` (seconds since each listed node was last heard) and ``quorum``."""
        node = self.node
        now = self.now()
        view: dict[str, Any] = {"id": self.view_id, "members": self.members,
                                "primary": self.primary, "last_change": self.last_change}
        peers: list[dict[str, Any]] = []
        quorum: dict[str, Any] = {}
        if node is not None and hasattr(node, "peers"):
            for peer, info in node.peers().items():
                heard = info["last_heard"]
                peers.append({"node": peer, "incarnation": info["incarnation"],
                              "alive": info["alive"], "in_view": info["in_view"],
                              "held_back_s": info.get("held_back_s"),
                              "awaited_s": info.get("awaited_s"),
                              "clock_offset_s": info.get("clock_offset_s"),
                              "clock_refused": bool(info.get("clock_refused")),
                              "last_heard_s": None if heard is None else max(0.0, now - heard)})
            quorum = node.quorum
        return {"view": view, "peers": peers, "quorum": quorum}

    def status(self) -> dict[str, Any]:
        c = self.counters
        engine = engine_stats(self.node.stats if self.node is not None else None)
        t = self.transport
        return {
            "node": self.node_id, **self.membership_status(),
            "transport": self.config.network.transport,
            "variant": self.variant, "phi": self.phi, "now": self.now(),
            "uptime_s": self.now() - self.started, "position": self.position,
            "health": self.health(),
            "clients": [conn.info() for conn in self.api.clients.values()],
            "submit_queue": len(self.queue), "submit_queue_bytes": self.queue.nbytes,
            "limits": {"max_message_bytes": self.limits.max_message_bytes,
                       "max_frame_bytes": self.limits.max_frame_bytes,
                       "submit_queue_bytes": self.limits.submit_queue_bytes},
            "counters": {
                "messages_accepted": c.messages_accepted,
                "messages_sent": c.messages_sent, "messages_delivered": c.messages_delivered,
                "own_messages_delivered": c.own_messages_delivered,
                "message_bytes_sent": c.message_bytes_sent,
                "message_bytes_delivered": c.message_bytes_delivered,
                "batches_delivered": c.batches_delivered,
                "datagrams_sent": t.datagrams_sent if t else 0,
                "datagrams_received": t.datagrams_received if t else 0,
                "backpressure_events": c.backpressure_events,
                "drops": dict(c.drops) | (dict(t.send_errors) if t else {}),
                "client_errors": dict(c.client_errors),
                "clients_disconnected": dict(c.clients_disconnected),
                "requests_denied": dict(c.requests_denied),
            },
            "engine": engine,
            "datagrams": self.datagrams_by_kind(),
            "group_membership": self.groups.status(),
            **({"links": t.link_status()} if isinstance(t, RedundantTransport) else {}),
            "keys": (self.node.key_status() if hasattr(self.node, "key_status")
                     else {"sealed": self.node_config.keys() is not None}),
            "logs": {"dir": self.config.logs.dir,
                     "write_failures": self._log_write_failures(),
                     "errors": [e for f in self._log_files() for e in f.errors]},
        }

    def datagrams_by_kind(self) -> dict[str, dict[str, int]]:
        """``{"sent": {kind: n}, "received": {kind: n}}``: the engine's cumulative datagram
        counters by kind (data, ack_only, heartbeat, nack, repair, membership); empty
        dicts before the engine exists."""
        kinds = engine_kinds(self.node.stats if self.node is not None else None)
        return {"sent": kinds.get("datagrams_sent", {}),
                "received": kinds.get("datagrams_received", {})}

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
        self._request_pump()

    def _tick(self) -> None:
        """Periodic, on the loop: health bookkeeping, group requests that could not be
        ordered for ``health.stall_after_s`` (answered ``pending``), a fresh metrics
        snapshot."""
        self.groups.expire(self.now(), self.config.health.stall_after_s)
        self._check_logs()
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

    def _log_files(self) -> list[Any]:
        return [x for x in (self.dlog, self.trace) if x is not None]

    def _log_write_failures(self) -> int:
        """Refused writes of the log files, and log lines stderr refused."""
        return sum(f.failures for f in self._log_files()) + StderrLogger.refused

    def _check_logs(self) -> None:
        """Count the log writes the disk refused, and say so once when the logs become
        unwritable and once when they are written again (``RotatingJsonl``)."""
        files = self._log_files()
        self.counters.log_write_failures = self._log_write_failures()
        errors = [e for f in files for e in f.errors]
        if errors and not self._log_errors:
            log.error("cannot write the logs: records are lost until it can (deliveries and "
                      "ordering go on)", node=self.node_id, errors=errors,
                      failures=self.counters.log_write_failures)
        elif self._log_errors and not errors:
            log.warning("the logs are written again", node=self.node_id,
                        failures=self.counters.log_write_failures)
        self._log_errors = errors

    def _take_metrics_snapshot(self) -> MetricsSnapshot:
        """Copy what a scrape reports (on the event loop only)."""
        t = self.transport
        snap = MetricsSnapshot.build(
            taken_at=self.now(), counters=self.counters,
            send_errors=t.send_errors if t is not None else {},
            queued=[conn.queued_bytes for conn in self.api.clients.values()],
            submit_queue_frames=len(self.queue), submit_queue_bytes=self.queue.nbytes,
            view=self.view_id, members=len(self.members), healthy=self.health()["ok"],
            transport={
                "datagrams_sent": t.datagrams_sent if t else 0,
                "datagrams_received": t.datagrams_received if t else 0,
                "bytes_sent": t.bytes_sent if t else 0,
                "bytes_received": t.bytes_received if t else 0,
            },
            engine=self.node.stats if self.node is not None else None,
            primary=self.primary, started=self.started,
            peers=self.node.peers() if self.node is not None else None,
            quorum=self.node.quorum if self.node is not None else None,
        )
        self._metrics_snapshot = snap
        return snap

    def _scrape_snapshot(self) -> MetricsSnapshot:
        """The collector's source: on the loop (the endpoint renders there), a fresh
        snapshot; from another thread, ask the loop for one; if it does not answer within
        ``SCRAPE_WAIT_S`` (busy, stopping), serve the latest periodic one. Never reads
        live state from another thread."""
        loop = self._loop
        latest = self._metrics_snapshot
        if loop is None or threading.get_ident() == self._loop_thread:
            return self._take_metrics_snapshot()  # not running yet, or on the loop already
        fut: concurrent.futures.Future[MetricsSnapshot] = concurrent.futures.Future()

        def take() -> None:
            if fut.set_running_or_notify_cancel():
                try:
                    fut.set_result(self._take_metrics_snapshot())
                except BaseException as exc:
                    fut.set_exception(exc)

        try:
            loop.call_soon_threadsafe(take)
            return fut.result(SCRAPE_WAIT_S)
        except Exception:  # loop closed, timed out, or the snapshot failed
            fut.cancel()
            if latest is None:
                raise
            return latest

    def _snapshot(self) -> None:
        if self.trace is not None:
            self.trace.flush()
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
