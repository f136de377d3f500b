"""The values and events shared by the swap layers (section 3 of *Ordered Multicast and
Distributed Swap*, "The Reduction").

A message id is ``(origin, sequence)``; ``BOTTOM`` (``None``) is the paper's ⊥, the
swap object's initial value and the predecessor of the first message. A swap layer
returns two kinds of events: ``Send`` (a swap datagram to one tree neighbour or parent,
over the model's reliable FIFO unicast) and ``Multicast`` (the pair <pred, m> handed to
the unordered reliable multicast once m's immediate predecessor is known). Receivers
feed the ``Ordered`` pairs to ``delivery.DeliveryBuffer``.
"""

from __future__ import annotations

from dataclasses import dataclass

MsgId = tuple[int, int]
"""``(origin node, sequence number at the origin)``: unique per message."""

BOTTOM: None = None
"""⊥: the initial swap value; a message whose predecessor is ⊥ is the first one."""


@dataclass(frozen=True, slots=True)
class Ordered:
    """<pred, m>: what the unordered multicast carries to every member."""

    pred: MsgId | None
    msg_id: MsgId
    payload: bytes = b""


@dataclass(frozen=True, slots=True)
class ArrowSwap:
    """swap(a) of section 4 carrying m: it follows the arrows to a sink, flipping them.
    The value swapped in stays at the origin (it became a sink holding it), so only the
    head message travels."""

    origin: int
    msg_id: MsgId
    payload: bytes
    hops: int
    """Links traversed so far (counted on arrival)."""


@dataclass(frozen=True, slots=True)
class CombineSwap:
    """swap(u, a, b) of section 5: ``head`` is a (the message still looking for its
    predecessor, carried with its payload), ``tail`` is b (the id to swap in)."""

    origin: int
    head: MsgId
    payload: bytes
    tail: MsgId
    hops: int


@dataclass(frozen=True, slots=True)
class SwapReply:
    """The reply variant (``reply=True``): the node that found m's predecessor returns
    it to m's origin, as the swap of section 3 returns its value, and the origin
    multicasts <pred, m> itself (what a reliable layer numbering each origin's stream
    needs). ``hops``, ``via`` and ``by_root`` are those of the resolution."""

    msg_id: MsgId
    pred: MsgId | None
    hops: int
    via: MsgId | None = None
    by_root: bool = False


Datagram = ArrowSwap | CombineSwap | SwapReply


@dataclass(frozen=True, slots=True)
class Send:
    """A swap datagram from ``src`` to the tree neighbour ``dst``."""

    src: int
    dst: int
    datagram: Datagram


@dataclass(frozen=True, slots=True)
class Multicast:
    """``at`` found the predecessor of ``ordered.msg_id`` and multicasts <pred, m>.
    ``hops`` is how many swap links m's request crossed; ``via`` is, for combining, the
    head of the request m was combined into (None when resolved at the root or a sink);
    ``by_root`` says the root (or a virtual-root member) resolved it."""

    at: int
    ordered: Ordered
    hops: int
    via: MsgId | None = None
    by_root: bool = False


SwapEvent = Send | Multicast
