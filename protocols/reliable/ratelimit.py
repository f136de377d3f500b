"""Per-peer token buckets that bound what another member's nacks can make this node do.

Section 1 of the ToTo paper (Trans): lost messages are retransmitted in answer to nacks,
and any holder may retransmit. A nack is a few dozen bytes and may ask for hundreds of
vertices, so repair is an amplifier by design: honest repair needs it, a member holding
the group key (or a replay of a genuine nack) could abuse it. Two buckets per requesting
peer cap the abuse without slowing honest repair in its normal range:

- ``nack_ranges``: nack ranges this node handles from the peer, ``nack_rate`` per
  second plus a burst of ``nack_burst``. A range past the bucket is ignored whole (no
  loss signal, no suppression, no repair), so a flood costs O(1) per range.
- ``repair_bytes``: bytes of retransmissions the peer's nacks may schedule here,
  ``repair_rate_bytes`` per second plus a burst of ``repair_burst_bytes``. A vertex
  past the bucket is not scheduled (the peer nacks it again after ``nack_retry``).

Hence, whatever it sends, one peer makes this node retransmit at most
``repair_burst_bytes + repair_rate_bytes * t`` bytes in ``t`` seconds, and one nack
datagram at most ``repair_burst_bytes``. Buckets are keyed by the datagram's sender id
(every sender is a member of the view: ``ReliableLayer.foreign`` dropped the rest), and
the table holds at most ``MAX_PEERS`` of them. Everything runs on the caller's clock.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_PEERS = 4096
"""Bucket pairs kept (members of any view; far more than a group ever lists)."""


class TokenBucket:
    """``rate`` tokens per second, at most ``burst`` saved; starts full."""

    __slots__ = ("_at", "burst", "rate", "tokens")

    def __init__(self, rate: float, burst: float, now: float) -> None:
        self.rate = rate
        self.burst = burst
        self.tokens = burst
        self._at = now

    def refill(self, now: float) -> float:
        """Tokens available at ``now`` (a clock that goes back refills nothing)."""
        if now > self._at:
            self.tokens = min(self.burst, self.tokens + (now - self._at) * self.rate)
            self._at = now
        return self.tokens

    def take(self, amount: float, now: float) -> bool:
        """Spend ``amount`` tokens if that many are available; False (nothing spent) if not."""
        if self.refill(now) < amount:
            return False
        self.tokens -= amount
        return True


@dataclass(frozen=True, slots=True)
class RepairLimits:
    """The four rates (see ``NodeConfig``: nack_rate, nack_burst, repair_rate_bytes,
    repair_burst_bytes), already resolved for the group size."""

    nack_rate: float
    nack_burst: float
    repair_rate_bytes: float
    repair_burst_bytes: float


class PeerLimiter:
    """The buckets of every requesting peer (shared by the views of one node)."""

    def __init__(self, limits: RepairLimits) -> None:
        self.limits = limits
        self._nacks: dict[int, TokenBucket] = {}
        self._repairs: dict[int, TokenBucket] = {}

    def set_limits(self, limits: RepairLimits) -> None:
        """New rates (the member list was reloaded): every peer starts from a full burst."""
        self.limits = limits
        self._nacks.clear()
        self._repairs.clear()

    def _bucket(
        self, table: dict[int, TokenBucket], peer: int, rate: float, burst: float, now: float
    ) -> TokenBucket:
        bucket = table.get(peer)
        if bucket is None:
            if len(table) >= MAX_PEERS:
                table.clear()  # only reachable with more ids than any group has: start over
            bucket = table[peer] = TokenBucket(rate, burst, now)
        return bucket

    def allow_nack(self, peer: int, now: float) -> bool:
        """One nack range from ``peer`` may be handled now."""
        lim = self.limits
        return self._bucket(self._nacks, peer, lim.nack_rate, lim.nack_burst, now).take(1, now)

    def allow_repair(self, peer: int, nbytes: int, now: float) -> bool:
        """``peer``'s nack may make this node retransmit ``nbytes`` more bytes now."""
        lim = self.limits
        bucket = self._bucket(
            self._repairs, peer, lim.repair_rate_bytes, lim.repair_burst_bytes, now
        )
        return bucket.take(nbytes, now)
