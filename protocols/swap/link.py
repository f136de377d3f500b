"""Reliable FIFO links for the swap datagrams of one view (the model of sections 4 and 5
of *Ordered Multicast and Distributed Swap* assumes reliable FIFO unicast between tree
neighbours; a reply may go to any member).

The Node's datagrams reach every member (IP multicast or unicast to all), so a swap
datagram names its ``dst`` and the others ignore it. Per destination a sender numbers
its messages from 1 and keeps each until acknowledged, resending it every ``rto``
seconds; per source a receiver hands messages on in sequence order only (a later one
waits for the gap before it), acknowledges cumulatively (``ack`` rides on every
datagram to that peer, or goes alone with ``seq`` 0) and answers a duplicate with an
acknowledgement. A link lives as long as its view's session: a message to a member
that crashed is resent until the view changes, when the next view's tree starts over.
Bounded: at most ``MAX_UNACKED`` messages wait per link (the swap layers have at most a
few requests in flight per node); beyond, the session's ``drop`` counts a refusal.

The messages are short integer tuples (``encode``/``decode`` below map the swap
layer's ``ArrowSwap``, ``CombineSwap`` and ``SwapReply`` onto them; payloads never
travel: the origin keeps m, the reply variant of ``outbox.py``).
"""

from __future__ import annotations

from collections.abc import Callable

from ..wire.codec import SwapDatagram
from .messages import ArrowSwap, CombineSwap, Datagram, MsgId, SwapReply

MAX_UNACKED = 4096
_ARROW, _COMBINE, _REPLY = 0, 1, 2


def encode(d: Datagram) -> tuple[int, ...]:
    if isinstance(d, ArrowSwap):
        return (_ARROW, d.origin, d.msg_id[0], d.msg_id[1], d.hops)
    if isinstance(d, CombineSwap):
        return (_COMBINE, d.origin, d.head[0], d.head[1], d.tail[0], d.tail[1], d.hops)
    pred = () if d.pred is None else d.pred
    return (_REPLY, d.msg_id[0], d.msg_id[1], d.hops, *pred)


def decode(msg: tuple[int, ...]) -> Datagram | None:
    """The swap message, or None for a malformed one."""
    tag, n = msg[0], len(msg)
    if tag == _ARROW and n == 5:
        return ArrowSwap(msg[1], (msg[2], msg[3]), b"", msg[4])
    if tag == _COMBINE and n == 7:
        return CombineSwap(msg[1], (msg[2], msg[3]), b"", (msg[4], msg[5]), msg[6])
    if tag == _REPLY and n in (4, 6):
        pred: MsgId | None = (msg[4], msg[5]) if n == 6 else None
        return SwapReply((msg[1], msg[2]), pred, msg[3])
    return None


class SwapLinks:
    def __init__(self, node_id: int, view_id: int, rto: float,
                 drop: Callable[[str, str], None]) -> None:
        self.id = node_id
        self.view_id = view_id
        self.rto = rto
        self._drop = drop
        self._next: dict[int, int] = {}
        self._unacked: dict[int, dict[int, tuple[tuple[int, ...], float]]] = {}
        self._received: dict[int, int] = {}
        """Per source, the last seq handed on in order."""
        self._early: dict[int, dict[int, tuple[int, ...]]] = {}
        self._ack_due: set[int] = set()
        self._out: list[SwapDatagram] = []
        self.sent = 0
        self.resent = 0

    def send(self, dst: int, msg: tuple[int, ...], now: float) -> None:
        pending = self._unacked.setdefault(dst, {})
        if len(pending) >= MAX_UNACKED:
            self._drop("swap_link_full", f"to node {dst}")
            return
        seq = self._next.get(dst, 0) + 1
        self._next[dst] = seq
        pending[seq] = (msg, now)
        self._emit(dst, seq, msg)
        self.sent += 1

    def _emit(self, dst: int, seq: int, msg: tuple[int, ...]) -> None:
        self._ack_due.discard(dst)
        self._out.append(SwapDatagram(self.id, self.view_id, dst, seq,
                                      self._received.get(dst, 0), msg))

    def receive(self, dg: SwapDatagram) -> list[tuple[int, tuple[int, ...]]]:
        """The messages ``dg`` makes deliverable, in the source's order."""
        src = dg.sender
        pending = self._unacked.get(src)
        if pending:
            for seq in [s for s in pending if s <= dg.ack]:
                del pending[seq]
        if dg.seq == 0:
            return []
        self._ack_due.add(src)
        done = self._received.get(src, 0)
        if dg.seq <= done:
            return []
        early = self._early.setdefault(src, {})
        if len(early) >= MAX_UNACKED and dg.seq not in early:
            self._drop("swap_link_full", f"from node {src}")
            return []
        early[dg.seq] = dg.msg
        out = []
        while done + 1 in early:
            done += 1
            out.append((src, early.pop(done)))
        self._received[src] = done
        return out

    def next_deadline(self) -> float | None:
        best: float | None = None
        for pending in self._unacked.values():
            for _, sent in pending.values():
                t = sent + self.rto
                if best is None or t < best:
                    best = t
        return best

    def tick(self, now: float) -> None:
        """Resend what waited ``rto`` for its acknowledgement."""
        for dst, pending in self._unacked.items():
            for seq, (msg, sent) in list(pending.items()):
                if now >= sent + self.rto:
                    pending[seq] = (msg, now)
                    self._emit(dst, seq, msg)
                    self.resent += 1

    def take(self) -> list[SwapDatagram]:
        out, self._out = self._out, []
        for src in sorted(self._ack_due):
            out.append(SwapDatagram(self.id, self.view_id, src, 0,
                                    self._received.get(src, 0), ()))
        self._ack_due.clear()
        return out
