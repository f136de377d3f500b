"""Logs: structlog for people and operators, JSON-lines files for the Spark job.

Theory of operation:

- ``configure_logging`` sets structlog up once: a coloured console renderer when stderr
  is a terminal (or ``logs.format = "console"``), one JSON object per line otherwise.
- ``RotatingJsonl`` appends lines to ``<dir>/<name>.jsonl`` through a buffered file,
  rotating by size to ``.1``, ``.2``, ... (``rotate_keep`` files kept). It is flushed on
  every metrics snapshot and at shutdown, so the hot path costs one formatted string
  and one buffered write per delivered *vertex*.
- ``DeliveryLog`` writes the records of ``docs/log-schema.md`` (schema 1): ``delivery``
  per delivered vertex, ``view`` per installed view, into ``delivery.jsonl``; and
  ``metrics`` snapshots into ``metrics.jsonl``. Delivery records are formatted with an
  f-string (every field is a number or a fixed identifier), the rest with ``json``.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import structlog

SCHEMA = 1


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
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )


class RotatingJsonl:
    """Size-rotated JSON-lines file (see the module docstring)."""

    def __init__(self, path: Path, rotate_bytes: int, keep: int) -> None:
        self.path = path
        self._rotate_bytes = rotate_bytes
        self._keep = keep
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(path, "a", encoding="utf-8", buffering=1 << 16)  # noqa: SIM115
        self._size = self._fh.tell()

    def write(self, line: str) -> None:
        self._fh.write(line)
        self._size += len(line)
        if self._size >= self._rotate_bytes:
            self._rotate()

    def _rotate(self) -> None:
        self._fh.close()
        for i in range(self._keep - 1, 0, -1):
            src = self.path.with_name(f"{self.path.name}.{i}")
            if src.exists():
                os.replace(src, self.path.with_name(f"{self.path.name}.{i + 1}"))
        os.replace(self.path, self.path.with_name(f"{self.path.name}.1"))
        self._fh = open(self.path, "a", encoding="utf-8", buffering=1 << 16)  # noqa: SIM115
        self._size = 0

    def flush(self) -> None:
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()


class DeliveryLog:
    """The per-node delivery, view and metrics records of ``docs/log-schema.md``."""

    def __init__(
        self, directory: str | Path, node: int, *, rotate_bytes: int, keep: int,
        deliveries: bool = True,
    ) -> None:
        directory = Path(directory)
        self.node = node
        self._deliveries = (
            RotatingJsonl(directory / "delivery.jsonl", rotate_bytes, keep) if deliveries else None
        )
        self._views = self._deliveries or RotatingJsonl(
            directory / "view.jsonl", rotate_bytes, keep
        )
        self._metrics = RotatingJsonl(directory / "metrics.jsonl", rotate_bytes, keep)

    def delivery(
        self, *, view: int, variant: str, phi: float, sender: int, seq: int, position: int | None,
        count: int, nbytes: int, service: str, activation: int | None, rule: str,
        ntail: int | None, unseen: int | None, nvt: int | None, send_ts: float, ts: float,
        envelopes: int,
    ) -> None:
        """One ``delivery`` record; the causal service writes null for ordering fields."""
        if self._deliveries is None:
            return
        if position is None:
            pos = activation = ntail = unseen = nvt = "null"  # type: ignore[assignment]
        else:
            pos = position  # type: ignore[assignment]
        self._deliveries.write(
            f'{{"schema":1,"type":"delivery","node":{self.node},"view":{view},'
            f'"variant":"{variant}","phi":{phi!r},"sender":{sender},"seq":{seq},'
            f'"position":{pos},"count":{count},"bytes":{nbytes},"service":"{service}",'
            f'"activation":{activation},"rule":"{rule}","ntail":{ntail},"unseen":{unseen},'
            f'"nvt":{nvt},"send_ts":{send_ts!r},"ts":{ts!r},"envelopes":{envelopes}}}\n'
        )

    def view(self, *, view: int, members: list[int], ts: float) -> None:
        self._views.write(json.dumps({
            "schema": SCHEMA, "type": "view", "node": self.node, "ts": ts, "view": view,
            "members": members,
        }) + "\n")

    def metrics(self, record: dict[str, Any]) -> None:
        self._metrics.write(
            json.dumps({"schema": SCHEMA, "type": "metrics", "node": self.node, **record}) + "\n"
        )
        self.flush()

    def flush(self) -> None:
        for f in {id(x): x for x in (self._deliveries, self._views, self._metrics) if x}.values():
            f.flush()

    def close(self) -> None:
        for f in {id(x): x for x in (self._deliveries, self._views, self._metrics) if x}.values():
            f.close()
