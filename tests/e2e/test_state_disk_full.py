"""A daemon whose disk is full, on real processes: 4 amcastd on loopback multicast under
a paced load (``amcast.faultload``), node 3's ``node.state_dir`` a 256 KiB tmpfs in a
mount namespace of its own (``unshare -m``), filled from outside through
``/proc/<pid>/root``. Node 0 is killed (-9): the next view needs node 3 (3 of 4 listed),
whose daemon cannot write the ballot it would promise, so it sends nothing and no
primary view forms; once the filler file is removed, node 3 writes its record, {1, 2, 3}
is installed, and the whole history is judged (``faultload.verdict``: every message of a
client that stayed connected delivered exactly once in one view, or reported to it).
Skipped with the reason where mount namespaces or tmpfs mounts are not allowed."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from amcast.protocols.membership.durable import DurableState
from disk_helpers import fill, node3_on_tmpfs, seen_inside

from amcast.faultload import FaultRun

WAIT = 30.0
LOAD_S = 1.0
SUSPECT_TIMEOUT = 0.8  # amcast's default


@pytest.fixture
async def run() -> AsyncIterator[FaultRun]:
    async with node3_on_tmpfs("amdf-", "state") as fault_run:
        yield fault_run


@pytest.mark.processes
async def test_a_full_disk_holds_the_daemon_back_until_its_ballot_is_written(
    run: FaultRun,
) -> None:
    cluster = run.cluster
    node3 = cluster.nodes[3]
    assert node3.pid is not None
    state_dir = seen_inside(node3.pid, node3.config.parent / "state")
    log = node3.config.parent / "amcastd.log"
    state_file = state_dir / "node-3.state"
    before = state_file.read_bytes()
    await asyncio.sleep(LOAD_S)
    filler = fill(state_dir)
    killed_at = cluster.kill(0)
    await run.until(lambda: "cannot write the membership state file" in log.read_text(),
                    WAIT, "node 3 failing to write its state")
    # silent longer than the others' suspect_timeout: no primary view of {1, 2, 3} forms
    await asyncio.sleep(3 * SUSPECT_TIMEOUT)
    survivors = [run.of(i) for i in (1, 2, 3)]
    assert all(r.first_view([1, 2, 3], killed_at) is None for r in survivors)
    assert state_file.read_bytes() == before  # the old record, untouched
    filler.unlink()
    freed_at = time.monotonic()
    freed = await run.wait_view([1, 2, 3], survivors, after=killed_at, timeout=WAIT)
    print(f"disk freed to the view of {{1, 2, 3}}: {max(freed.values()) - freed_at:.3f} s")
    view = survivors[0].first_view([1, 2, 3], killed_at)
    assert view is not None
    await asyncio.sleep(LOAD_S)
    verdict = await run.stop_and_judge(WAIT)
    print(verdict.summary())
    assert verdict.problems == [] and verdict.accounted_for
    durable = DurableState.decode(state_file.read_bytes(), 3)
    assert durable.max_view_id >= view.frame["view"]
    assert "the membership state file is written again" in log.read_text()
