"""Safety checks over the delivery sequences of several processors.

The properties of an atomic multicast (ToTo paper, section 1; lecture notes of seed 002):

- integrity: no processor delivers a message twice;
- total order: any two processors' sequences are prefix-consistent (one is a prefix of
  the other, position by position);
- causal order: a message is delivered only after every message in its causal past
  that carries a payload (ack-only messages are ordered but never delivered);
- agreement: processors that saw the same messages delivered the same sequence.

Each check returns a list of human-readable violations; empty means it holds.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping, Sequence

from ..ordering.messages import MessageId

Clock = Callable[[MessageId], Sequence[int]]


def duplicates(sequences: Mapping[int, Sequence[MessageId]]) -> list[str]:
    out = []
    for proc, seq in sequences.items():
        seen: set[MessageId] = set()
        for pos, mid in enumerate(seq):
            if mid in seen:
                out.append(f"processor {proc} delivered {mid} twice (again at position {pos})")
            seen.add(mid)
    return out


def first_divergence(a: Sequence[MessageId], b: Sequence[MessageId]) -> int | None:
    """First position where two sequences differ while both have a message, else None."""
    for pos, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return pos
    return None


def prefix_violations(sequences: Mapping[int, Sequence[MessageId]]) -> list[str]:
    out = []
    procs = sorted(sequences)
    for i, p in enumerate(procs):
        for q in procs[i + 1 :]:
            pos = first_divergence(sequences[p], sequences[q])
            if pos is not None:
                out.append(
                    f"processors {p} and {q} diverge at position {pos}: "
                    f"{sequences[p][pos]} vs {sequences[q][pos]}"
                )
    return out


def causal_violations(
    sequences: Mapping[int, Sequence[MessageId]],
    clock: Clock,
    payload_seqs: Mapping[int, Sequence[int]],
) -> list[str]:
    """``clock(m)[s]`` is the latest message of sender s that m causally follows (or is);
    ``payload_seqs[s]`` the sorted sequence numbers of s's messages that carry a payload."""
    out = []
    for proc, seq in sequences.items():
        delivered: dict[int, set[int]] = {}
        for pos, (sender, number) in enumerate(seq):
            for s, latest in enumerate(clock((sender, number))):
                if s == sender:
                    latest = number - 1
                seqs = payload_seqs.get(s, ())
                k = bisect.bisect_right(seqs, latest)
                if k and seqs[k - 1] not in delivered.get(s, ()):
                    out.append(
                        f"processor {proc} delivered {(sender, number)} at position {pos} "
                        f"before its causal predecessor {(s, seqs[k - 1])}"
                    )
                    break
            delivered.setdefault(sender, set()).add(number)
    return out
