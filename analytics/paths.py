"""Where the logs come from and where the report goes: plain paths and URIs.

Theory of operation: a location is a URI when it starts with ``scheme:/`` (``file:/x``,
``file:///x``, ``hdfs://nn/x``), a plain path otherwise. ``file:`` URIs and plain paths
are local: the log directory is checked here (it exists and holds ``*.jsonl*`` files)
before Spark starts, and handed to Spark as an absolute path. Other URIs for the log
directory (``hdfs://``, ``s3a://``, ...) go to Spark's filesystem layer unchecked; when
Spark cannot read them the job fails with one line (``errors.one_line``). The report
directory must be local: the charts and ``index.html`` are written by Python next to the
Parquet tables, so ``--out hdfs://...`` is refused up front with one line rather than
split between two filesystems.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

from .errors import AnalyticsError

_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):/")


def scheme(location: str) -> str | None:
    """The URI scheme of ``location`` in lower case, or None for a plain path."""
    m = _URI.match(location)
    return m.group(1).lower() if m else None


def local_path(location: str) -> Path | None:
    """The local path of a plain path or ``file:`` URI (absolute), None for other URIs."""
    s = scheme(location)
    if s is None:
        return Path(location).expanduser().resolve()
    if s != "file":
        return None
    parts = urlsplit(location)
    if parts.netloc not in ("", "localhost"):
        raise AnalyticsError(f"{location!r}: a file: URI names a local path, not a host")
    return Path(unquote(parts.path)).resolve()


def logs_location(logdir: str) -> str:
    """What to hand Spark for LOGDIR; ``AnalyticsError`` when a local one holds no logs."""
    path = local_path(logdir)
    if path is None:
        return logdir
    if path.exists() and not path.is_dir():
        raise AnalyticsError(f"{logdir!r} is a file, not a log directory (give the "
                             "directory holding the daemons' logs, e.g. var/demo)")
    if not path.is_dir():
        raise AnalyticsError(f"log directory {logdir!r} does not exist")
    if not any(p.is_file() for p in path.rglob("*.jsonl*")):
        raise AnalyticsError(f"no *.jsonl* log files below {logdir!r}")
    return str(path)


def report_dir(out: str | Path) -> Path:
    """The local report directory of ``--out``; ``AnalyticsError`` for a remote URI."""
    path = local_path(str(out))
    if path is None:
        raise AnalyticsError(
            f"--out {str(out)!r}: the report directory must be local (a path or a file: "
            "URI); write it locally and copy it to the remote filesystem"
        )
    if path.exists() and not path.is_dir():
        raise AnalyticsError(f"--out {str(out)!r} exists and is not a directory")
    return path
