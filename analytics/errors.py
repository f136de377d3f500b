"""Why the job could not analyse a log set, in one line, and the job's exit statuses.

Theory of operation: the job has three outcomes, each with its own exit status, the
same for ``amcast analyze`` and ``spark-submit analytics/job.py``: ``EXIT_PASSED`` (0,
the order audit passed), ``EXIT_AUDIT_FAILED`` (1) and ``EXIT_NOT_ANALYSED`` (2: bad
arguments, no Java, no log records, Spark could not read the logs or write the report).
``AnalyticsError`` is raised by the job's own checks with a message fit for one line.
``one_line`` turns the ordinary failures of the layers below (Spark's captured errors,
Java exceptions through py4j, ``OSError``) into one line: the Java exception's first line
without its stack, Spark's error class and message without its query context.
``guarded`` runs an entry point's body and answers with its exit status: ordinary
failures print ``PROG: error: LINE`` on stderr; anything else is a bug in the job and
prints its traceback too, still with ``EXIT_NOT_ANALYSED`` (never 1, which means the
audit failed). This module imports nothing outside the standard library.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable

EXIT_PASSED = 0
EXIT_AUDIT_FAILED = 1
EXIT_NOT_ANALYSED = 2


class AnalyticsError(Exception):
    """The job could not analyse the logs; the message says why in one line."""


def _java_line(text: str) -> str:
    """The Java exception of a py4j error message: the line after ``: ``, or the first."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        if ln.startswith(": "):
            return ln[2:]
    return lines[0] if lines else ""


def one_line(exc: BaseException) -> str | None:
    """One line saying what went wrong, or None when ``exc`` is not an ordinary failure."""
    if isinstance(exc, AnalyticsError):
        return str(exc)
    if isinstance(exc, OSError):
        return f"{exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else "")
    try:
        from py4j.protocol import Py4JError, Py4JJavaError
        from pyspark.errors import PySparkException
    except ImportError:
        return None
    if isinstance(exc, PySparkException):
        text = str(exc).split("\n== ", 1)[0]  # drop the query context (DataFrame / SQL)
        return " ".join(text.split())
    if isinstance(exc, Py4JJavaError):
        return _java_line(str(exc))
    if isinstance(exc, Py4JError):
        return f"lost the connection to Spark's JVM: {_java_line(str(exc))}"
    return None


def guarded(prog: str, body: Callable[[], int]) -> int:
    """``body()``'s exit status, or ``EXIT_NOT_ANALYSED`` with one line when it raised."""
    try:
        return body()
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        line = one_line(exc)
        if line is None:
            traceback.print_exc()
            line = f"internal error of the analysis job: {type(exc).__name__}: {exc}"
        print(f"{prog}: error: {line}", file=sys.stderr, flush=True)
        return EXIT_NOT_ANALYSED
