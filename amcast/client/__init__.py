"""Python clients of amcastd's unix-socket API (``docs/api.md``): asyncio and blocking.

``Client`` (asyncio, ``await Client.connect(path)``) and ``BlockingClient`` (plain
sockets) speak the same protocol through one sans-IO ``Session``:

- ``send(payload: bytes, groups, service)`` returns the message's *number* (0, 1, ... per
  connection); messages are batched transparently into ``send`` frames whose ``id`` is
  the number of their first message;
- the client keeps a ``sync`` request in flight, so amcastd confirms what it handled; a
  refused message is raised as ``MessagesRefused`` (naming it by number, with its
  payload) by the next ``send``/``flush``/``drain``/``sync``/``close``;
- unconfirmed bytes are bounded (``max_unconfirmed_bytes``, default 8 MiB): past it the
  asyncio ``send()`` raises ``WouldBlock`` (``await drain()``, or ``send_wait``) and the
  blocking one waits; every wait has a timeout (``ClientTimeout``);
- events (``next_event()``), in the daemon's frame order: ``DeliveredBatch`` (deliveries),
  ``ViewChange`` (primary view installed, or lost with a reason), ``OrderGap`` (a
  rejoined daemon missed part of the total order), ``Undelivered`` (own messages the
  primary component did not deliver); ``view`` and ``gap`` keep the last of each;
- when the connection ends, ``ConnectionClosed`` lists the messages not sent and those of
  unknown outcome.

Modules: ``session`` (protocol state, no I/O), ``aio`` (``Client``), ``blocking``
(``BlockingClient``), ``records`` (what is delivered), ``errors`` (what is raised).
"""

from amcast.client.aio import (
    DEFAULT_MAX_BATCH_BYTES,
    DEFAULT_MAX_UNCONFIRMED_BYTES,
    DEFAULT_SOCKET,
    DEFAULT_TIMEOUT,
    Client,
)
from amcast.client.blocking import BlockingClient
from amcast.client.errors import (
    ClientTimeout,
    ConnectionClosed,
    MessageBatch,
    MessagesRefused,
    Refusal,
    Unreachable,
    WouldBlock,
)
from amcast.client.records import (
    DeliveredBatch,
    Delivery,
    Event,
    MembersChange,
    OrderGap,
    Undelivered,
    ViewChange,
)
from amcast.protocols.errors import ClientError
from amcast.socket_protocol import SERVICES

__all__ = [
    "DEFAULT_MAX_BATCH_BYTES",
    "DEFAULT_MAX_UNCONFIRMED_BYTES",
    "DEFAULT_SOCKET",
    "DEFAULT_TIMEOUT",
    "SERVICES",
    "BlockingClient",
    "Client",
    "ClientError",
    "ClientTimeout",
    "ConnectionClosed",
    "DeliveredBatch",
    "Delivery",
    "Event",
    "MembersChange",
    "MessageBatch",
    "MessagesRefused",
    "OrderGap",
    "Refusal",
    "Undelivered",
    "Unreachable",
    "ViewChange",
    "WouldBlock",
]
