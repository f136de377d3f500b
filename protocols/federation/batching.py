"""The datagrams of one output round, joined per destination member (``wire.DgBatch``).

Theory of operation (docs/multigroup.md, "In the daemon: the federation layer", wire).
A member's outputs name one datagram per Submit, Timestamp or Ack; under a burst of
global messages a round (the records one pump of the order delivered, one tick) holds
many for the same member of another cluster. ``batch_sends`` joins those into batches
of at most ``MAX_BATCH`` datagrams and ``MAX_BATCH_BYTES`` bytes, without decoding
them; the receiver takes a batch's datagrams one by one, as if they came alone. Loss,
duplication and reordering of a batch are those of its datagrams together, which the
protocol already survives one by one. A batch is no longer than its datagrams sent one
by one (it drops their 3-byte prefixes and adds one of its own and an array header of
1 or 3 bytes): its header still does not grow with the number of nodes.
"""

from __future__ import annotations

from collections.abc import Iterable

from .outputs import Output, SendRemote
from .wire import MAX_BATCH, batch

MAX_BATCH_BYTES = 16_384
"""A batch stays under this many bytes (a larger datagram goes alone)."""


def batch_sends(outputs: Iterable[Output]) -> list[Output]:
    """The outputs, each ``SendRemote`` joined with the others for the same member into
    batches (after the other outputs, which keep their order)."""
    out: list[Output] = []
    per_member: dict[tuple[str, str], list[bytes]] = {}
    for o in outputs:
        if isinstance(o, SendRemote):
            per_member.setdefault((o.cluster, o.node), []).append(o.datagram)
        else:
            out.append(o)
    for (cluster, node), datagrams in per_member.items():
        chunk: list[bytes] = []
        size = 0
        for d in datagrams:
            if chunk and (len(chunk) == MAX_BATCH or size + len(d) > MAX_BATCH_BYTES):
                out.append(SendRemote(cluster, node, batch(chunk)))
                chunk, size = [], 0
            chunk.append(d)
            size += len(d)
        if chunk:
            out.append(SendRemote(cluster, node, batch(chunk)))
    return out
