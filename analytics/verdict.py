"""The audit's verdict in plain words: one sentence per finding (the first few per kind).

Theory of operation: ``KINDS`` lists the audit tables in the order they are reported,
with the label of their count; ``sentences`` turns the first rows of each (pandas) into
sentences that say which view, which nodes and which positions, and adds a line per
kind with more findings than shown. A pass is one sentence saying what was checked.
"""

from __future__ import annotations

from typing import Any

SHOWN = 5
KINDS = {
    "violations": "order violations (view x node pairs)",
    "positions": "position runs not counting from 0 (view x node)",
    "duplicates": "duplicate deliveries (messages)",
    "missing": "missing deliveries (messages x complete members)",
    "outside_primary": "ordered deliveries outside a primary view (view x node)",
    "gaps": "gap notice problems",
    "view_conflicts": "view record conflicts",
}


def _pos(first: Any, last: Any) -> str:
    return f"position {first}" if first == last else f"positions {first}..{last}"


def _at(view: Any, position: Any) -> str:
    return "nothing (from the start)" if view is None or view != view else (
        f"(view {int(view)}, position {int(position)})")


def sentences(counts: dict[str, int], rows: dict[str, Any], n_nodes: int,
              n_views: int) -> list[str]:
    if not any(counts.values()):
        return [f"Order audit PASSED: the {n_nodes} nodes in {n_views} "
                f"view{'s' if n_views != 1 else ''}: the members that completed each view "
                "delivered the same messages in it, in the same order at the same positions "
                "(counted from 0 in each view, agreeing wherever two nodes delivered), no "
                "node delivered a message twice or an ordered message outside its primary "
                "views, every gap notice matches what its node missed, and the view "
                "records agree."]
    out = ["Order audit FAILED."]
    for r in rows["violations"].head(SHOWN).itertuples():
        out.append(f"In view {r.view}, nodes {r.node_a} and {r.node_b} disagree on the total "
                   f"order from position {r.first_position} (node {r.node_a} delivered "
                   f"{r.message_a}, node {r.node_b} delivered {r.message_b}; "
                   f"{r.divergent_positions} divergent positions).")
    for r in rows["positions"].head(SHOWN).itertuples():
        out.append(f"Node {r.node}'s positions in view {r.view} do not count from 0 without "
                   f"holes: {r.messages} ordered messages at "
                   f"{_pos(r.first_position, r.last_position)}.")
    for r in rows["duplicates"].head(SHOWN).itertuples():
        out.append(f"Node {r.node} delivered message {r.message} of view {r.view} "
                   f"{r.times} times.")
    for r in rows["missing"].head(SHOWN).itertuples():
        out.append(f"Node {r.node} completed view {r.view} without delivering message "
                   f"{r.message} (delivered by nodes {list(r.delivered_by)}).")
    for r in rows["outside_primary"].head(SHOWN).itertuples():
        out.append(f"Node {r.node} delivered {r.messages} ordered message(s) of view {r.view} "
                   f"({_pos(r.first_position, r.last_position)}) outside its time in that view: "
                   f"{r.reason}.")
    for r in rows["gaps"].head(SHOWN).itertuples():
        if r.problem == "no gap notice":
            out.append(f"Node {r.node} installed view {r.view} without a gap notice, having "
                       f"missed {r.missed} ordered messages after "
                       f"{_at(r.last_view, r.last_position)}.")
        else:
            out.append(f"Node {r.node}'s gap notice before view {r.view} says it delivered up "
                       f"to {_at(r.after_view, r.after_position)}, but its last ordered "
                       f"delivery before that view was {_at(r.last_view, r.last_position)}.")
    for r in rows["view_conflicts"].head(SHOWN).itertuples():
        out.append(f"View {r.view}: {r.problem}: {r.detail}.")
    for k in KINDS:
        if counts[k] > SHOWN:
            out.append(f"... {counts[k]:,} {KINDS[k]} in all (see {k}/).")
    return out


def losses(rows: Any) -> list[str]:
    """One sentence per span of records a disk refused (``history.losses``), first few."""
    out = []
    for r in rows.head(SHOWN).itertuples():
        views = list(r.views)
        where = (f"in view{'s' if len(views) > 1 else ''} {', '.join(map(str, views))}"
                 if views else "(metrics only)")
        refused = "" if r.refused is None or r.refused != r.refused else (
            f" ({int(r.refused)} refused write{'s' if r.refused != 1 else ''})")
        out.append(f"Node {r.node} (incarnation {r.incarnation}) could not write its log for "
                   f"{r.until - r.since:.3f} s{refused}: its records {where} may be missing, "
                   "so its completeness, positions, gap notices and time in those views "
                   "were not audited there (its order was).")
    if len(rows) > SHOWN:
        out.append(f"... {len(rows):,} spans of lost log records in all (see log_losses/).")
    return out
