"""Logs: structlog for people and operators, JSON-lines files for the Spark job.

Theory of operation:

- ``configure_logging`` sets structlog up once: a coloured console renderer when stderr
  is a terminal (or ``logs.format = "console"``), one JSON object per line otherwise.
- ``RotatingJsonl`` appends lines to ``<dir>/<name>.jsonl`` through a buffered file,
  rotating by size to ``.1``, ``.2``, ... (``rotate_keep`` files kept); files are 0600
  and a directory it creates 0700 (they name clients and hold payload digests). It is
  flushed on
  every metrics snapshot and at shutdown, so the hot path costs one formatted string
  and one buffered write per delivered *vertex*.
- ``DeliveryLog`` writes the records of ``docs/log-schema.md`` (schema 1) into
  ``delivery.jsonl``: ``start`` once per daemon life, ``delivery`` per delivered vertex,
  ``view`` per installed view (``primary`` true) and per loss of the primary view
  (``primary`` false, with the reason), ``gap`` per order gap notice; and ``metrics``
  snapshots into ``metrics.jsonl``. Membership records (``start``, ``view``, ``gap``) are
  flushed when written. Every record carries the daemon's ``incarnation``: a
  restarted daemon appends to the same files, and the Spark job tells its lives apart by
  it. Delivery records are formatted with an f-string (every field is a number or a
  fixed identifier), the rest with ``json``.
- Lost records: a write, flush or rotation the disk refuses loses what it held (and what
  sat in the file's buffer). ``DeliveryLog`` keeps, per span between two flushes that went
  through on every file, the time of its first record and the views its records were
  in; when a flush finds refusals since the last good one, that span joins an *outage*,
  and the first good flush after it writes a ``lost`` record (``docs/log-schema.md``): the
  records of this life between ``since`` and ``ts`` in ``views`` may be missing. The
  Spark job then leaves those views of this life out of the checks a missing record
  would fail (completeness, positions, gap notices, deliveries outside a view) and lists
  the span. An outage still open when the daemon stops (``close``) leaves no record.
- Gap notices: ``after`` is the ``(view, position)`` of the last ordered application
  message the daemon delivered before the gap, in the positions of the delivery records
  and of the clients' ``deliver`` frames (the daemon converts the engine's, which count
  its payloads: envelopes and control notices).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any, TextIO

import structlog

SCHEMA = 1


class StderrLogger(structlog.PrintLogger):
    """structlog's ``PrintLogger`` that never raises: a line its file refuses (a full
    disk under a redirected stderr, a closed pipe) is dropped and counted in ``refused``.
    A log call sits in exception handlers and event handlers of the pump: raising there
    would abandon the rest of a batch of deliveries."""

    refused = 0
    """Lines dropped since start (all loggers of the process)."""

    def msg(self, message: str) -> None:
        try:
            super().msg(message)
        except (OSError, ValueError):  # ValueError: the file was closed
            StderrLogger.refused += 1

    log = debug = info = warn = warning = msg
    fatal = failure = err = error = critical = exception = msg


class StderrLoggerFactory:
    def __init__(self, file: TextIO) -> None:
        self._file = file

    def __call__(self, *args: Any) -> StderrLogger:
        return StderrLogger(self._file)


def configure_logging(level: str = "info", fmt: str = "auto") -> None:
    console = fmt == "console" or (fmt == "auto" and sys.stderr.isatty())
    renderer: Any = (
        structlog.dev.ConsoleRenderer() if console else structlog.processors.JSONRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping()[level.upper()]
        ),
        logger_factory=StderrLoggerFactory(sys.stderr),
        cache_logger_on_first_use=False,
    )


def open_private(path: Path) -> TextIO:
    """Append to ``path``, readable by its owner only (0600, also when the file existed
    with a wider mode): the delivery log holds every payload digest and client id."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, "a", encoding="utf-8", buffering=1 << 16)


