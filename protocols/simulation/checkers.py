"""Safety and liveness checkers over a simulated run of full Nodes, with views.

The properties of atomic multicast (section 1 of the ToTo paper: atomicity, order,
termination), of virtual synchrony (section 2; Birman) and of the causal layer, checked
at the application level from what was submitted, what each *process* (a node's life:
a restarted node is a new process) delivered in which view, and which views it
installed:

- integrity: a process delivers a message at most once, only messages that were
  submitted, with the submitted bytes, sender and service;
- views: a view id means the same members and predecessor everywhere; every process
  installs increasing ids; no view has two successors (one line of primary views);
- primary: every installed view holds a strict majority of the potential members, and
  only its members deliver in it;
- agreement (virtual synchrony): the processes that install a view and its successor
  (its *complete* members) delivered the same set in it; in the last view, every live
  process is complete; a member that left gracefully and closed its last view at the
  cut its successor was decided with (``closed_by_leaving``) is complete in it too;
- total order: complete members of a view deliver its ordered messages in the same
  sequence, at the same positions (counted from 0 in each view). A process that did not
  install the successor (it crashed, was excluded or left) may differ only in a tail of
  ``agreed`` messages after its last ``safe`` one (non-uniform agreed delivery, as in
  Spread and Corosync); its ``safe`` deliveries are uniform: every complete member
  delivers each of them at the same position after the same prefix (``safe_uniformity``);
- one view: complete members deliver each message in a single view;
- causal order: a process delivers a message after every message of its causal past
  that it delivers, whatever their services and views (a ``causal`` message may overtake
  an ordered one it does not follow);
- validity (nothing lost): every message a process submitted and that process is still
  alive at the end (and did not report in doubt) is delivered by every complete member
  of some view (exactly once by integrity and one view), or at least by its sender in a
  view that nobody completed (every other member of it crashed or was excluded);
- liveness: at the end every live process has installed the same last view.

Each checker returns human-readable violations; empty means the property holds.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

from ..membership.quorum import needed
from ..swap.carry import CarriedTree, locality_violations
from ..vocabulary import ServiceLevel


@dataclass(frozen=True, slots=True, order=True)
class Proc:
    """One life of a node: ``life`` counts its restarts."""

    node: int
    life: int = 0

    def __str__(self) -> str:
        return f"node {self.node}" + (f" (life {self.life})" if self.life else "")


@dataclass(frozen=True, slots=True)
class SentMessage:
    index: int
    sender: int
    payload: bytes
    service: ServiceLevel
    past: int
    """Bit set of message indexes in the causal past at submission (transitively closed)."""
    proc: Proc | None = None
    time: float = 0.0


@dataclass(frozen=True, slots=True)
class Delivery:
    sender: int
    payload: bytes
    service: ServiceLevel
    position: int | None
    time: float
    view: int = 0


@dataclass(frozen=True, slots=True)
class InstalledView:
    time: float
    view: int
    members: tuple[int, ...]
    previous: int
    potential: int
    """How many potential members the view's quorum counts."""
    swap_tree: CarriedTree | None = None
    """With a swap ordering: the view's swap tree as this process built it."""


Logs = Mapping[Proc, Sequence[Delivery]]


def _as_procs(logs: Mapping[object, Sequence[Delivery]]) -> dict[Proc, Sequence[Delivery]]:
    return {k if isinstance(k, Proc) else Proc(int(k)): v for k, v in logs.items()}  # type: ignore[call-overload]


