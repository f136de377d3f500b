"""The vote state of one activation (section 3 of the ToTo paper), as bit masks.

Processors are indexed ``0 .. n-1`` in processor-id order. At most one candidate (root of
G) exists per processor, its first undelivered message, so a set of candidates is a bit
mask over processor indices, and so is a set of voters:

- ``voted``: tail(G), the processors with a message in G; ``u = n - |voted|``.
- ``candidates``: M_G, by sender index.
- ``voters[c]``: the processors whose first message in G causally follows candidate c
  (c's own sender included): the 1-entries of VV(c). A processor in ``voted`` but not in
  ``voters[c]`` is a 0-entry, one not in ``voted`` a ``*``.

Hence nvt(c) = popcount(voters[c]) and votes(a, b) = popcount(voters[a] & ~voters[b]).
A processor's vote is fixed by its first message, so within an activation ``voters``
only grow, one processor at a time (``cast``).
"""

from __future__ import annotations

from collections.abc import Iterator


def bits(mask: int) -> Iterator[int]:
    """Indices of the set bits of ``mask``, lowest first."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


class ActivationVotes:
    """VV, nvt, votes, u and Ntail(G) of the current activation."""

    __slots__ = ("candidates", "n", "voted", "voters")

    def __init__(self, n: int) -> None:
        self.n = n
        self.voted = 0
        self.candidates = 0
        self.voters = [0] * n

    def reset(self) -> None:
        self.voted = 0
        self.candidates = 0
        self.voters = [0] * self.n

    def cast(self, voter: int, followed: int, *, is_candidate: bool) -> None:
        """Record processor ``voter``'s first message, which follows candidates ``followed``.

        A candidate message votes for itself (``is_candidate``): it then follows no other
        candidate, and becomes a candidate that every earlier voter voted 0 for.
        """
        bit = 1 << voter
        self.voted |= bit
        if is_candidate:
            self.candidates |= bit
            followed = bit
        voters = self.voters
        while followed:  # bits(followed), inlined: this is the hottest loop of the engine
            low = followed & -followed
            voters[low.bit_length() - 1] |= bit
            followed ^= low

    @property
    def ntail(self) -> int:
        return self.voted.bit_count()

    @property
    def unseen(self) -> int:
        return self.n - self.voted.bit_count()

    def nvt(self, c: int) -> int:
        return self.voters[c].bit_count()

    def votes(self, a: int, b: int) -> int:
        """votes(a, b): processors voting for candidate a and against candidate b."""
        return (self.voters[a] & ~self.voters[b]).bit_count()

    def first_unseen(self) -> int:
        """min(P - tail(G)) as an index, or n when every processor has voted."""
        missing = ~self.voted & ((1 << self.n) - 1)
        return (missing & -missing).bit_length() - 1 if missing else self.n
