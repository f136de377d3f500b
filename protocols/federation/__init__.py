"""The federation layer: atomic multicast across amcast clusters (sans-IO).

Skeen's timestamps with one "process" per cluster, each cluster an amcast cluster whose
own total order (safe service) carries the federation records, so that every member of
a cluster computes the same clock, keys and deliveries (``member.py`` has the theory of
operation; docs/multigroup.md, "In the daemon: the federation layer", the costs).

Interface for the daemon (additions to the brief's interface):

- ``FederationMember(config, node_id, *, joining=False, first_seq=1)``: ``joining``
  for a member entering a running cluster (it gets the state through the order, see
  below); ``first_seq`` the first sequence number of its multicasts (a restarted daemon
  must not reuse ids: pass e.g. wall-clock microseconds).
- ``multicast`` sets ``member.last_id`` to the new message's id; it raises
  ``ValueError`` for an unknown cluster, a Dst of the own cluster only, an oversized
  payload or group, and ``BackpressureError`` when ``max_in_flight`` own messages are
  unacknowledged.
- ``wire.is_record(payload)``: whether a payload delivered by the own order is a
  federation record (records start with ``0xc1 'F'``, datagrams with ``0xc1 'f'``;
  ``0xc1`` never starts a msgpack value, so neither is taken for a client envelope).
- Joiner state: through the order, not the daemon's state transfer. A joining member
  orders ``RecStateRequest`` (in ``on_view``, again from ``tick``); a member with state
  answers with a ``RecState`` record; the joiner installs it and delivers from there.
  ``snapshot()`` / ``FederationMember.restore(config, node_id, data, now)`` also exist
  (restore returns ``(member, outputs)``).
- ``next_deadline()``: when ``tick`` has work next; ``counters``: refusals and
  retransmissions by reason (for metrics).
- ``Stalled`` is repeated every ``stall_after_s`` while a message waits.
- ``Undelivered``: an own multicast not committed within ``deadline_s``, for its
  client, once (outcome ``unknown``: ``member.py``, "Outcomes of own multicasts");
  ``owns(m)`` says whether m is still uncommitted; ``adopt(old, now)`` moves a dropped
  member's uncommitted multicasts to its successor (after an order gap).
"""

from __future__ import annotations

from .batching import batch_sends
from .config import FederationConfig
from .member import FederationMember
from .outputs import (
    Deliver,
    DroppedRemote,
    FedId,
    InFlight,
    OrderLocally,
    Output,
    SendRemote,
    Stalled,
    Undelivered,
)
from .wire import is_record

__all__ = [
    "Deliver",
    "DroppedRemote",
    "FedId",
    "FederationConfig",
    "FederationMember",
    "InFlight",
    "OrderLocally",
    "Output",
    "SendRemote",
    "Stalled",
    "Undelivered",
    "batch_sends",
    "is_record",
]
