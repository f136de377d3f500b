"""A synthetic log set written through the daemon's own writer (``amcast.daemon.logs``).

Kept with the tests, not in ``amcast.analytics.synthetic``: the analytics package reads
the log schema only and imports nothing of the daemon. Each daemon life gets its own
``DeliveryLog`` (its ``incarnation``) appending to the node's directory, as a restarted
daemon does, and its records go through it in time order (a gap notice's ``after`` is
the daemon's, in the positions of the delivery records, as the synthetic set has it).

``refuse`` makes a node's disk refuse every write and flush (``ENOSPC``) while the
writer hands it the records of a time span, as a full disk does: the daemon's writer
then loses them and, at its next good flush, writes the ``lost`` record.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
from amcast.analytics.synthetic import LogSet
from amcast.daemon import logs
from amcast.daemon.logs import DeliveryLog


class _Disk:
    full = False


class _Refusing:
    """A log file on ``_Disk``: writes and flushes raise ``ENOSPC`` while it is full."""

    def __init__(self, fh: Any) -> None:
        self._fh = fh

    def write(self, data: str) -> int:
        if _Disk.full:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return int(self._fh.write(data))

    def flush(self) -> None:
        if _Disk.full:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self._fh.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fh, name)


@contextmanager
def _refusing_disk() -> Iterator[None]:
    real = logs.open_private
    logs.open_private = lambda path: _Refusing(real(path))  # type: ignore[assignment]
    try:
        yield
    finally:
        logs.open_private = real  # type: ignore[assignment]
        _Disk.full = False


def _opt(x: object) -> int | None:
    return None if pd.isna(x) else int(x)  # type: ignore[arg-type]


def _delivery(log: DeliveryLog, r: dict[str, Any]) -> None:
    log.delivery(
        view=int(r["view"]), variant=r["variant"], phi=float(r["phi"]),
        sender=int(r["sender"]), seq=int(r["seq"]), position=_opt(r["position"]),
        count=int(r["count"]), nbytes=int(r["bytes"]), service=r["service"],
        activation=_opt(r["activation"]), rule=r["rule"], ntail=_opt(r["ntail"]),
        unseen=_opt(r["unseen"]), nvt=_opt(r["nvt"]), send_ts=float(r["send_ts"]),
        ts=float(r["ts"]), envelopes=int(r["envelopes"]),
    )


def _event(log: DeliveryLog, e: dict[str, Any]) -> None:
    if e["type"] == "start":
        log.start(members=e["members"], ts=e["ts"])
    elif e["type"] == "gap":
        after = None if e["after"] is None else (int(e["after"][0]), int(e["after"][1]))
        log.gap(view=e["view"], after=after, ts=e["ts"])
    elif e["primary"]:
        log.view(view=e["view"], members=e["members"], previous=e["previous"],
                 joined=e["joined"], left=e["left"], excluded=e["excluded"], ts=e["ts"])
    else:
        log.lost(view=e["view"], reason=e["reason"], reachable=e["members"], ts=e["ts"])


def write_with_daemon_writer(
    logset: LogSet, directory: Path, refuse: tuple[tuple[int, float, float], ...] = (),
) -> Path:
    """Write the records of ``logset`` through ``DeliveryLog``, rotated every 64 KiB;
    ``refuse``: (node, from ts, to ts) spans whose records that node's disk refuses."""
    directory = Path(directory)
    with _refusing_disk():
        for node, d in logset.deliveries.items():
            _write_node(logset, directory, node, d, refuse)
    return directory


def _write_node(logset: LogSet, directory: Path, node: int, d: pd.DataFrame,
                refuse: tuple[tuple[int, float, float], ...]) -> None:
    events = logset.events.get(node, [])
    metrics = logset.metrics.get(node, [])
    for inc in sorted({e["incarnation"] for e in events} | set(d["incarnation"])):
        log = DeliveryLog(directory / f"node-{node}", node, rotate_bytes=1 << 16,
                          keep=1000, incarnation=int(inc))
        merged = sorted(
            [(e["ts"], 0, k, e) for k, e in enumerate(events) if e["incarnation"] == inc]
            + [(r["ts"], 1, k, r) for k, r in
               enumerate(d[d["incarnation"] == inc].to_dict("records"))],
            key=lambda x: x[:3])
        for ts, kind, _, rec in merged:
            _Disk.full = any(n == node and lo <= ts <= hi for n, lo, hi in refuse)
            (_event if kind == 0 else _delivery)(log, rec)
        _Disk.full = False
        for m in metrics:
            if m["incarnation"] == inc:
                log.metrics({k: v for k, v in m.items()
                             if k not in ("schema", "type", "node", "incarnation")})
        log.close()
