"""Failover on real daemons (issue 12, items 8 and 9): kill -9, SIGSTOP, SIGTERM under load.

4 amcastd on loopback multicast with amcast's default membership settings
(``suspect_timeout`` 0.8 s), a recording client on every node sending 200 messages/s
(``amcast.faultload``). Each test injects its fault mid-stream, waits (bounded, woken by
the clients' frames) for the views it expects, lets the load run on, stops it, waits
until every connected client is in one view with everything delivered, and judges the
whole recorded history with ``faultload.verdict``: same members for a view id
everywhere, identical sequences (positions from 0) at every daemon that completed a
view, each message of a client that stayed connected delivered exactly once in one view
unless reported back to it. A load-induced extra view change (a starved daemon excluded,
its clients told with a gap) passes: the verdict judges whatever views happened.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from amcast.faultload import (
    CLOSED,
    DELIVER,
    GAP,
    VIEW,
    FaultRun,
    Notice,
    Recorder,
    gap_problems,
    loaded,
    verdict,
)
from amcast.localcluster import LocalCluster

SUSPECT_TIMEOUT = 0.8  # amcast's default, which these tests keep
WAIT = 30.0  # bound on every wait for a view (a loaded 2-core CI machine)
LOAD_S = 1.0  # seconds of load between the steps


@pytest.fixture(params=["multicast", "unicast"])
async def run(request: pytest.FixtureRequest) -> AsyncIterator[FaultRun]:
    directory = Path(tempfile.mkdtemp(prefix="amfo-", dir="/tmp"))
    cluster = LocalCluster(4, directory, metrics=False, log_level="info",
                           transport=request.param)
    try:
        async with loaded(cluster) as fault_run:
            yield fault_run
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def saw_gap_before_view(rec: Recorder, view: int, log: Path) -> bool:
    """The client got a ``gap`` for ``view`` before that view's ``view`` frame; when it
    connected after the daemon was already in the view, the daemon's log says it."""
    for n in rec.notices:
        if n.kind == GAP and n.frame["view"] == view:
            return True
        if n.primary and n.frame["view"] == view:
            return False
    assert rec.welcome.get("view") == view, "the client missed neither, yet saw no gap"
    return '"order gap"' in log.read_text()


async def finish(run: FaultRun) -> None:
    await asyncio.sleep(LOAD_S)
    verdict = await run.stop_and_judge(WAIT)
    print(verdict.summary())
    assert verdict.problems == [] and verdict.accounted_for


@pytest.mark.processes
async def test_kill9_mid_stream_survivors_go_on_and_the_restarted_daemon_rejoins(
    run: FaultRun,
) -> None:
    cluster = run.cluster
    await asyncio.sleep(LOAD_S)
    killed_at = cluster.kill(2)
    survivors = [run.of(i) for i in (0, 1, 3)]
    seen = await run.wait_view([0, 1, 3], survivors, after=killed_at, timeout=WAIT)
    print(f"kill -9 to the view of the survivors: {max(seen.values()) - killed_at:.3f} s")
    view_without = survivors[0].first_view([0, 1, 3], killed_at)
    assert view_without is not None and 2 in view_without.frame["excluded"]
    await asyncio.sleep(LOAD_S)
    await asyncio.to_thread(cluster.wait_exit, 2, 10)
    restarted = await asyncio.to_thread(cluster.restart, 2, 60)
    newcomer = await run.connect(2)
    back = await run.wait_view(range(4), [*survivors, newcomer], after=restarted.spawned_at,
                               timeout=WAIT)
    print(f"restart: READY {restarted.ready_at - restarted.spawned_at:.3f} s after the "
          f"spawn, in the view {max(back.values()) - restarted.ready_at:.3f} s after READY")
    rejoined = newcomer.first_view(range(4), restarted.spawned_at)
    assert rejoined is not None and 2 in rejoined.frame["joined"]
    assert saw_gap_before_view(newcomer, rejoined.frame["view"],
                               cluster.nodes[2].config.parent / "amcastd.log")
    await finish(run)
    # the survivors kept ordering in the view without the killed daemon
    verdict = run.verdict()
    assert verdict.views[view_without.frame["view"]]["messages"] > 0
    # everything sent after the rejoin is delivered identically on all 4: each client's
    # last message was sent after the rejoin, and the final view holds it at all 4
    final = run.of(0).last_view()
    assert final is not None and final.frame["members"] == [0, 1, 2, 3]
    info = verdict.views[final.frame["view"]]
    assert sorted(info["complete"]) == sorted(r.tag for r in run.live())
    for rec in run.live():
        # its last message that was not reported back as undelivered (a spurious view
        # change on a loaded machine reports the messages it left in doubt)
        told = [k for k in range(rec.next_number) if k not in rec.reported]
        last = (rec.tag, told[-1])
        assert all(last in other.delivered_keys() for other in run.live()), (rec, last)


