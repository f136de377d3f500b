"""The envelope: what the daemon hands the engine as one opaque payload.

Theory of operation: a client's ``send`` frame carries one or more application payloads
for one set of groups and one service level. The daemon wraps the whole frame into one
engine payload, the *envelope* ``msgpack([client_id, [group, ...], [payload, ...]])``;
the engine batches envelopes into DAG vertices (one datagram = one vertex). At delivery
the daemon decodes each envelope once, in C (msgpack), and never loops over application
messages in Python: positions are derived per envelope (``first index + i``).

Application message positions are counted in *application messages*: a vertex delivered
at total-order position ``p`` (counted by the daemon from the engine's order, identical
on every node) holds messages ``p .. p + count - 1``; the envelope at index ``k`` of the
vertex starts at ``p + sum(len(payloads) of envelopes before k)``.
"""

from __future__ import annotations

from typing import Any

import msgpack

_packb = msgpack.packb
_unpackb = msgpack.unpackb


def encode(client: int, groups: list[str], payloads: list[bytes]) -> bytes:
    return _packb((client, groups, payloads), use_bin_type=True)


def split(payloads: list[bytes], limit: int) -> list[list[bytes]]:
    """Consecutive runs of ``payloads`` of at most ``limit`` bytes each (order kept)."""
    parts: list[list[bytes]] = []
    current: list[bytes] = []
    size = 0
    for p in payloads:
        cost = len(p) + 8
        if current and size + cost > limit:
            parts.append(current)
            current, size = [], 0
        current.append(p)
        size += cost
    if current:
        parts.append(current)
    return parts


def decode(envelope: bytes) -> list[Any] | None:
    """``[client, groups, payloads]``; ``None`` if the bytes are not an envelope."""
    try:
        env = _unpackb(envelope, raw=False, use_list=True)
    except Exception:
        return None
    if (
        type(env) is not list
        or len(env) != 3
        or type(env[0]) is not int
        or type(env[1]) is not list
        or type(env[2]) is not list
    ):
        return None
    return env
