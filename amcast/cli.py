"""The ``amcast`` command line: one tool, one subcommand per module of ``amcast.commands``.

Every module in ``amcast.commands`` that defines ``register(subparsers)`` adds its
subcommand; ``register`` sets ``func`` on its parser, called with the parsed arguments
and returning the process exit status.

An ordinary failure prints one line (``amcast: error: ...``, what happened and what to
do) and exits with a documented status, never a traceback:

  0  success
  1  the request failed: messages refused, a join forbidden by amcastd's access rules,
     daemon unhealthy, no cluster in --dir or one already running there, a file that
     cannot be written
  2  usage or configuration error, or amcastd could not be reached / the connection
     to it was lost
  3  timed out: amcastd did not confirm or deliver in time (a stalled cluster?)
  130  interrupted (Ctrl-C)
  141  standard output closed early (``amcast status | head``): nothing printed
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import pkgutil
import sys
from collections.abc import Sequence

from . import __version__, commands
from .argtypes import USAGE_ERROR, OneLineParser
from .client import ClientTimeout, ConnectionClosed, MessagesRefused, Unreachable
from .commands._common import CommandFailed
from .localcluster import ClusterStateError
from .protocols.errors import AmcastError, ClientError

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = EXIT_UNREACHABLE = USAGE_ERROR
EXIT_TIMEOUT = 3
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141
EXIT_STATUSES = __doc__.split("never a traceback:\n\n", 1)[1].rstrip()


DESCRIPTION = ("send and receive atomic multicast through the local amcastd, inspect it,\n"
               "and run local clusters, the demo, log analyses and (from a source checkout)\n"
               "benchmarks")


class TopParser(OneLineParser):
    """``amcast``'s own parser: an unknown option is reported as such (``amcast
    --bogus``), a missing command only when nothing else is wrong."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None,
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extra = super().parse_known_args(args, namespace)
        if getattr(parsed, "command", None) is None and not extra:
            self.error("the following arguments are required: COMMAND")
        return parsed, extra


def build_parser() -> argparse.ArgumentParser:
    parser = TopParser(
        prog="amcast", description=DESCRIPTION,
        epilog=f"exit statuses:\n{EXIT_STATUSES}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"amcast {__version__}")
    # not `required`: argparse would report a missing command before an unknown option
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND",
                                       parser_class=OneLineParser)
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(subparsers)
    return parser


def exit_status(exc: AmcastError) -> int:
    """The documented exit status of a failure (see the module docstring)."""
    if isinstance(exc, ClientTimeout | TimeoutError):
        return EXIT_TIMEOUT
    if isinstance(exc, ConnectionClosed):
        return EXIT_TIMEOUT if exc.code == "timeout" else EXIT_UNREACHABLE
    if isinstance(exc, MessagesRefused | CommandFailed | ClusterStateError):
        return EXIT_FAILED
    if isinstance(exc, ClientError) and exc.code == "forbidden":
        return EXIT_FAILED  # a join the daemon's [access] rules refuse (amcast listen)
    return EXIT_USAGE  # Unreachable, ConfigurationError and other AmcastErrors


def describe(exc: AmcastError) -> str:
    if isinstance(exc, ConnectionClosed):
        return f"connection to amcastd ended: {exc}"
    if isinstance(exc, Unreachable):
        return f"{exc.detail} (is amcastd running? check --socket)"
    return str(exc)


def _quiet_stdout() -> None:
    """stdout is gone: point it at /dev/null so the interpreter's last flush is silent."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def error(message: str) -> None:
    """One line on stderr (a failure's only output)."""
    with contextlib.suppress(OSError):
        print(f"amcast: error: {message}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as done:  # --help, --version, a usage error (printed)
            return int(done.code or 0)
        status = int(args.func(args) or 0)
        sys.stdout.flush()
        return status
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_BROKEN_PIPE
    except AmcastError as exc:
        error(describe(exc))
        return exit_status(exc)
    except OSError as exc:  # a file or directory the command needed
        error(f"{exc.strerror or exc}{f': {exc.filename}' if exc.filename else ''}")
        return EXIT_FAILED
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
