"""The benchmarks' command line: every module of ``bench`` with a ``run`` is one benchmark.

A benchmark module defines ``NAME``, ``HELP`` (optionally ``DESCRIPTION``, a longer
``--help`` text), ``add_arguments(parser)`` and ``run(args) -> dict`` returning figures;
``amcast.report`` prints them as a table, or as one JSON object with ``--json``.

``main(argv)`` parses ``NAME [OPTIONS]`` and runs it; ``amcast bench ...`` calls it
(``amcast.commands.bench``), which also turns a failure into amcast's one-line error and
exit status. ``python -m bench ...`` is the same command (``bench.__main__``).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence
from types import ModuleType

from amcast.argtypes import OneLineParser
from amcast.report import print_report

PROG = "amcast bench"


def benchmarks() -> list[ModuleType]:
    """The benchmark modules, by name."""
    package = sys.modules[__package__ or "bench"]
    found = []
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if info.name.startswith("_") or info.name == "cli":
            continue
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        if hasattr(module, "run"):
            found.append(module)
    return found


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog=prog, description="run a benchmark from a source checkout and print its figures")
    sub = parser.add_subparsers(dest="benchmark", required=True, metavar="BENCHMARK",
                                parser_class=OneLineParser)
    for module in benchmarks():
        description = getattr(module, "DESCRIPTION", None)  # a longer text, as it is written
        one = sub.add_parser(  # argparse %-formats help: HELP is text as written
            module.NAME, help=module.HELP.replace("%", "%%"),
            description=description or module.HELP,
            **({"formatter_class": argparse.RawDescriptionHelpFormatter} if description else {}),
        )
        one.add_argument("--json", action="store_true", help="print one JSON object")
        module.add_arguments(one)
        one.set_defaults(func=_runner(module))
    return parser


def _runner(module: ModuleType):  # type: ignore[no-untyped-def]
    def run(args: argparse.Namespace) -> int:
        print_report(module.run(args), as_json=args.json)
        return 0

    return run


def main(argv: Sequence[str], prog: str = PROG) -> int:
    """Run ``argv`` (``NAME [OPTIONS]``); a usage error or ``--help`` returns its status.
    Failures of the run itself (``AmcastError``) propagate to the caller."""
    try:
        args = build_parser(prog).parse_args(list(argv))
    except SystemExit as done:  # --help, a usage error (printed)
        return int(done.code or 0)
    return int(args.func(args) or 0)
