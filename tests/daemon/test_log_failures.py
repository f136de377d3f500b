"""Log files the disk refuses (full, read-only, failing) and periodic work that raises.

A refused log write never reaches the delivery path: clients keep getting every message,
the refusal is counted (``amcast_log_write_failures_total``, ``status`` ``logs``), said
once in the daemon's log, and the files are written again once the disk takes them. A
periodic task (health tick, metrics snapshot) that raises is counted and runs again.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import structlog
from amcast.daemon import logs
from amcast.daemon.logs import DeliveryLog, RotatingJsonl, StderrLogger, StderrLoggerFactory
from daemon_helpers import FakeNode, envelope
from test_metrics import scrape
from test_pump import a_raising_handler_between_two_deliveries, deliveries, joined

ENOSPC = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


class Disk:
    """While ``full``, every file ``open_private`` opens refuses writes and flushes with
    ``ENOSPC`` (and ``open_private`` itself refuses while ``no_inodes``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.full = False
        self.no_inodes = False
        real_open = logs.open_private
        disk = self

        class Refusing:
            def __init__(self, fh: Any) -> None:
                self._fh = fh

            def write(self, data: str) -> int:
                if disk.full:
                    raise ENOSPC
                return self._fh.write(data)

            def flush(self) -> None:
                if disk.full:
                    raise ENOSPC
                self._fh.flush()

            def __getattr__(self, name: str) -> Any:
                return getattr(self._fh, name)

        def open_private(path: Path) -> Any:
            if disk.no_inodes:
                raise ENOSPC
            return Refusing(real_open(path))

        monkeypatch.setattr(logs, "open_private", open_private)


class ClosedPipe:
    """A stderr whose reader is gone."""

    def write(self, data: str) -> int:
        raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))

    def flush(self) -> None:
        raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_refused_writes_are_counted_never_raised_and_writing_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    disk = Disk(monkeypatch)
    f = RotatingJsonl(tmp_path / "d.jsonl", rotate_bytes=1 << 20, keep=2)
    f.write('{"i":0}\n')
    f.flush()
    assert f.failures == 0 and f.error is None
    disk.full = True
    f.write('{"i":1}\n')
    f.flush()
    assert f.failures == 2 and f.error is not None and "No space left" in f.error
    assert str(tmp_path / "d.jsonl") in f.error
    disk.full = False
    f.write('{"i":2}\n')
    f.flush()
    assert f.error is None and f.failures == 2
    assert {0, 2} <= {r["i"] for r in lines(tmp_path / "d.jsonl")}
    f.close()


def test_a_rotation_that_cannot_reopen_is_retried_by_the_next_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    disk = Disk(monkeypatch)
    f = RotatingJsonl(tmp_path / "d.jsonl", rotate_bytes=64, keep=2)
    disk.no_inodes = True
    for i in range(10):  # rotates past 64 bytes, cannot reopen, keeps trying
        f.write(json.dumps({"i": i, "pad": "x" * 20}) + "\n")
    assert f.failures >= 1 and f.error is not None
    disk.no_inodes = False
    f.write('{"i":99}\n')
    f.flush()
    f.close()
    assert f.error is None
    assert lines(tmp_path / "d.jsonl")[-1]["i"] == 99
    assert (tmp_path / "d.jsonl.1").exists()


def deliver(log: DeliveryLog, view: int, position: int, ts: float) -> None:
    log.delivery(view=view, variant="G-ToTo", phi=2.0, sender=0, seq=position,
                 position=position, count=1, nbytes=10, service="agreed", activation=1,
                 rule="g", ntail=3, unseen=0, nvt=1, send_ts=ts - 0.001, ts=ts, envelopes=1)