class RotatingJsonl:
    """Size-rotated JSON-lines file (see the module docstring).

    Opened at start-up (an error there is the daemon's start-up error). Afterwards a
    write, flush or rotation the disk refuses (``OSError``: full, read-only, failing) never
    raises: it is counted (``failures``), ``error`` says why until a later flush goes
    through, and a file that could not be reopened after a rotation is reopened by the next
    write. What the refused writes held is lost from the file (a line may be cut short);
    the daemon reports it (``status`` ``logs``, ``amcast_log_write_failures_total``), and
    its health is unaffected: ordering and deliveries go on."""

    def __init__(self, path: Path, rotate_bytes: int, keep: int) -> None:
        self.path = path
        self._rotate_bytes = rotate_bytes
        self._keep = keep
        if not path.parent.exists():
            path.parent.mkdir(parents=True)
            path.parent.chmod(0o700)  # whatever the process umask
        self._fh: TextIO | None = open_private(path)
        self._size = self._fh.tell()
        self.failures = 0
        """Writes, flushes and rotations the disk refused, since start."""
        self.error: str | None = None
        """The last refusal (``path: reason``) until a flush goes through again."""

    def write(self, line: str) -> None:
        try:
            if self._fh is None:
                self._fh = open_private(self.path)
                self._size = self._fh.tell()
            self._fh.write(line)
            self._size += len(line)
            if self._size >= self._rotate_bytes:
                self._rotate()
        except OSError as exc:
            self._refused(exc)

    def _refused(self, exc: OSError) -> None:
        self.failures += 1
        self.error = f"{self.path}: {exc.strerror or exc}"

    def _rotate(self) -> None:
        fh, self._fh = self._fh, None  # closed even when its last flush fails
        assert fh is not None
        fh.close()
        for i in range(self._keep - 1, 0, -1):
            src = self.path.with_name(f"{self.path.name}.{i}")
            if src.exists():
                os.replace(src, self.path.with_name(f"{self.path.name}.{i + 1}"))
        os.replace(self.path, self.path.with_name(f"{self.path.name}.1"))
        self._fh = open_private(self.path)
        self._size = 0

    def flush(self) -> None:
        if self._fh is None:
            return
        try:
            self._fh.flush()
        except OSError as exc:
            self._refused(exc)
        else:
            self.error = None

    def close(self) -> None:
        if self._fh is not None:
            with contextlib.suppress(OSError):  # counted by the flush before, if any
                self._fh.close()
            self._fh = None


