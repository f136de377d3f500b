"""The primary component: who may order (section 2: a consistent sequence of
configurations needs a single line of them; majorities intersect).

A view is primary when its members hold a strict majority of the votes: the potential
members of the view (the configured member list, like Corosync's nodelist), or
``expected_votes`` when the operator sets it (votequorum style). Agreement quorums
(promises, acceptances) are majorities of the previous view's potential members, so two
proposals for the same successor always meet in one acceptor.
"""

from __future__ import annotations

from collections.abc import Iterable


def needed(potential: tuple[int, ...], expected_votes: int | None = None) -> int:
    """Votes a component needs to be primary. ``expected_votes`` can only raise the bar
    (a value below the number of listed members would let two components both hold a
    majority of it; the Node refuses such a configuration)."""
    total = max(expected_votes or 0, len(potential))
    return total // 2 + 1


def has_quorum(nodes: Iterable[int], potential: tuple[int, ...],
               expected_votes: int | None = None) -> bool:
    """True when ``nodes`` hold a strict majority of ``potential`` (one vote each)."""
    listed = set(potential)
    return len({n for n in nodes if n in listed}) >= needed(potential, expected_votes)
