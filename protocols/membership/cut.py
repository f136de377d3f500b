"""The flush's cut: the final causality DAG of a closing view (virtual synchrony,
section 2 of the ToTo paper; Birman's flush).

Each member that promised reports what it holds of the view: per sender the last
sequence number it released (a causally closed prefix, section 1: everything a vertex
acknowledges was released first) and some vertices it holds but could not release yet
(with their acknowledgements). The union of causally closed sets is causally closed,
so the cut starts at the highest released seq per sender; held vertices then extend it
where every dependency is inside the cut (the sender's previous vertex and every
acknowledged vertex), until nothing changes. Every vertex in the cut is held by some
member that promised, so every member can obtain it by repair; everything any of them
delivered is in it (delivered implies released).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..wire.membership import Availability


def compute_cut(members: Sequence[int], reports: Iterable[Availability]) -> dict[int, int]:
    """The cut (per member of the view, the last seq of the final DAG)."""
    cut = dict.fromkeys(members, 0)
    held = {}
    for report in reports:
        for node, seq in report.released:
            if node in cut and seq > cut[node]:
                cut[node] = seq
        for h in report.held:
            if h.origin in cut:
                held[(h.origin, h.seq)] = h.acks
    changed = True
    while changed and held:
        changed = False
        for (origin, seq), acks in sorted(held.items()):
            if seq != cut[origin] + 1:
                continue
            if all(node in cut and ack <= cut[node] for node, ack in acks):
                cut[origin] = seq
                del held[(origin, seq)]
                changed = True
    return cut
