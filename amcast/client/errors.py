"""What the Python clients raise, and the records that name the messages concerned.

Every message a client accepts gets a *message number* (``send()`` returns it): 0, 1, 2,
... per connection, in sending order. The errors below name messages by these numbers
(and, where the client still holds them, give the payloads back), so an application can
always tell which of its messages a problem concerns:

- ``MessagesRefused``: the daemon refused these messages (none of them is delivered
  anywhere); raised by the next ``send``/``flush``/``drain``/``sync``/``close``.
- ``WouldBlock``: ``send()`` of the asyncio client found the unconfirmed-bytes bound
  reached; the message was *not* queued (``await drain()`` or use ``send_wait``).
- ``ClientTimeout``: a wait ran out (also a ``TimeoutError``); the connection is usable.
- ``ConnectionClosed``: the connection is over; it lists the messages never written
  (``unsent``: not delivered by anyone), those whose outcome the client cannot know
  (``unknown``) and refusals not yet reported.
- ``Unreachable``: no daemon could be reached at the socket path.

All are ``ClientError`` (``amcast.protocols.errors``) with a ``code`` and a ``detail``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from ..protocols.errors import ClientError


@dataclass(frozen=True, slots=True)
class MessageBatch:
    """Consecutive messages of one ``send`` frame: numbers, groups, service, payloads."""

    messages: range
    """The message numbers."""
    groups: tuple[str, ...]
    """Their destination groups."""
    service: str
    """Their service level."""
    payloads: list[bytes] = field(repr=False)
    """Their payloads, in order (for a retry)."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """One refused ``send`` frame: the daemon's error code and detail, its messages."""

    code: str
    """The daemon's error code (``bad_field``, ``forbidden``, ...: docs/api.md)."""
    detail: str
    """Its explanation, for people."""
    batch: MessageBatch
    """The refused messages."""


def describe(ranges: Iterable[range]) -> str:
    """``"3, 7..9"``: message numbers for people."""
    parts = []
    for r in ranges:
        if len(r) == 1:
            parts.append(str(r.start))
        elif len(r) > 1:
            parts.append(f"{r.start}..{r.stop - 1}")
    return ", ".join(parts) if parts else "none"


def count(ranges: Iterable[range]) -> int:
    """How many message numbers ``ranges`` hold."""
    return sum(len(r) for r in ranges)


class MessagesRefused(ClientError):
    """The daemon refused some messages: ``refusals`` says which, with what code.

    ``code`` and ``detail`` are the first refusal's; ``messages`` lists every refused
    message number, ``payloads`` the refused payloads (same order), for a retry.
    """

    def __init__(self, refusals: list[Refusal]) -> None:
        first = refusals[0]
        n = sum(len(r.batch.messages) for r in refusals)
        super().__init__(
            first.code,
            f"amcastd refused {n} message(s) "
            f"({describe(r.batch.messages for r in refusals)}): {first.detail}",
        )
        self.refusals = refusals

    @property
    def messages(self) -> list[int]:
        """Every refused message number, in order."""
        return [m for r in self.refusals for m in r.batch.messages]

    @property
    def payloads(self) -> list[bytes]:
        """The refused payloads, in the order of ``messages``."""
        return [p for r in self.refusals for p in r.batch.payloads]


class WouldBlock(ClientError):
    """``send()`` refused to queue a message: too many bytes are unconfirmed.

    The message was not queued and has no number. ``await client.drain()`` waits for
    room; ``await client.send_wait(...)`` does both.
    """

    def __init__(self, unconfirmed_bytes: int, limit: int) -> None:
        super().__init__(
            "would_block",
            f"{unconfirmed_bytes} bytes sent but not yet confirmed by amcastd (limit {limit}): "
            "await drain() before sending more",
        )
        self.unconfirmed_bytes = unconfirmed_bytes
        self.limit = limit


class ClientTimeout(ClientError, TimeoutError):
    """A wait ran past its timeout; ``unconfirmed`` messages were not yet confirmed."""

    def __init__(self, detail: str, unconfirmed: int = 0) -> None:
        super().__init__("timeout", detail)
        self.unconfirmed = unconfirmed


class Unreachable(ClientError):
    """No daemon answered at the socket path (``code``: ``not_running`` or ``unreachable``)."""


class ConnectionClosed(ClientError):
    """The connection to amcastd is over (``code``: the daemon's fatal error code,
    ``closed`` when the socket closed without one, ``timeout`` when a blocking write
    could not complete).

    - ``unsent``: batches never (completely) written to the socket: no daemon has them,
      they are delivered nowhere (payloads included, for a retry elsewhere);
    - ``unknown``: message numbers written but not confirmed, or confirmed but reported
      ``undelivered`` by a stopping daemon: other members may or may not deliver them;
    - ``refused``: refusals received and not yet raised as ``MessagesRefused``.
    """

    def __init__(self, code: str, detail: str, *, unsent: list[MessageBatch] | None = None,
                 unknown: list[range] | None = None,
                 refused: list[Refusal] | None = None) -> None:
        self.unsent = unsent or []
        self.unknown = unknown or []
        self.refused = refused or []
        notes = []
        if self.unsent:
            n = sum(len(b.messages) for b in self.unsent)
            notes.append(f"{n} message(s) not sent ({describe(b.messages for b in self.unsent)})")
        if self.unknown:
            notes.append(f"{count(self.unknown)} message(s) of unknown outcome "
                         f"({describe(self.unknown)})")
        if self.refused:
            n = sum(len(r.batch.messages) for r in self.refused)
            notes.append(f"{n} message(s) refused")
        super().__init__(code, detail + (f"; {'; '.join(notes)}" if notes else ""))

    def unknown_messages(self) -> Iterator[int]:
        """Every message number of unknown outcome, in order."""
        for r in self.unknown:
            yield from r