class _Run:
    """Derived facts shared by the checkers."""

    def __init__(self, sent: Sequence[SentMessage], logs: Logs,
                 views: Mapping[Proc, Sequence[InstalledView]], live: set[Proc],
                 closed_by_leaving: Mapping[Proc, int] | None = None) -> None:
        self.sent = sent
        self.leavers: dict[int, set[Proc]] = defaultdict(set)
        for proc, view in (closed_by_leaving or {}).items():
            self.leavers[view].add(proc)
        self.by_payload = {m.payload: m for m in sent}
        self.logs = logs
        self.views = views
        self.live = live
        self.records: dict[int, InstalledView] = {}
        self.installers: dict[int, set[Proc]] = defaultdict(set)
        for proc, installed in views.items():
            for v in installed:
                self.records.setdefault(v.view, v)
                self.installers[v.view].add(proc)
        self.successor: dict[int, int] = {}
        self.forks: list[str] = []
        for vid, rec in sorted(self.records.items()):
            if rec.previous in self.successor:  # two first views (previous 0) fork too
                self.forks.append(f"views {self.successor[rec.previous]} and {vid} both "
                                  f"succeed view {rec.previous or 'none (a first view)'}")
            else:
                self.successor[rec.previous] = vid
        self.last_view = max(self.records, default=0)
        self.per_view: dict[Proc, dict[int, list[Delivery]]] = {}
        self._payloads: dict[tuple[Proc, int], set[bytes]] = {}
        self._complete: dict[int, set[Proc]] = {}
        for proc, log in logs.items():
            grouped: dict[int, list[Delivery]] = defaultdict(list)
            for d in log:
                grouped[d.view].append(d)
            self.per_view[proc] = grouped

    def complete(self, view: int) -> set[Proc]:
        """Processes that installed ``view`` and its successor (or are live in the last)."""
        got = self._complete.get(view)
        if got is None:
            got = self._complete[view] = self._complete_uncached(view)
        return got

    def _complete_uncached(self, view: int) -> set[Proc]:
        succ = self.successor.get(view)
        if succ is not None:
            return (self.installers[view] & self.installers[succ]) | (
                self.leavers.get(view, set()) & self.installers[view])
        return {p for p in self.installers[view] if p in self.live
                and self.views[p] and self.views[p][-1].view == view}

    def payloads(self, proc: Proc, view: int) -> set[bytes]:
        """What ``proc`` delivered in ``view`` (memoised)."""
        key = (proc, view)
        got = self._payloads.get(key)
        if got is None:
            got = self._payloads[key] = {d.payload for d in self.per_view[proc].get(view, ())}
        return got

    def ordered(self, proc: Proc, view: int) -> list[Delivery]:
        return [d for d in self.per_view[proc].get(view, ())
                if d.service is not ServiceLevel.CAUSAL]


def integrity(sent: Sequence[SentMessage], logs: Logs) -> list[str]:
    by_payload = {m.payload: m for m in sent}
    out = []
    for proc, log in logs.items():
        seen: set[int] = set()
        for d in log:
            m = by_payload.get(d.payload)
            if m is None:
                out.append(f"{proc} delivered an unknown payload {d.payload[:24]!r}")
            elif m.sender != d.sender or m.service != d.service:
                out.append(f"{proc} delivered message {m.index} with wrong sender/service")
            elif m.index in seen:
                out.append(f"{proc} delivered message {m.index} twice")
            else:
                seen.add(m.index)
    return out


def view_consistency(run: _Run) -> list[str]:
    out = list(run.forks)
    for proc, installed in run.views.items():
        ids = [v.view for v in installed]
        if ids != sorted(set(ids)):
            out.append(f"{proc} installed views out of order: {ids}")
        for v in installed:
            rec = run.records[v.view]
            if (rec.members, rec.previous) != (v.members, v.previous):
                out.append(f"view {v.view} has members {rec.members} (after {rec.previous}) "
                           f"at one process and {v.members} (after {v.previous}) at {proc}")
            if proc.node not in v.members:
                out.append(f"{proc} installed view {v.view} without being a member")
    return out


def primary(run: _Run, potential: tuple[int, ...] | None,
            expected_votes: int | None) -> list[str]:
    out = []
    for vid, rec in run.records.items():
        if potential is not None:
            votes = len(set(rec.members) & set(potential))
            if votes < needed(potential, expected_votes):
                out.append(f"view {vid} ({rec.members}) is not a majority of {potential}")
    for proc, grouped in run.per_view.items():
        installed = {v.view for v in run.views.get(proc, ())}
        for vid in grouped:
            if vid not in installed:
                out.append(f"{proc} delivered in view {vid}, which it never installed")
    return out


def agreement(run: _Run) -> list[str]:
    out = []
    for vid in sorted(run.records):
        complete = sorted(run.complete(vid))
        sets = {p: {d.payload for d in run.per_view[p].get(vid, ())} for p in complete
                if p in run.per_view}
        for a, b in pairwise(complete):
            if a in sets and b in sets and sets[a] != sets[b]:
                out.append(f"view {vid}: {a} and {b} delivered different sets "
                           f"({len(sets[a] - sets[b])} / {len(sets[b] - sets[a])} differ)")
    return out


