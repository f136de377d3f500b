"""Shutdown (SIGTERM/SIGINT): leave the group or drain, report, tell clients, close.

The sequence: systemd ``STOPPING=1``, stop accepting (the socket file is removed),
pause client sends, keep pumping until this node's accepted messages are delivered
locally (or, when the others can go on without this daemon, until every accepted message
is in a vertex, then leave gracefully) or ``shutdown.grace_s`` passes, report each send
frame whose messages this daemon did not deliver (``undelivered``, from the ledger),
tell clients ``shutting_down`` (their queued deliveries are flushed first), write a last
metrics snapshot and close everything (``Daemon.close_resources``).

The pump keeps running meanwhile: it is what delivers the last messages. It tells the
shutdown what it waits for through ``Waits.after_pump``, called at the end of every pump.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Protocol

import structlog

from ..protocols.membership.quorum import has_quorum
from ..protocols.node import Node
from ..protocols.node_config import NodeConfig
from .api import ApiServer
from .config import DaemonConfig
from .fanout import report_undelivered
from .federation import Federation
from .metrics import Counters
from .notify import Notifier
from .submitq import Ledger, SubmitQueue

log = structlog.get_logger("amcastd")


class Waits:
    """What a stopping daemon waits for, set by the pump once it holds."""

    def __init__(self) -> None:
        self.flushed: asyncio.Event | None = None
        """Every accepted message of this node is delivered here (nothing queued)."""
        self.sent: asyncio.Event | None = None
        """Leaving: every accepted message is in a vertex (the view's flush delivers it)."""
        self.left: asyncio.Event | None = None
        """The group installed a view without this daemon."""

    def after_pump(self, node: Any, own_outstanding: int, queued: bool) -> None:
        """At the end of every pump: set what now holds."""
        if self.flushed is not None and own_outstanding <= 0 and not queued:
            self.flushed.set()
        if self.sent is not None and not queued and node.unsent == 0:
            self.sent.set()
        if self.left is not None and node.left:
            self.left.set()


class Host(Protocol):
    """What the shutdown reads and drives of the daemon."""

    config: DaemonConfig
    node_config: NodeConfig
    node_id: int
    node: Node | None
    members: list[int]
    view_id: int
    stopping: bool
    own_outstanding: int
    queue: SubmitQueue
    ledger: Ledger
    counters: Counters
    notifier: Notifier
    api: ApiServer
    waits: Waits
    federation: Federation | None

    def now(self) -> float: ...

    def request_pump(self) -> None: ...

    def snapshot_metrics(self) -> None: ...

    def close_resources(self) -> None: ...


async def shutdown(d: Host) -> None:
    """The whole sequence (module docstring); returns with everything closed."""
    d.stopping = True
    d.notifier.stopping()
    d.api.close_listener()
    d.api.pause_sends()
    waits = d.waits
    waits.flushed = asyncio.Event()
    # A graceful leave: hand every accepted message to the view, then say goodbye at
    # once; the view change's flush delivers our last messages here as at the others
    # (no wait for the ordering of each). Without anyone to leave to: wait for them.
    leaving = can_leave(d)
    if leaving:
        waits.sent = asyncio.Event()
    waiting = waits.sent if waits.sent is not None else waits.flushed
    d.request_pump()
    if d.own_outstanding > 0 or d.queue:
        try:
            await asyncio.wait_for(waiting.wait(), d.config.shutdown.grace_s)
        except TimeoutError:
            log.warning("shutdown grace expired", node=d.node_id,
                        undelivered_own_messages=d.own_outstanding,
                        unsubmitted_messages=d.queue.messages)
    if leaving:
        await leave(d)
    d.queue.clear()  # never handed to the engine: reported just below
    reported = report_undelivered(d.api, d.ledger, d.counters)
    if d.federation is not None:
        reported += d.federation.report_shutdown()
    d.api.close_clients("shutting_down", "the daemon is stopping")
    # let the transports flush: clients read their last frames, see EOF and close
    await d.api.wait_closed(d.config.api.close_grace_s)
    d.snapshot_metrics()
    d.close_resources()
    c = d.counters
    log.info("amcastd stopped", node=d.node_id, delivered=c.messages_delivered,
             accepted=c.messages_accepted, own_delivered=c.own_messages_delivered,
             reported_undelivered=reported)


def can_leave(d: Host) -> bool:
    """In a primary view whose other members can go on without us (otherwise there
    is nobody to leave to: our own messages are delivered, then we just stop)."""
    node = d.node
    if node is None or not node.primary or len(d.members) < 2:
        return False
    view = node.view
    rest = [n for n in d.members if n != d.node_id]
    return view is None or has_quorum(rest, view.potential,
                                      d.node_config.expected_votes)


async def leave(d: Host) -> None:
    """Leave the group gracefully: the others install a view without us at once
    (no suspicion timeout); give up after ``shutdown.leave_timeout_s``."""
    node = d.node
    assert node is not None
    left = d.waits.left = asyncio.Event()
    node.leave(d.now())
    d.request_pump()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(left.wait(), d.config.shutdown.leave_timeout_s)
    if node.left:
        log.info("left the group", node=d.node_id, view=d.view_id)
    else:
        log.warning("leave not confirmed before shutdown.leave_timeout_s",
                    node=d.node_id, view=d.view_id)