class DeliveryLog:
    """The per-node records of ``docs/log-schema.md`` (one daemon life: ``incarnation``)."""

    def __init__(
        self, directory: str | Path, node: int, *, rotate_bytes: int, keep: int,
        deliveries: bool = True, incarnation: int = 0,
    ) -> None:
        directory = Path(directory)
        self.node = node
        self.incarnation = incarnation
        self._head = f'{{"schema":1,"type":"delivery","node":{node},"incarnation":{incarnation},'
        self._deliveries = (
            RotatingJsonl(directory / "delivery.jsonl", rotate_bytes, keep) if deliveries else None
        )
        self._views = self._deliveries or RotatingJsonl(
            directory / "view.jsonl", rotate_bytes, keep
        )
        self._metrics = RotatingJsonl(directory / "metrics.jsonl", rotate_bytes, keep)
        # the span since the last flush that went through on every file (module doc)
        self._span_since: float | None = None
        self._span_views: set[int] = set()
        self._span_view: int | None = None
        self._last_ts: float | None = None
        self._good_failures = 0
        """``failures`` at the last flush that went through on every file."""
        self._outage: tuple[float, set[int], int] | None = None
        """(since, views, failures before it) of refusals no ``lost`` record covers yet."""
        self.lost_records = 0
        """``lost`` records written by this life."""

    def _note(self, view: int | None, ts: float) -> None:
        """A record of ``view`` (None: no view) handed to a file at ``ts``."""
        self._last_ts = ts
        if self._span_since is None:
            self._span_since = ts
        if view is not None and view != self._span_view:
            self._span_view = view
            self._span_views.add(view)

    def delivery(
        self, *, view: int, variant: str, phi: float, sender: int, seq: int, position: int | None,
        count: int, nbytes: int, service: str, activation: int | None, rule: str,
        ntail: int | None, unseen: int | None, nvt: int | None, send_ts: float, ts: float,
        envelopes: int,
    ) -> None:
        """One ``delivery`` record; the causal service writes null for ordering fields."""
        if position is None:
            pos = activation = ntail = unseen = nvt = "null"  # type: ignore[assignment]
        else:
            pos = position  # type: ignore[assignment]
        if self._deliveries is None:
            return
        self._note(view, ts)
        self._deliveries.write(
            f'{self._head}"view":{view},'
            f'"variant":"{variant}","phi":{phi!r},"sender":{sender},"seq":{seq},'
            f'"position":{pos},"count":{count},"bytes":{nbytes},"service":"{service}",'
            f'"activation":{activation},"rule":"{rule}","ntail":{ntail},"unseen":{unseen},'
            f'"nvt":{nvt},"send_ts":{send_ts!r},"ts":{ts!r},"envelopes":{envelopes}}}\n'
        )

    def global_delivery(self, *, view: int, cluster: str, index: int, origin: str,
                        sender: int, msg: str, gts: int, group: str, clusters: list[str],
                        nbytes: int, send_ts: float, ts: float) -> None:
        """One ``global`` record: a cross-cluster message delivered here
        (``amcast.daemon.federation``), in delivery order (``index``: global deliveries
        before it in this life); ``cluster`` is this daemon's, ``origin`` and ``sender``
        its sender's, ``clusters`` where it went."""
        target = self._deliveries or self._views
        self._note(view, ts)
        target.write(json.dumps({
            "schema": SCHEMA, "type": "global", "node": self.node,
            "incarnation": self.incarnation, "view": view, "cluster": cluster,
            "index": index, "origin": origin, "sender": sender, "msg": msg, "gts": gts,
            "group": group,
            "clusters": clusters, "bytes": nbytes, "send_ts": send_ts, "ts": ts,
        }, separators=(",", ":")) + "\n")

    def _record(self, kind: str, ts: float, **fields: Any) -> None:
        """A membership record, flushed at once (they are rare): a daemon killed later
        keeps its view history, and the deliveries logged before it."""
        if self._outage is not None or self.failures != self._good_failures:
            self.flush()  # a span of refusals ends before this record: not named by it
        self._note(fields.get("view"), ts)
        self._views.write(json.dumps({
            "schema": SCHEMA, "type": kind, "node": self.node, "incarnation": self.incarnation,
            "ts": ts, **fields,
        }) + "\n")
        self.flush()

    def start(self, *, members: list[int], ts: float) -> None:
        """The ``start`` record of this daemon life: its potential members (the list)."""
        self._record("start", ts, members=list(members))

    def view(
        self, *, view: int, members: list[int], ts: float, previous: int | None = None,
        joined: list[int] | tuple[int, ...] = (), left: list[int] | tuple[int, ...] = (),
        excluded: list[int] | tuple[int, ...] = (),
    ) -> None:
        """A primary view installed (``ViewInstalled``); ``previous`` 0 or None: none."""
        self._record("view", ts, view=view, primary=True, members=list(members),
                     previous=previous or None, joined=list(joined), left=list(left),
                     excluded=list(excluded))

    def lost(self, *, view: int, reason: str, reachable: list[int], ts: float) -> None:
        """No longer in a primary view (``QuorumLost``): a ``view`` record, primary false."""
        self._record("view", ts, view=view, primary=False, members=list(reachable),
                     reason=reason)

    def gap(self, *, view: int, after: tuple[int, int] | None, ts: float) -> None:
        """An order gap notice (``OrderGap``) before the first delivery in ``view``.

        ``after`` is the (view, position) of the last ordered application message this
        life delivered, in the positions of its delivery records (the daemon converts
        the engine's, which count envelopes), or None: it delivered none. An
        application's state transfer starts there, so it must be the very message."""
        self._record("gap", ts, view=view, after=None if after is None else list(after))

    def metrics(self, record: dict[str, Any]) -> None:
        ts = record.get("ts")
        if isinstance(ts, int | float):  # the audit does not check metrics: no view noted
            self._note(None, float(ts))
        self._metrics.write(json.dumps({
            "schema": SCHEMA, "type": "metrics", "node": self.node,
            "incarnation": self.incarnation, **record,
        }) + "\n")
        self.flush()

    def _files(self) -> list[RotatingJsonl]:
        return list({id(x): x for x in (self._deliveries, self._views, self._metrics)
                     if x}.values())

    @property
    def failures(self) -> int:
        """Writes the disk refused, over every file of the log (``RotatingJsonl``)."""
        return sum(f.failures for f in self._files())

    @property
    def errors(self) -> list[str]:
        """Why files of the log cannot be written now (empty: they can)."""
        return [f.error for f in self._files() if f.error is not None]

    def flush(self) -> None:
        """Flush every file; account for refused writes, and write the ``lost`` record
        of an outage that is over (module doc)."""
        files = self._files()
        for f in files:
            f.flush()
        failures = sum(f.failures for f in files)
        if failures != self._good_failures or self._outage is not None:
            since, views, before = self._outage or (
                self._span_since if self._span_since is not None else self._last_ts or 0.0,
                set(), self._good_failures)
            views |= self._span_views
            self._outage = (since, views, before)
            if all(f.error is None for f in files):
                self._write_lost(since, views, failures - before)
                failures = sum(f.failures for f in files)
        self._good_failures = failures
        self._end_span()

    def _write_lost(self, since: float, views: set[int], refused: int) -> None:
        until = self._last_ts if self._last_ts is not None else since
        before = self._views.failures
        self._views.write(json.dumps({
            "schema": SCHEMA, "type": "lost", "node": self.node,
            "incarnation": self.incarnation, "ts": until, "since": since,
            "views": sorted(views), "refused": refused,
        }) + "\n")
        self._views.flush()
        if self._views.failures == before and self._views.error is None:
            self._outage = None
            self.lost_records += 1

    def _end_span(self) -> None:
        self._span_since = None
        self._span_views = set()
        self._span_view = None

    def close(self) -> None:
        """Flush (an outage the disk has recovered from gets its ``lost`` record now), then
        close every file."""
        self.flush()
        for f in self._files():
            f.close()