def test_a_refused_span_leaves_one_lost_record_with_its_times_and_views(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    disk = Disk(monkeypatch)
    log = DeliveryLog(tmp_path, 2, rotate_bytes=1 << 20, keep=2, incarnation=5)
    log.start(members=[0, 1, 2], ts=1.0)
    log.view(view=10, members=[0, 1, 2], ts=2.0)
    deliver(log, 10, 0, 3.0)
    log.flush()  # a good flush: nothing to report
    disk.full = True
    deliver(log, 10, 1, 5.0)
    log.view(view=11, members=[0, 1, 2], previous=10, ts=6.0)  # flushed at once: refused
    deliver(log, 11, 0, 7.0)
    log.flush()  # still refused: the outage goes on, no record yet
    assert log.lost_records == 0
    disk.full = False
    deliver(log, 11, 1, 8.0)
    log.flush()
    log.flush()  # nothing new refused: no second record
    deliver(log, 11, 2, 9.0)
    log.flush()
    log.close()
    lost = [r for r in lines(tmp_path / "delivery.jsonl") if r["type"] == "lost"]
    assert len(lost) == 1 and log.lost_records == 1
    r = lost[0]
    assert (r["node"], r["incarnation"], r["since"], r["ts"], r["views"]) == (
        2, 5, 5.0, 8.0, [10, 11])
    assert r["refused"] == log.failures >= 2
    assert lines(tmp_path / "delivery.jsonl")[-1]["ts"] == 9.0


def test_a_write_refused_between_two_good_flushes_is_reported_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The disk refuses one write and has room again before the next flush: the flush
    goes through, but the refused line is gone, so a ``lost`` record says so."""
    disk = Disk(monkeypatch)
    log = DeliveryLog(tmp_path, 0, rotate_bytes=1 << 20, keep=2)
    log.view(view=4, members=[0, 1], ts=1.0)
    disk.full = True
    deliver(log, 4, 0, 2.0)  # no buffer in the way here: the write itself is refused
    disk.full = False
    deliver(log, 4, 1, 3.0)
    log.flush()
    log.close()
    records = lines(tmp_path / "delivery.jsonl")
    assert [r["type"] for r in records] == ["view", "delivery", "lost"]
    assert (records[2]["since"], records[2]["ts"], records[2]["views"],
            records[2]["refused"]) == (2.0, 3.0, [4], 1)


def test_closing_after_the_disk_recovered_writes_the_lost_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A daemon stopped before its next metrics snapshot still reports the span."""
    disk = Disk(monkeypatch)
    log = DeliveryLog(tmp_path, 0, rotate_bytes=1 << 20, keep=2)
    log.view(view=4, members=[0, 1], ts=1.0)
    disk.full = True
    deliver(log, 4, 0, 2.0)
    disk.full = False
    log.close()
    assert [r["type"] for r in lines(tmp_path / "delivery.jsonl")] == ["view", "lost"]


def test_no_lost_record_without_a_refusal(tmp_path: Path) -> None:
    log = DeliveryLog(tmp_path, 0, rotate_bytes=1 << 20, keep=2)
    log.view(view=4, members=[0, 1], ts=1.0)
    for k in range(5):
        deliver(log, 4, k, 2.0 + k)
        log.flush()
    log.metrics({"ts": 9.0, "view": 4})
    log.close()
    assert log.lost_records == 0
    assert "lost" not in {r["type"] for r in lines(tmp_path / "delivery.jsonl")}


async def test_deliveries_go_on_while_the_delivery_log_is_refused(
    make_cluster: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    disk = Disk(monkeypatch)
    fake = FakeNode()
    c = await make_cluster(1, node_factory=lambda *a, **k: fake, shutdown={"grace_s": 0.2})
    d = c.daemons[0]
    raw = await joined(c)
    fake.timer_at = d.now() + 1000
    disk.full = True
    for k in range(3):
        fake.deliver([envelope(7, ["g"], [f"m{k}".encode()])], sender=1)
    d.request_pump()
    assert await deliveries(raw, 3) == [b"m0", b"m1", b"m2"]
    assert d.counters.messages_delivered == 3 and not d.counters.drops
    d.snapshot_metrics()  # the periodic flush: refused
    d._tick()
    failures = d.counters.log_write_failures
    assert failures >= 1
    status = d.status()
    assert status["logs"]["write_failures"] == failures and status["logs"]["errors"]
    assert status["health"]["ok"]  # ordering and deliveries are fine
    assert f"amcast_log_write_failures_total {float(failures)}" in scrape(
        d._take_metrics_snapshot())
    disk.full = False
    fake.deliver([envelope(7, ["g"], [b"after"])], sender=1)
    d.request_pump()
    assert await deliveries(raw, 1) == [b"after"]
    d.snapshot_metrics()
    d._tick()
    assert d.status()["logs"]["errors"] == []
    records = lines(Path(d.config.logs.dir) / "delivery.jsonl")
    assert records[-1]["type"] == "lost" and records[-1]["views"] == [d.view_id]
    assert records[-2]["type"] == "delivery" and records[-2]["count"] == 1


async def test_a_periodic_task_that_raises_is_counted_and_runs_again(
    make_cluster: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeNode()
    c = await make_cluster(1, node_factory=lambda *a, **k: fake, shutdown={"grace_s": 0.2})
    d = c.daemons[0]
    calls: list[float] = []
    again = asyncio.Event()
    check_readers = d.api.check_readers

    def failing_once(now: float) -> None:
        calls.append(now)
        if len(calls) == 1:
            raise RuntimeError("boom")
        again.set()
        check_readers(now)

    monkeypatch.setattr(d.api, "check_readers", failing_once)
    await asyncio.wait_for(again.wait(), 10)
    assert d.counters.drops["periodic_error"] == 1


def test_a_log_line_stderr_refuses_is_counted_never_raised(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before = StderrLogger.refused
    logger = StderrLoggerFactory(ClosedPipe())()  # type: ignore[arg-type]
    logger.error("a line nobody can read")
    logger.info("and another")
    assert StderrLogger.refused == before + 2
    with open(os.devnull, "w") as devnull:
        closed = StderrLoggerFactory(devnull)()
    closed.warning("after close")  # a closed file: ValueError, counted the same way
    assert StderrLogger.refused == before + 3


async def test_with_stderr_gone_a_logging_handler_loses_no_delivery_of_its_batch(
    make_cluster: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The daemon's own logging configuration, with stderr refusing every line: an event
    whose handler raises is logged by the pump (``_failed``), and the deliveries after it
    in the same batch still reach the client."""
    monkeypatch.setattr(sys, "stderr", ClosedPipe())
    logs.configure_logging("info", "json")
    before = StderrLogger.refused
    try:
        await a_raising_handler_between_two_deliveries(make_cluster, FakeNode())
        assert StderrLogger.refused > before
    finally:
        structlog.reset_defaults()
