"""Hard limits on every field of a datagram (wire layer, section 1 of the ToTo paper).

The decoder enforces them while parsing so that no datagram can make a receiver allocate
more than a small multiple of the datagram's own size. msgpack's own ``Unpacker`` limits
(``max_array_len``, ``max_bin_len``; strings, maps and extension types are disallowed)
come first; the structural checks in ``codec`` do the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

WIRE_VERSION = 3  # 2: 64-bit view ids, membership datagrams; 3: AES-256-GCM sealing
TAG_BYTES = 16  # the AES-GCM tag
PREFIX_BYTES = 2  # version byte + flags byte
SEAL_HEADER_BYTES = 38  # prefix, key ids, session, counter, send time (``auth``)

MAX_NODE_ID = 2**32 - 1
MAX_VIEW_ID = 2**63 - 1
MAX_INCARNATION = 2**63 - 1
MAX_TEXT_BYTES = 256  # reason codes and details in membership messages
MAX_SEQ = 2**62


@dataclass(frozen=True, slots=True)
class WireLimits:
    max_datagram_bytes: int = 65_507
    max_members: int = 1024
    max_nack_ranges: int = 256
    max_vertices: int = 64
    max_items: int = 65_536
    max_message_size: int = 16 * 1024 * 1024
    max_held_report: int = 512
    """Held vertices one membership ``PROMISE`` may describe."""

    @property
    def max_array_len(self) -> int:
        return max(8, 2 * self.max_members, 3 * self.max_nack_ranges, self.max_vertices,
                   self.max_items)


# Upper bounds (bytes) of the msgpack encoding of the non-payload parts of a datagram,
# used by the batcher to stay within the datagram budget. Integers are bounded by their
# widest msgpack form (uint32 for node and view ids: 5 bytes, uint64 otherwise: 9).
FIXED_OVERHEAD = (SEAL_HEADER_BYTES + TAG_BYTES + 1 + 1 + 5 + 9 + 9 + 5 + 3
                  + (1 + 5 + 9 + 5 + 1 + 9 + 5))
ACK_OVERHEAD = 5 + 9
NACK_RANGE_OVERHEAD = 5 + 9 + 9
ITEM_OVERHEAD = 5
FRAGMENT_OVERHEAD = 1 + 9 + 9 + 5


def overhead_bound(n_acks: int, n_nack_ranges: int) -> int:
    """Bytes of a one-vertex datagram that are not application bytes, item headers excluded."""
    return FIXED_OVERHEAD + ACK_OVERHEAD * n_acks + NACK_RANGE_OVERHEAD * n_nack_ranges