def total_order(run: _Run) -> list[str]:
    out = []
    for vid in sorted(run.records):
        complete = sorted(p for p in run.complete(vid) if p in run.per_view)
        seqs = {p: run.ordered(p, vid) for p in complete}
        for p, seq in seqs.items():
            for i, d in enumerate(seq):
                if d.position != i:
                    out.append(f"view {vid}: {p}: message at index {i} has position "
                               f"{d.position}")
                    break
        reference = seqs[complete[0]] if complete else None
        for p in complete[1:]:
            if [d.payload for d in seqs[p]] != [d.payload for d in reference or ()]:
                out.append(f"view {vid}: {complete[0]} and {p} ordered it differently")
    return out


def safe_uniformity(run: _Run) -> list[str]:
    """A safe message delivered by anyone is delivered by every complete member, at the
    same position after the same prefix."""
    out = []
    for proc in run.per_view:
        for vid in run.per_view[proc]:
            complete = sorted(p for p in run.complete(vid) if p in run.per_view)
            if not complete or proc in complete:
                continue
            mine = run.ordered(proc, vid)
            ref = run.ordered(complete[0], vid)
            last_safe = max((i for i, d in enumerate(mine) if d.service is ServiceLevel.SAFE),
                            default=-1)
            if last_safe < 0:
                continue
            if [d.payload for d in mine[: last_safe + 1]] != [
                d.payload for d in ref[: last_safe + 1]
            ]:
                out.append(f"view {vid}: {proc} delivered safe message(s) that "
                           f"{complete[0]} did not deliver the same way")
    return out


def one_view(run: _Run) -> list[str]:
    out = []
    where: dict[bytes, int] = {}
    for vid in sorted(run.records):
        for p in run.complete(vid):
            for d in run.per_view.get(p, {}).get(vid, ()):
                first = where.setdefault(d.payload, vid)
                if first != vid:
                    m = run.by_payload.get(d.payload)
                    out.append(f"message {m.index if m else '?'} delivered in views "
                               f"{first} and {vid}")
    return out


def causal_order(sent: Sequence[SentMessage], logs: Logs) -> list[str]:
    """Every message is delivered after every message of its causal past that the same
    process delivers, whatever the service levels (a ``causal`` message never overtakes
    an ordered one it follows)."""
    by_payload = {m.payload: m for m in sent}
    out = []
    for proc, log in logs.items():
        mine = 0
        for d in log:
            m = by_payload.get(d.payload)
            if m is not None:
                mine |= 1 << m.index
        delivered = 0
        for d in log:
            m = by_payload.get(d.payload)
            if m is None:
                continue
            early = m.past & mine & ~delivered
            if early:
                first = (early & -early).bit_length() - 1
                out.append(f"{proc} delivered message {m.index} before its cause {first}")
            delivered |= 1 << m.index
    return out


def validity(run: _Run, in_doubt: Mapping[Proc, set[bytes]]) -> list[str]:
    out = []
    delivered_in: dict[bytes, set[int]] = defaultdict(set)
    for proc, grouped in run.per_view.items():
        for vid, log in grouped.items():
            if proc in run.complete(vid):
                for d in log:
                    delivered_in[d.payload].add(vid)
    lost = 0
    for m in run.sent:
        if m.proc is not None and m.proc not in run.live:
            continue
        if m.proc is not None and m.payload in in_doubt.get(m.proc, set()):
            continue
        views = delivered_in.get(m.payload, set())
        if not views:
            own = m.proc is not None and any(
                d.payload == m.payload for d in run.logs.get(m.proc, ()))
            if not own:  # not even its sender delivered it (in a view nobody completed)
                lost += 1
            continue
        for vid in views:
            missing = [p for p in run.complete(vid) if m.payload not in run.payloads(p, vid)]
            if missing:
                out.append(f"message {m.index} of view {vid} not delivered by {missing[0]}")
                break
    if lost:
        out.append(f"{lost} message(s) of live senders never delivered by a complete member")
    return out


