"""``amcastd``: parse the command line, load the config, run the daemon on uvloop.

Exit status: 0 after a clean shutdown, 2 for a configuration or set-up error (one
log line saying what is wrong and what to do), 1 for anything unexpected.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

import structlog

from amcast import __version__
from daemon.config import load_config
from daemon.logs import configure_logging
from protocols.errors import ConfigurationError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="amcastd", description="amcast daemon: atomic multicast over UDP IP multicast"
    )
    parser.add_argument("--config", "-c", help="TOML config file (default: $AMCAST_CONFIG)")
    parser.add_argument("--check", action="store_true",
                        help="validate the configuration, print it as JSON and exit")
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
            config.node_config()
            shown = config.model_dump(mode="json")
            if "group_key" in shown["protocol"]:
                shown["protocol"]["group_key"] = "<set, not shown>"
            print(json.dumps(shown, indent=2))
            return 0
        import uvloop

        from daemon.runner import Daemon

        daemon = Daemon(config, environ=os.environ)
        return uvloop.run(daemon.run())
    except ConfigurationError as exc:
        log.error("amcastd cannot start", error=str(exc))
        return 2
    except OSError as exc:
        log.error("amcastd cannot start", error=str(exc), errno=exc.errno)
        return 2


if __name__ == "__main__":
    sys.exit(main())
