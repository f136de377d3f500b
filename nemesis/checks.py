"""The properties a nemesis run must keep, each a function of recorded facts only.

Over the daemons' delivery logs (``nemesis.logs``), reusing the simulator's checkers
where their terms fit (``amcast.protocols.simulation.checkers``):

- ``views``: a view id names the same members and predecessor in every life that
  installed it; each life installs increasing ids; no view has two successors
  (``view_consistency``). A first view (no predecessor) is legitimate once per start
  of the whole cluster: the run says how many there were;
- ``primary``: every installed view is a majority of the listed members, and a life
  delivers only in views it installed (``primary``);
- ``agreement``: the lives that installed a view and its successor delivered the same
  set in it (``agreement``); ``safe`` messages uniformly (``safe_uniformity``);
- ``total_order``: in every view, every life's ordered deliveries sit at positions 0,
  1, 2, ... and every life delivered the same message at the same position as the
  life of reference (the longest among those that completed the view). A life that did
  not complete the view (killed, excluded, cut off) may differ in a tail of ``agreed``
  messages only (non-uniform agreed delivery);
- ``no_duplicates``: no life delivers a message twice;
- ``gap_notice``: a gap notice's ``after`` names the last ordered message its life
  logged before it (and, over the clients, a ``gap`` frame's the last one its client
  received).

Over the clients' records (``amcast.faultload.verdict``, which judges what each client
saw): ``delivered_or_reported``: every message a client sent and stayed connected for
was delivered, or reported back to it (``undelivered``, refused);
``sender_outcome``: and it reached that client itself, delivered or reported
(``unseen_by_sender``); ``client_views``: everything else that verdict reports (members
of a view, order at the clients), less its one false alarm (``late_join``).

Over the health samples and the nemesis' ground truth (``nemesis.faults.Outage``):
``health``: no daemon says ``ok`` outside a primary view, and no daemon reports a
primary view that holds a node it could not hear for longer than ``exclude_within``
seconds (killed, paused, stopped, cut off, its clock beyond the replay window).

At the end (``converged``): once the faults stop, every daemon reaches one primary view
of every node.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from amcast.protocols.simulation import checkers as sim
from amcast.protocols.simulation.checkers import Delivery, Proc
from amcast.protocols.vocabulary import ServiceLevel

from amcast.faultload import DELIVER, Recorder, verdict
from nemesis.faults import Outage
from nemesis.load import HealthSample
from nemesis.logs import Lives

MAX_PER_PROPERTY = 20
"""Violations kept per property (a broken run can report thousands of the same)."""


@dataclass(frozen=True)
class Violation:
    prop: str
    detail: str

    def __str__(self) -> str:
        return f"{self.prop}: {self.detail}"


def _cap(prop: str, details: Iterable[str]) -> list[Violation]:
    out = [Violation(prop, d) for d in details]
    if len(out) > MAX_PER_PROPERTY:
        extra = len(out) - MAX_PER_PROPERTY
        out = [*out[:MAX_PER_PROPERTY], Violation(prop, f"... and {extra} more")]
    return out


# ---------------------------------------------------------------------- delivery logs
def check_logs(lv: Lives, *, live: set[Proc], first_views: int = 1) -> list[Violation]:
    """Every log property (module docstring). ``live``: the lives still running at the
    end of the run (complete in their last view); ``first_views``: how many times the
    whole cluster started (each start may form a view with no predecessor)."""
    logs = {p: [d for d in ds if d.view not in lv.lost_views.get(p, set())]
            for p, ds in lv.deliveries.items()}
    run = sim._Run([], logs, lv.views, live)
    first = [f for f in run.forks if "none (a first view)" in f]
    views = [f for f in sim.view_consistency(run) if f not in first]
    firsts = sorted({v.view for vs in lv.views.values() for v in vs if v.previous == 0})
    if len(firsts) > first_views:
        views.append(f"{len(firsts)} views without a predecessor {firsts} for "
                     f"{first_views} start(s) of the whole cluster")
    out = _cap("views", views)
    out += _cap("primary", sim.primary(run, lv.potential or None, None))
    out += _cap("agreement", sim.agreement(run) + sim.safe_uniformity(run))
    out += _cap("total_order", total_order(run, logs))
    out += _cap("no_duplicates", duplicates(logs))
    out += _cap("gap_notice", gap_notices(lv))
    return out


def duplicates(logs: dict[Proc, list[Delivery]]) -> list[str]:
    out = []
    for proc, ds in sorted(logs.items()):
        counts = Counter(d.payload for d in ds)
        dup = sorted(k.decode() for k, n in counts.items() if n > 1)
        if dup:
            out.append(f"{proc} delivered {len(dup)} message(s) more than once, e.g. "
                       f"{dup[:3]} (view:sender:seq:index)")
    return out


def _ordered(ds: Sequence[Delivery], view: int) -> list[Delivery]:
    return [d for d in ds if d.view == view and d.service is not ServiceLevel.CAUSAL]


def total_order(run: sim._Run, logs: dict[Proc, list[Delivery]]) -> list[str]:
    out = []
    views = sorted({d.view for ds in logs.values() for d in ds})
    for v in views:
        seqs = {p: _ordered(ds, v) for p, ds in logs.items()}
        seqs = {p: s for p, s in seqs.items() if s}
        for p, s in sorted(seqs.items()):
            positions = [d.position for d in s]
            if positions != list(range(len(s))):
                i = next(i for i, x in enumerate(positions) if x != i)
                out.append(f"view {v}: {p} delivered position {positions[i]} as its "
                           f"{i}th message (positions not 0, 1, 2, ...)")
        complete = [p for p in run.complete(v) if p in seqs]
        pool = complete or list(seqs)
        if not pool:
            continue
        ref = max(sorted(pool), key=lambda p: len(seqs[p]))
        ref_ids = [d.payload for d in seqs[ref]]
        for p, s in sorted(seqs.items()):
            if p == ref:
                continue
            ids = [d.payload for d in s]
            i = next((i for i, (a, b) in enumerate(zip(ids, ref_ids, strict=False))
                      if a != b), None)
            if i is None:
                if p in complete and len(ids) != len(ref_ids):
                    out.append(f"view {v}: {p} and {ref} completed it with "
                               f"{len(ids)} and {len(ref_ids)} messages")
                continue
            tail_agreed = all(d.service is ServiceLevel.AGREED for d in s[i:])
            if p in complete or not tail_agreed:
                out.append(f"view {v}: position {i}: {p} delivered {ids[i].decode()}, "
                           f"{ref} {ref_ids[i].decode()} (view:sender:seq:index)")
    return out


def gap_notices(lv: Lives) -> list[str]:
    out = []
    for proc, gaps in sorted(lv.gaps.items()):
        for view, after, last in gaps:
            if after is not None and after != last:
                out.append(f"{proc}: the gap notice before view {view} says the last "
                           f"ordered message was [view, position] {list(after)}, its log's "
                           f"last was {list(last) if last else None}")
    return out


# ------------------------------------------------------------------------ the clients
def check_clients(recorders: list[Recorder],
                  joined_at: dict[int, float] | None = None) -> list[Violation]:
    """``faultload.verdict`` over the clients (needs a settled run). ``joined_at``: when
    each client's join was answered (``late_join``)."""
    problems = [p for p in verdict(recorders, settled=True).problems
                if not late_join(p, recorders, joined_at or {})]
    lost = [p for p in problems if "not reported back and delivered nowhere" in p
            or "not delivered by" in p]
    gaps = [p for p in problems if ": the gap before view " in p]  # faultload.gap_problems
    other = [p for p in problems if p not in lost and p not in gaps]
    return (_cap("delivered_or_reported", lost)
            + _cap("sender_outcome", unseen_by_sender(recorders))
            + _cap("client_views", other) + _cap("gap_notice", gaps))