@pytest.mark.processes
async def test_sigstop_longer_than_suspect_timeout_excludes_then_rejoins(run: FaultRun) -> None:
    cluster = run.cluster
    await asyncio.sleep(LOAD_S)
    paused = run.of(3)
    stopped_at = cluster.pause(3)
    others = [run.of(i) for i in (0, 1, 2)]
    try:
        await run.wait_view([0, 1, 2], others, after=stopped_at, timeout=WAIT)
        await asyncio.sleep(max(0.0, stopped_at + 3 * SUSPECT_TIMEOUT - time.monotonic()))
    finally:
        resumed_at = cluster.resume(3)
    await run.wait_view(range(4), [*others, paused], after=resumed_at, timeout=WAIT)
    # on resume: no primary view (it was paused), then a gap notice and a view with it
    after = [n for n in paused.notices if n.at >= resumed_at]
    lost = next(n for n in after if n.kind != GAP)
    assert not lost.primary and lost.frame["reason"] in ("paused", "excluded"), lost.frame
    back = paused.first_view(range(4), resumed_at)
    assert back is not None
    gap = next(n for n in after if n.kind == GAP and n.frame["view"] == back.frame["view"])
    # a state transfer starts right after the last message this client saw: the gap's
    # after names it, in the deliver frames' positions (the verdict checks every client)
    assert gap.frame["after"] is not None and gap_problems(paused) == []
    await finish(run)


@pytest.mark.processes
async def test_sigterm_under_load_is_a_graceful_leave(run: FaultRun) -> None:
    cluster = run.cluster
    await asyncio.sleep(LOAD_S)
    others = [run.of(i) for i in (0, 2, 3)]
    term_at = cluster.terminate(1)
    seen = await run.wait_view([0, 2, 3], others, after=term_at, timeout=WAIT)
    took = max(seen.values()) - term_at
    print(f"SIGTERM to the view without the node at every survivor: {took:.3f} s")
    assert await asyncio.to_thread(cluster.wait_exit, 1, WAIT) == 0
    for rec in others:
        view = rec.first_view([0, 2, 3], term_at)
        assert view is not None
        # no suspicion timeout: the view removes it as having left, not as excluded
        assert view.frame["left"] == [1] and view.frame["excluded"] == [], view.frame
    leaver = run.of(1)
    assert leaver.close_code == "shutting_down"
    # the leaver closed its last view where the others did: its client got every message
    # it sent (none reported undelivered) and the same deliveries in that view
    assert leaver.reported == set()
    last = max(e[2] for e in leaver.timeline if e[0] == DELIVER)
    def keys(rec: Recorder) -> list[tuple[int, int]]:
        return [(e[4], e[5]) for e in rec.timeline if e[0] == DELIVER and e[2] == last]
    assert keys(leaver) and keys(leaver) == keys(run.of(0))
    await finish(run)


# ---- the verdict itself: it must fail on histories that break a guarantee ------------
def recorder(node: int, sent: int = 0, *, welcome_view: int = 1) -> Recorder:
    rec = Recorder(node, tag=node)
    rec.welcome = {"view": welcome_view}
    rec.next_number = sent
    return rec


def view(rec: Recorder, v: int, members: list[int], previous: int, primary: bool = True) -> None:
    rec.timeline.append((VIEW, 0.0, {"t": "view", "view": v, "members": members,
                                     "primary": primary, "previous": previous}))
    rec.notices.append(Notice(0.0, VIEW, rec.timeline[-1][2]))


def deliver(rec: Recorder, v: int, keys: list[tuple[int, int]], start: int = 0) -> None:
    for i, (tag, n) in enumerate(keys):
        rec.timeline.append((DELIVER, 0.0, v, start + i, tag, n))


def kill(rec: Recorder) -> None:
    rec.closed_at = 1.0
    rec.timeline.append((CLOSED, 1.0, "closed"))


