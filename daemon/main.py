"""``amcastd``: parse the command line, load the config, run the daemon on uvloop.

Exit status: 0 after a clean shutdown, 2 for a usage error (one line, as ``amcast``'s),
or a configuration or set-up error (one
log line saying what is wrong and what to do; among them another daemon already serving
``api.socket``, and a compiled protocol core older than its sources: ``make native``),
1 for anything unexpected. ``--check`` makes the daemon's own start-up
checks (``amcast.daemon.preflight``) and exits 0 or 2 in exactly the same cases.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

import structlog

from .. import __version__
from ..argtypes import OneLineParser
from ..protocols.errors import ConfigurationError
from .config import load_config
from .logs import configure_logging


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="amcastd", description="amcast daemon: atomic multicast over UDP IP multicast"
    )
    parser.add_argument("--config", "-c", help="TOML config file (default: $AMCAST_CONFIG)")
    parser.add_argument("--check", action="store_true",
                        help="check the configuration as the daemon would at start-up (engine, "
                        "socket, log directory, interface, ports), print the effective "
                        "configuration as JSON and exit")
    parser.add_argument("--version", action="version", version=f"amcastd {__version__}")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_logging()
    log = structlog.get_logger("amcastd")
    try:
        config = load_config(args.config, os.environ)
        configure_logging(config.logs.level, config.logs.format)
        if args.check:
            # lazy: only --check needs the preflight (it opens sockets to try them)
            from .preflight import check

            print(json.dumps(check(config), indent=2))
            return 0
        # lazy: --check, and a configuration that does not load, return before the event
        # loop and the whole daemon are imported
        import uvloop

        from .runner import Daemon

        daemon = Daemon(config, environ=os.environ,
                        reload=lambda: load_config(args.config, os.environ))
        return uvloop.run(daemon.run())
    except ConfigurationError as exc:
        log.error("amcastd cannot start", error=str(exc))
        return 2
    except OSError as exc:
        log.error("amcastd cannot start", error=str(exc), errno=exc.errno)
        return 2


if __name__ == "__main__":
    sys.exit(main())