CONTIGUOUS = re.compile(r"view (\d+): client (\d+) of node \d+'s positions are not "
                        r"contiguous from 0")


def late_join(problem: str, recorders: list[Recorder], joined_at: dict[int, float]) -> bool:
    """Whether ``problem`` is the verdict's "positions are not contiguous from 0" for a
    client whose join was answered after that view's ``view`` frame, and whose
    deliveries in it are contiguous from the first. A join made while the daemon is
    outside a primary view is answered by the daemon's snapshot, at its position in the
    next view (daemon/groups.py), so such a client rightly receives that view from
    there on; the verdict assumes a client that saw a view's frame gets all of it."""
    m = CONTIGUOUS.fullmatch(problem)
    if m is None:
        return False
    view, tag = int(m.group(1)), int(m.group(2))
    rec = next((r for r in recorders if r.tag == tag), None)
    if rec is None or tag not in joined_at:
        return False
    frames = [n.at for n in rec.views() if n.frame.get("view") == view and n.primary]
    if not frames or frames[0] >= joined_at[tag]:
        return False
    positions = [e[3] for e in rec.timeline if e[0] == DELIVER and e[2] == view]
    return bool(positions) and positions == list(range(positions[0],
                                                       positions[0] + len(positions)))


def unseen_by_sender(recorders: list[Recorder]) -> list[str]:
    """Messages of a client still connected at the end that this client neither saw
    delivered nor had reported back. The verdict above accepts a message delivered
    only by a daemon that did not complete its view (non-uniform agreed delivery);
    the sender's own daemon, which stayed up, still owes its client one outcome."""
    out = []
    where: dict[tuple[int, int], list[str]] = {}
    for r in recorders:
        for e in r.timeline:
            if e[0] == DELIVER:
                where.setdefault((e[4], e[5]), []).append(
                    f"{r}{'' if r.open_ else ' (closed)'} in view {e[2]} at {e[3]}")
    for r in recorders:
        if not r.open_:
            continue
        seen = {n for tag, n in r.delivered_keys() if tag == r.tag}
        unseen = [n for n in range(r.next_number)
                  if n not in seen and n not in r.reported and n not in r.delivered_away]
        if unseen:
            elsewhere = "; ".join(f"{n}: " + (", ".join(where[(r.tag, n)][:3])
                                              if (r.tag, n) in where else "nowhere")
                                  for n in unseen[:3])
            out.append(f"{r}: {len(unseen)} of its messages neither delivered to it nor "
                       f"reported back, e.g. {unseen[:5]} (delivered by {elsewhere})")
    return out