def three_clients() -> list[Recorder]:
    """Clients of nodes 0, 1, 2 sending 2 messages each; node 2 killed in view 1."""
    recs = [recorder(i, sent=2) for i in range(3)]
    order = [(0, 0), (1, 0), (2, 0), (0, 1)]
    for r in recs:
        deliver(r, 1, order if r.node < 2 else order[:3])
    kill(recs[2])
    for r in recs[:2]:
        view(r, 2, [0, 1], previous=1)
        deliver(r, 2, [(1, 1)])
    return recs


def test_the_verdict_accepts_a_failover_that_keeps_the_guarantees() -> None:
    got = verdict(three_clients())
    assert got.problems == [] and got.sent == 4 and got.exactly_once == 4
    assert got.views[1]["complete"] == [0, 1] and got.lost_clients == 1


def test_the_verdict_catches_broken_guarantees() -> None:
    recs = three_clients()  # two daemons complete view 1 in different orders
    tl = recs[1].timeline
    tl[0], tl[1] = (DELIVER, 0.0, 1, 0, *tl[1][4:]), (DELIVER, 0.0, 1, 1, *tl[0][4:])
    assert "different sequences" in " ".join(verdict(recs).problems)

    recs = three_clients()  # a message of a connected client delivered nowhere
    recs[0].next_number = 3
    assert "delivered nowhere" in " ".join(verdict(recs).problems)

    recs = three_clients()  # delivered twice by one client
    deliver(recs[0], 2, [(0, 0)], start=1)
    deliver(recs[1], 2, [(0, 0)], start=1)
    problems = " ".join(verdict(recs).problems)
    assert "more than once" in problems and "more than one view" in problems

    recs = three_clients()  # reported back as undelivered, yet delivered
    recs[0].reported.add(1)
    assert "reported back" in " ".join(verdict(recs).problems)

    recs = three_clients()  # one view id, two member lists
    view(recs[0], 3, [0, 1], previous=2)
    view(recs[1], 3, [0, 1, 2], previous=2)
    assert "members" in " ".join(verdict(recs).problems)

    recs = three_clients()  # positions that skip
    recs[0].timeline[-1] = (DELIVER, 0.0, 2, 5, 1, 1)
    assert "contiguous" in " ".join(verdict(recs).problems)

    recs = three_clients()  # a survivor missing the killed daemon's message
    del recs[1].timeline[2]
    recs[1].timeline[2] = (DELIVER, 0.0, 1, 2, 0, 1)
    assert "different sequences" in " ".join(verdict(recs).problems)

    recs = three_clients()  # a survivor missing the whole view it completed
    recs[1].timeline = [e for e in recs[1].timeline if e[:1] != (DELIVER,) or e[2] != 2]
    assert "different sequences" in " ".join(verdict(recs).problems)


def gap_notice(rec: Recorder, v: int, after: list[int] | None) -> None:
    rec.timeline.append((GAP, 0.0, {"t": "gap", "view": v, "after": after}))
    rec.notices.append(Notice(0.0, GAP, rec.timeline[-1][2]))


def test_the_verdict_checks_that_a_gap_is_after_the_last_message_the_client_saw() -> None:
    """Node 1's daemon is cut off after position 1 of view 1, and rejoins in view 3."""
    recs = three_clients()
    recs[1].timeline = recs[1].timeline[:2]
    view(recs[1], 1, [0, 1], previous=1, primary=False)
    gap_notice(recs[1], 3, [1, 1])
    view(recs[1], 3, [0, 1], previous=2)
    assert not [p for p in verdict(recs).problems if "gap" in p]
    recs[1].timeline[-2][2]["after"] = [1, 3]  # the engine's count, or another unit's
    (problem,) = [p for p in verdict(recs).problems if "gap" in p]
    assert "after (1, 3)" in problem and "at (1, 1)" in problem
    recs[1].timeline[-2][2]["after"] = None
    assert [p for p in verdict(recs).problems if "gap" in p]
    late = recorder(1)  # connected after its daemon rejoined: saw nothing to compare
    gap_notice(late, 3, [1, 1])
    assert gap_problems(late) == []


def test_a_killed_daemons_last_agreed_deliveries_may_differ() -> None:
    """Non-uniform agreed delivery (docs/membership.md): the killed daemon's tail after
    the common prefix is counted, not a problem; a completing daemon's would be."""
    recs = three_clients()
    recs[2].timeline[2] = (DELIVER, 0.0, 1, 2, 0, 1)
    got = verdict(recs)
    assert got.problems == [] and got.nonuniform_tail == 1
