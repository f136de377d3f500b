"""The ``amcast`` command line: one tool, one subcommand per module.

Every module in ``amcast.commands`` that defines ``register(subparsers)`` adds its
subcommand; ``register`` sets ``func`` on its parser, called with the parsed arguments
and returning the process exit status.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

from amcast import __version__, commands
from protocols.errors import AmcastError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="amcast", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"amcast {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except AmcastError as exc:
        print(f"amcast: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