# ------------------------------------------------------------------------ health
def check_health(samples: Sequence[HealthSample], outages: Sequence[Outage],
                 exclude_within: float) -> list[Violation]:
    """No ``ok`` outside a primary view; no primary view holding a node its reporter
    could not hear for longer than ``exclude_within`` seconds."""
    out = []
    for s in samples:
        if s.ok and not s.primary:
            out.append(f"{s.who} said ok=true outside a primary view (view {s.view}, "
                       f"sampled at t={s.at:.2f})")
        if not s.primary:
            continue
        for m in s.members:
            if m == s.node:
                continue
            for o in outages:
                if o.node == m and o.covers(s.node, s.at) and s.at - o.since > exclude_within:
                    out.append(f"{s.who} reported primary view {s.view} {list(s.members)} "
                               f"holding node {m}, {o.why} {s.at - o.since:.1f} s before "
                               f"(more than {exclude_within:g} s; ok={s.ok})")
                    break
    return _cap("health", out)


# ------------------------------------------------------------------------ the end
def check_converged(final: Sequence[HealthSample], nodes: Sequence[int]) -> list[Violation]:
    """Every node answered, in one primary view of every node."""
    want = tuple(sorted(nodes))
    got = {s.node: s for s in final if s.who == f"node {s.node}"}
    out = []
    missing = [n for n in want if n not in got]
    if missing:
        out.append(f"nodes {missing} did not answer status at the end")
    views = {(s.view, s.members, s.primary) for s in got.values()}
    if len(views) != 1 or not all(s.primary and tuple(sorted(s.members)) == want
                                  for s in got.values()):
        out.append("not one primary view of every node at the end: " + "; ".join(
            f"node {n}: view {s.view} {list(s.members)}{'' if s.primary else ' not primary'}"
            f" ({s.problem or 'ok'})" for n, s in sorted(got.items())))
    return _cap("converged", out)
