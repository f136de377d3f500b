"""Who multicasts <pred, m> once m's predecessor is known (section 3 and 4 of *Ordered
Multicast and Distributed Swap*).

The paper's multicast variant has the node that finds the predecessor (the arrow's
sink, a combining node, the root) multicast <pred, m> at once: m travels with its
request. The reply variant (``reply=True``) is the plain swap of section 3: that node
returns pred to m's origin in one ``SwapReply`` datagram, and the origin, which kept
m, multicasts. The reply costs one unicast more per non-local swap and nothing when the
origin resolves its own swap (a lone arrow sender still sends no swap datagram).
"""

from __future__ import annotations

from .messages import MsgId, Multicast, Ordered, Send, SwapEvent, SwapReply


class Outbox:
    def __init__(self, node_id: int, reply: bool = False) -> None:
        self.id = node_id
        self.reply = reply
        self._payloads: dict[MsgId, bytes] = {}

    def started(self, msg_id: MsgId, payload: bytes) -> None:
        """This node starts m's swap: in the reply variant it keeps m until pred comes."""
        if self.reply:
            self._payloads[msg_id] = payload

    def resolved(
        self,
        origin: int,
        msg_id: MsgId,
        payload: bytes,
        pred: MsgId | None,
        hops: int,
        via: MsgId | None = None,
        by_root: bool = False,
    ) -> SwapEvent:
        """This node found m's predecessor."""
        if self.reply and origin != self.id:
            return Send(self.id, origin, SwapReply(msg_id, pred, hops, via, by_root))
        self._payloads.pop(msg_id, None)
        return Multicast(self.id, Ordered(pred, msg_id, payload), hops, via, by_root)

    def on_reply(self, reply: SwapReply) -> Multicast:
        payload = self._payloads.pop(reply.msg_id)
        ordered = Ordered(reply.pred, reply.msg_id, payload)
        return Multicast(self.id, ordered, reply.hops, reply.via, reply.by_root)