def in_doubt_outcome(run: _Run, beyond_cut: Mapping[Proc, set[bytes]]) -> list[str]:
    """An own message a member reported beyond the cut it learned had closed its view
    (``MessagesInDoubt`` with ``cut_known``: reported to its client as not delivered by
    the primary component, or delivered only here) is delivered by no process that
    completed a view: a client told otherwise would send it again, and it would be
    delivered twice. (Reports whose member never learned the cut say the outcome is
    unknown, and claim nothing.)"""
    if not any(beyond_cut.values()):
        return []
    delivered_in: dict[bytes, int] = {}
    for proc, grouped in run.per_view.items():
        for vid, log in grouped.items():
            if proc in run.complete(vid):
                for d in log:
                    delivered_in.setdefault(d.payload, vid)
    index = {m.payload: m.index for m in run.sent}
    out = []
    for proc, payloads in sorted(beyond_cut.items(), key=lambda kv: str(kv[0])):
        wrong = sorted((index.get(p, -1), delivered_in[p]) for p in payloads if p in delivered_in)
        if wrong:
            out.append(f"{proc} reported {len(wrong)} own message(s) in doubt that members "
                       f"completing their view delivered (first: message {wrong[0][0]}, in "
                       f"view {wrong[0][1]})")
    return out


def liveness(run: _Run) -> list[str]:
    last = {p: (run.views[p][-1].view if run.views.get(p) else 0) for p in run.live}
    if len(set(last.values())) > 1:
        return [f"live processes ended in different views: "
                f"{ {str(p): v for p, v in sorted(last.items())} }"]
    return []


def swap_tree(run: _Run) -> list[str]:
    """Every installer of a view built the same swap tree, and a view's tree differs from
    the tree of the view it succeeds only at the joiners, the leavers and their tree
    neighbours (section 6.2's local joins and leaves: ``swap.carry``)."""
    out: list[str] = []
    trees: dict[int, CarriedTree] = {}
    for proc, installed in sorted(run.views.items()):
        for v in installed:
            if v.swap_tree is None:
                continue
            first = trees.setdefault(v.view, v.swap_tree)
            if first != v.swap_tree:
                out.append(f"view {v.view}: {proc} built another swap tree")
    for vid, tree in sorted(trees.items()):
        rec = run.records[vid]
        old = trees.get(rec.previous)
        if old is not None:
            out += [f"view {vid} (after {rec.previous}): {msg}"
                    for msg in locality_violations(old, tree)]
    return out


def check_all(
    sent: Sequence[SentMessage],
    logs: Mapping[object, Sequence[Delivery]],
    views: Mapping[Proc, Sequence[InstalledView]] | None = None,
    *,
    ended: Mapping[Proc, float] | None = None,
    live: Iterable[Proc] | None = None,
    in_doubt: Mapping[Proc, set[bytes]] | None = None,
    beyond_cut: Mapping[Proc, set[bytes]] | None = None,
    potential: tuple[int, ...] | None = None,
    last_fault_at: float = 0.0,
    expected_votes: int | None = None,
    expect_validity: bool = True,
    closed_by_leaving: Mapping[Proc, int] | None = None,
) -> dict[str, list[str]]:
    """Every checker over one run. Without ``views`` the run is static: every process
    was in one view (0) from start to end. ``closed_by_leaving``: processes that left
    gracefully and completed the flush of their last view (that view). ``in_doubt``: own
    messages each process reported in doubt (validity excuses them); ``beyond_cut``: those
    of them reported as beyond a known cut (default: all of them), which nobody
    completing a view may have delivered."""
    procs = _as_procs(logs)
    if views is None:
        nodes = tuple(sorted(p.node for p in procs))
        views = {p: [InstalledView(0.0, 0, nodes, 0, len(nodes))] for p in procs}
    live_set = set(procs) - set(ended or {}) if live is None else set(live)
    run = _Run(sent, procs, views, live_set, closed_by_leaving)
    results = {
        "integrity": integrity(sent, procs),
        "views": view_consistency(run),
        "primary": primary(run, potential, expected_votes),
        "agreement": agreement(run),
        "total_order": total_order(run),
        "safe_uniformity": safe_uniformity(run),
        "one_view": one_view(run),
        "causal_order": causal_order(sent, procs),
        "liveness": liveness(run),
        "in_doubt": in_doubt_outcome(run, (in_doubt or {}) if beyond_cut is None
                                     else beyond_cut),
    }
    if expect_validity:
        results["validity"] = validity(run, in_doubt or {})
    if any(v.swap_tree is not None for vs in views.values() for v in vs):
        results["swap_tree"] = swap_tree(run)
    return results
