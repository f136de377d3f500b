"""The heartbeat repeat check, in one place.

An idle member repeats the same heartbeat every ``heartbeat_interval``: sealed afresh
each time (a new nonce and counter), with an authentic body that is byte for byte the
same. Decoding is a pure function of the body, so the Node decodes a sender's nack-free
heartbeat once and keeps it with its body (``note``); a later body of that sender with
the same bytes *is* that heartbeat (``lookup``), and needs no decoding.

Once the session of the heartbeat's view has applied it in full (``applied``: the
membership layer says so, ``MembershipLayer.on_datagram``), a repeat of those bytes may
be only a sign of life: the membership layer decides whether anything else could come of
it (``MembershipLayer.renew``: no round or wait open, the sender listed and alive, the
session's ``repeat_is_noop``) and if not, notes the sender's liveness and nothing else.
Idle members repeat their heartbeat every interval; this keeps an idle cluster's cost per
heartbeat low (``amcast bench node`` measures it).

Only bodies that are ``bytes`` are kept (an insecure node's body is a view of the
datagram, which is reused) and at most one per sender, the latest.
"""

from __future__ import annotations

from .wire.codec import Datagram, Kind

_HEARTBEAT = Kind.HEARTBEAT


class HeartbeatRepeats:
    """Per sender: the body of its latest nack-free heartbeat, the datagram it decoded
    to, and whether the session of its view applied that datagram in full."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: dict[int, tuple[bytes, Datagram, bool]] = {}

    def lookup(self, sender: int, body: bytes | memoryview) -> tuple[Datagram, bool] | None:
        """``body`` from ``sender`` is its latest heartbeat again: that datagram, and
        whether its session applied it; ``None`` when the bytes differ."""
        last = self._last.get(sender)
        if last is None or last[0] != body:
            return None
        return last[1], last[2]

    def note(self, body: bytes | memoryview, dg: Datagram) -> None:
        """``body`` decoded to ``dg``: kept when it is a nack-free heartbeat in a body
        of its own (it replaces the sender's earlier one)."""
        if dg.kind is _HEARTBEAT and not dg.nacks and type(body) is bytes:
            self._last[dg.sender] = (body, dg, False)

    def applied(self, dg: Datagram) -> None:
        """The session of ``dg``'s view applied it in full: a repeat of its body may
        only renew its sender's liveness."""
        last = self._last.get(dg.sender)
        if last is not None and last[1] is dg:
            self._last[dg.sender] = (last[0], dg, True)
