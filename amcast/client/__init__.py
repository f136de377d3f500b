"""Python clients of amcastd's unix-socket API (``docs/api.md``): asyncio and blocking.

``Client`` (asyncio, ``await Client.connect(path)``) and ``BlockingClient`` (plain
sockets, ``BlockingClient.connect(path)``) speak the same protocol through one sans-IO
``Session``, with the same calls (the asyncio ones awaited):

- ``join(*groups, members=True)`` then ``wait_for_members(group, n or names)``: the
  start-up barrier. It returns once the group has those members; every message sent
  after it is received by all of them (``wait_for_view(nodes)``: the daemon's primary
  view has those nodes);
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
  primary component did not deliver), ``MembersChange`` (a watched group's members);
  ``view``, ``gap`` and ``members(group)`` keep the last of each; ``self_discard`` (a
  ``connect`` option) drops deliveries of the client's own messages;
- when the connection ends, ``ConnectionClosed`` lists the messages not sent and those of
  unknown outcome.

Modules: ``session`` (protocol state, no I/O), ``aio`` (``Client``), ``blocking``
(``BlockingClient``), ``records`` (what is delivered), ``errors`` (what is raised),
``state`` (``StateTransfer``: state transfer to a member that joins late or missed part
of the order).
"""

from ..protocols.errors import ClientError
from ..socket_protocol import SERVICES
from .aio import (
    DEFAULT_MAX_BATCH_BYTES,
    DEFAULT_MAX_UNCONFIRMED_BYTES,
    DEFAULT_SOCKET,
    DEFAULT_TIMEOUT,
    Client,
)
from .blocking import BlockingClient
from .errors import (
    ClientTimeout,
    ConnectionClosed,
    MessageBatch,
    MessagesRefused,
    Refusal,
    Unreachable,
    WouldBlock,
)
from .records import (
    DeliveredBatch,
    Delivery,
    Event,
    MembersChange,
    OrderGap,
    Undelivered,
    ViewChange,
)
from .session import CLIENT_SERVICES
from .state import StateTransfer

__all__ = [
    "CLIENT_SERVICES",
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
    "StateTransfer",
    "Undelivered",
    "Unreachable",
    "ViewChange",
    "WouldBlock",
]
