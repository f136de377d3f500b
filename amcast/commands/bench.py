"""``amcast bench NAME [OPTIONS]``: run one of the benchmarks of a source checkout.

The benchmarks are not part of the installed package: they live in the checkout's
``bench/`` folder, beside ``amcast/`` (as ``fuzz/`` and ``nemesis/`` do). This command
finds that folder next to the ``amcast`` package it was imported from, which is where an
editable install (``make install``) points, and hands it everything after ``bench``
(``bench.cli.main``: its own parser, so ``amcast bench --help`` lists the benchmarks).
An installed wheel or Debian package has no such folder: the command then says, in one
line, that benchmarks run from a source checkout and how, and exits with status 2.

The parser here takes the rest of the line as it is, so the man page and shell
completion are the same whether or not a checkout is present.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from types import ModuleType

from ..protocols.errors import ConfigurationError

CHECKOUT = Path(__file__).resolve().parents[2]
"""Where a source checkout's root would be: the folder above the ``amcast`` package."""

NOT_INSTALLED = ("the benchmarks are not installed: they run from a source checkout of "
                 "amcast (make install, then .venv/bin/amcast bench NAME or, in its root, "
                 "python -m bench NAME; see the Development page of the docs)")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bench", help="run a benchmark (from a source checkout: amcast bench --help)",
        description="run a benchmark of a source checkout (its bench/ folder) and print its "
                    "figures; amcast bench --help there lists them",
        add_help=False, prefix_chars="\0")  # every word after `bench` is the benchmark's
    parser.add_argument("argv", nargs=argparse.REMAINDER, metavar="BENCHMARK [OPTIONS]",
                        help="the benchmark and its options")
    parser.set_defaults(func=run)


def find() -> ModuleType | None:
    """``bench.cli`` of the checkout beside this package, or None (an installed wheel)."""
    loaded = sys.modules.get("bench")
    if loaded is None:
        if not (CHECKOUT / "pyproject.toml").is_file() or not (
                CHECKOUT / "bench" / "cli.py").is_file():
            return None
        if str(CHECKOUT) not in sys.path:
            sys.path.append(str(CHECKOUT))  # after what is installed: nothing is shadowed
        try:
            loaded = importlib.import_module("bench")
        except ImportError:
            return None
    if not getattr(loaded, "AMCAST_BENCHMARKS", False):
        return None  # another package's `bench`
    return importlib.import_module("bench.cli")


def run(args: argparse.Namespace) -> int:
    cli = find()
    if cli is None:
        if not args.argv or args.argv[0] in ("-h", "--help"):
            print(f"amcast bench: {NOT_INSTALLED}")
            return 0
        raise ConfigurationError(NOT_INSTALLED)
    return int(cli.main(args.argv))
