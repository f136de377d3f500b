"""The membership state file when the disk refuses it (full, read-only, failing).

``Node.state_to_persist`` hands out a record once; the daemon must have it on disk
before anything of the same step or a later one is sent (a promise or vote that left
must survive a restart: ``amcast.protocols.membership.durable``). These tests make the
file's writes fail with ``ENOSPC`` and check that nothing is sent meanwhile, that the
newest record is the one written once the disk takes it again, and that the operator is
told (health, counter, log).
"""

from __future__ import annotations

import asyncio
import errno
import os
from pathlib import Path
from typing import Any

import pytest
from amcast.daemon.runner import STATE_RETRY_S
from amcast.daemon.state import StateFile
from daemon_helpers import FakeNode
from test_metrics import scrape

from tests.steady import STEADY

ENOSPC = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


class FailingDisk:
    """Wraps a daemon's ``StateFile.write``: raises ``ENOSPC`` while ``full``; records
    every attempt and sets ``failed`` / ``written`` as they happen."""

    def __init__(self, daemon: Any) -> None:
        self.real = daemon.state.write
        self.full = True
        self.attempts: list[bytes] = []
        self.last_written: bytes | None = None
        self.failed = asyncio.Event()
        self.written = asyncio.Event()
        self._waiting: list[tuple[int, asyncio.Future[None]]] = []
        daemon.state.write = self.write

    def attempted(self, more: int) -> asyncio.Future[None]:
        """Resolves once ``more`` further writes were attempted."""
        fut = asyncio.get_running_loop().create_future()
        self._waiting.append((len(self.attempts) + more, fut))
        return fut

    def write(self, data: bytes) -> None:
        self.attempts.append(data)
        for n, fut in self._waiting:
            if len(self.attempts) >= n and not fut.done():
                fut.set_result(None)
        if self.full:
            self.failed.set()
            raise ENOSPC
        self.real(data)
        self.last_written = data
        self.written.set()


def record_sends(daemon: Any) -> list[list[bytes]]:
    sent: list[list[bytes]] = []
    daemon.transport.send = lambda out: sent.append(list(out))
    return sent


async def test_nothing_is_sent_until_the_newest_record_is_on_disk(make_cluster: Any) -> None:
    fake = FakeNode()
    c = await make_cluster(1, node_factory=lambda *a, **k: fake, shutdown={"grace_s": 0.2})
    d = c.daemons[0]
    disk = FailingDisk(d)
    sent = record_sends(d)
    path = d.state.path
    fake.records.append(b"ballot-1")
    fake.outbox.append(b"promise")
    d._pump()
    assert sent == [] and disk.attempts == [b"ballot-1"]
    assert d.counters.drops["state_unwritable"] == 1
    assert d.counters.state_write_failures == 1
    health = d.health()
    assert not health["ok"]
    assert any("cannot write the membership state file" in p and "No space left" in p
               for p in health["problems"])
    # a later step with no record of its own is held too, and the retry is rate-limited
    fake.outbox.append(b"heartbeat")
    d._pump()
    assert sent == [] and disk.attempts == [b"ballot-1"]
    assert d.counters.drops["state_unwritable"] == 2
    # a newer record supersedes the unwritten one
    fake.records.append(b"ballot-2")
    fake.outbox.append(b"vote")
    d._state_retry_at = 0.0
    d._pump()
    assert sent == [] and disk.attempts == [b"ballot-1", b"ballot-2"]
    assert d.counters.drops["state_unwritable"] == 3
    assert not path.exists() or path.read_bytes() not in (b"ballot-1", b"ballot-2")
    # the disk takes it again: the daemon's own retry writes the newest record, no input
    disk.full = False
    await asyncio.wait_for(disk.written.wait(), 10 * STATE_RETRY_S + 5)
    assert disk.last_written == b"ballot-2" and path.read_bytes() == b"ballot-2"
    assert d.health()["ok"] and d.state_error is None
    fake.outbox.append(b"heartbeat")
    d._pump()
    assert sent == [[b"heartbeat"]]
    failures = d.counters.state_write_failures
    assert failures >= 2
    scraped = scrape(d._take_metrics_snapshot())
    assert f"amcast_state_write_failures_total {float(failures)}" in scraped
    assert 'amcast_drops_total{reason="state_unwritable"} 3.0' in scraped


async def test_a_view_change_waits_for_a_member_whose_disk_is_full(make_cluster: Any) -> None:
    """Real Nodes: node 0 leaves while node 2 cannot write its state. Node 2 sends
    nothing while a record it was handed is not on disk, so node 1 cannot form the next
    primary view alone; once the disk takes the record, {1, 2} is installed and the file
    holds what the Node last handed out."""
    c = await make_cluster(3, protocol={"insecure": True, **STEADY, "suspect_timeout": 1.0})
    d1, d2 = c.daemons[1], c.daemons[2]
    disk = FailingDisk(d2)
    handed: list[bytes | None] = [None]
    state_to_persist = d2.node.state_to_persist

    def spy_state() -> bytes | None:
        record = state_to_persist()
        if record is not None:
            handed[0] = record
        return record

    d2.node.state_to_persist = spy_state
    send = d2.transport.send
    violations: list[bytes] = []
    sends_after_a_failure = [0]

    def checked_send(out: list[bytes]) -> None:
        if handed[0] is not None and handed[0] != disk.last_written:
            violations.append(handed[0])  # a datagram left ahead of its durable state
        if disk.failed.is_set() and disk.full:
            sends_after_a_failure[0] += 1
        send(out)

    d2.transport.send = checked_send
    c.daemons[0].request_stop("test")
    await asyncio.wait_for(disk.failed.wait(), 20)
    view_before = d1.view_id
    assert not d2.health()["ok"]
    await asyncio.wait_for(disk.attempted(3), 10)  # retried every STATE_RETRY_S
    assert sends_after_a_failure == [0] and d2.counters.drops["state_unwritable"] > 0
    disk.full = False
    async def primary_of(d: Any) -> None:
        while not (d.primary and d.members == [1, 2]):
            await asyncio.wait_for(d.in_primary_view.wait(), 30)
            if not (d.primary and d.members == [1, 2]):
                d.in_primary_view.clear()

    await asyncio.wait_for(asyncio.gather(primary_of(d1), primary_of(d2)), 40)
    assert violations == []
    assert d1.view_id == d2.view_id > view_before
    assert d2.state.path.read_bytes() == handed[0] == disk.last_written
    assert d2.health()["ok"]
    assert d2.counters.state_write_failures >= 1


def test_a_failed_write_keeps_the_old_record_and_removes_the_partial_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    state = StateFile(str(tmp_path), 3)
    state.write(b"old record")
    real_write = os.write
    calls = [0]

    def half_then_full(fd: int, data: Any) -> int:
        calls[0] += 1
        if calls[0] == 1:
            return real_write(fd, bytes(data[: len(data) // 2]))
        raise ENOSPC

    monkeypatch.setattr(os, "write", half_then_full)
    with pytest.raises(OSError) as info:
        state.write(b"a new record, longer")
    assert info.value.errno == errno.ENOSPC
    assert state.path.read_bytes() == b"old record"
    assert not state.path.with_suffix(".tmp").exists()


def test_short_writes_are_continued_not_taken_for_the_whole_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    state = StateFile(str(tmp_path), 3)
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: real_write(fd, bytes(data[:3])))
    state.write(b"0123456789abcdef")
    assert state.path.read_bytes() == b"0123456789abcdef"
