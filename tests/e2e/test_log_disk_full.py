"""The delivery log on a full disk, on real processes: 4 amcastd on loopback multicast
under a paced load (``amcast.faultload``), node 3's ``logs.dir`` a 256 KiB tmpfs in a
mount namespace of its own (``unshare -m``), filled from outside through
``/proc/<pid>/root`` for a while, then freed. Deliveries go on (the run's verdict is
clean), the daemon says so in its log, and once its disk takes writes again it writes a
``lost`` record. That record is sound: every delivery node 0 logged before it that node 3
did not log lies in a view the record names and within its span, so the audit's
exemption (``docs/log-schema.md``) never hides a record the disk did not refuse.
Skipped with the reason where mount namespaces or tmpfs mounts are not allowed."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from disk_helpers import fill, node3_on_tmpfs, seen_inside

from amcast.faultload import FaultRun

WAIT = 30.0
LOAD_S = 1.0
FULL_S = 1.5
SLACK_S = 0.5  # the same delivery's times at two daemons of one host differ by far less


@pytest.fixture
async def run() -> AsyncIterator[FaultRun]:
    async with node3_on_tmpfs("amlf-", "logs") as fault_run:
        yield fault_run


def records(directory: Path) -> list[dict[str, Any]]:
    """The records of every ``delivery.jsonl*`` file; a line a full disk cut short is
    skipped, as the Spark job skips it (``unreadable``)."""
    out = []
    for path in sorted(directory.glob("delivery.jsonl*")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict):
                out.append(rec)
    return out


@pytest.mark.processes
async def test_the_lost_record_names_every_delivery_the_full_disk_refused(
    run: FaultRun,
) -> None:
    cluster = run.cluster
    node3 = cluster.nodes[3]
    assert node3.pid is not None
    logs_dir = seen_inside(node3.pid, node3.log_dir)
    log = node3.config.parent / "amcastd.log"
    await asyncio.sleep(LOAD_S)
    filler = fill(logs_dir)
    await run.until(lambda: "cannot write the logs" in log.read_text(), WAIT,
                    "node 3 failing to write its logs")
    await asyncio.sleep(FULL_S)
    filler.unlink()
    await run.until(lambda: any(r["type"] == "lost" for r in records(logs_dir)), WAIT,
                    "node 3's lost record")
    time.sleep(0.2)  # the flush that wrote it is done: read what it wrote
    written = records(logs_dir)
    await asyncio.sleep(LOAD_S)
    verdict = await run.stop_and_judge(WAIT)
    print(verdict.summary())
    assert verdict.problems == [] and verdict.accounted_for  # deliveries went on
    assert "the logs are written again" in log.read_text()

    (lost,) = [r for r in written if r["type"] == "lost"]
    assert lost["node"] == 3 and lost["refused"] >= 1 and lost["since"] <= lost["ts"]
    own = {(r["view"], r["sender"], r["seq"]) for r in written if r["type"] == "delivery"}
    first = min(r["ts"] for r in written if r["type"] == "delivery")
    node0 = [r for r in records(cluster.nodes[0].log_dir) if r["type"] == "delivery"]
    # node 0's deliveries in the part of the run node 3's copy spans, that node 3 lacks
    refused = [r for r in node0 if first < r["ts"] < lost["ts"] - SLACK_S
               and (r["view"], r["sender"], r["seq"]) not in own]
    print(f"{len(refused)} deliveries refused by node 3's disk; lost record: since "
          f"{lost['since']:.3f}, {lost['ts'] - lost['since']:.3f} s, views {lost['views']}, "
          f"{lost['refused']} refused writes")
    assert refused, "the full disk refused no delivery record"
    for r in refused:
        assert r["view"] in lost["views"], r
        assert lost["since"] - SLACK_S <= r["ts"] <= lost["ts"] + SLACK_S, r
