"""The checkers the federation simulator adds to ``multigroup.checkers``: joiners and
outcomes.

A member that joins a running cluster (a new incarnation after a crash or a partition)
starts from a state snapshot: it delivers a *suffix* of what its cluster delivers, not
everything. ``check_joiners`` holds it to that: its delivery sequence must be a
subsequence of a correct member's of the same cluster (same relative order), and it
must miss no global message that member delivered after the joiner's first global
delivery (no gap once it runs). The other properties (global acyclicity, integrity,
uniform agreement and termination for the correct members, participant minimality)
are ``multigroup.checkers.check_run`` on the same logs.

``check_outcomes`` holds the senders to "nothing lost silently": every global message
handed to a member whose daemon stayed up is delivered or reported ``Undelivered``,
once, and a report that says it was not delivered is true.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from itertools import pairwise

from ..multigroup.messages import MsgId


def check_joiners(deliveries: Mapping[int, Sequence[MsgId]], joiners: Mapping[int, int],
                  is_global: Iterable[MsgId], complete: Iterable[int]) -> list[str]:
    """``joiners``: joiner pid -> a correct pid of its cluster to compare with;
    ``complete``: the joiners alive at the end, which must miss nothing after their
    first global delivery."""
    globals_ = set(is_global)
    alive = set(complete)
    out = []
    for j, ref in sorted(joiners.items()):
        mine = list(deliveries.get(j, ()))
        theirs = list(deliveries.get(ref, ()))
        where = {m: i for i, m in enumerate(theirs)}
        missing = [m for m in mine if m not in where]
        if missing:
            out.append(f"joiner {j} delivered {missing[0]}, which member {ref} did not")
            continue
        positions = [where[m] for m in mine]
        if any(b <= a for a, b in pairwise(positions)):
            out.append(f"joiner {j} delivered in another order than member {ref}")
            continue
        if j not in alive:
            continue
        first = next((p for m, p in zip(mine, positions, strict=True) if m in globals_), None)
        if first is None:
            continue
        have = set(mine)
        gaps = [m for m in theirs[first:] if m in globals_ and m not in have]
        if gaps:
            out.append(f"joiner {j} missed {gaps[0]} after it started delivering")
    return out


def check_outcomes(submitted: Iterable[MsgId], dst_clusters: Mapping[MsgId, Collection[str]],
                   delivered_in: Mapping[MsgId, Collection[str]],
                   reports: Mapping[MsgId, Sequence[str]]) -> list[str]:
    """Nothing lost silently, no split outcome (``member.py``, "Outcomes").

    ``submitted``: the global messages handed to a member whose daemon stayed up (order
    gaps included, crashes not); ``dst_clusters``: each message's destination clusters;
    ``delivered_in``: the clusters of which some member delivered it; ``reports``: the
    outcomes its sender reported ``Undelivered`` with, in order. Every submitted message
    must be delivered by every destination cluster or reported; a message is reported at
    most once; one reported with an outcome other than ``unknown`` (``not_delivered``)
    must be delivered nowhere."""
    out = []
    for m, outcomes in sorted(reports.items()):
        if len(outcomes) > 1:
            out.append(f"outcomes: {m} reported undelivered {len(outcomes)} times")
        where = sorted(delivered_in.get(m, ()))
        for outcome in set(outcomes) - {"unknown"}:
            if where:
                out.append(f"outcomes: {m} reported undelivered ({outcome}) but delivered "
                           f"in cluster {where[0]}")
    for m in sorted(set(submitted)):
        if m in reports:
            continue
        missing = sorted(set(dst_clusters.get(m, ())) - set(delivered_in.get(m, ())))
        if missing:
            out.append(f"outcomes: {m}, submitted at a member that stayed up, neither "
                       f"delivered in cluster {missing[0]} nor reported undelivered")
    return out
