"""``amcast bench NAME``: every module in ``amcast.benchmarks`` is one benchmark.

A benchmark module defines ``NAME``, ``HELP`` (optionally ``DESCRIPTION``, a longer
``--help`` text), ``add_arguments(parser)`` and ``run(args) -> dict`` returning figures;
``amcast.report`` prints them as a table, or as one JSON object with ``--json``.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil

from .. import benchmarks
from ..report import print_report


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("bench", help="run a benchmark and print its figures")
    bench_sub = parser.add_subparsers(dest="benchmark", required=True, metavar="BENCHMARK")
    for info in sorted(pkgutil.iter_modules(benchmarks.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{benchmarks.__name__}.{info.name}")
        if not hasattr(module, "run"):
            continue
        description = getattr(module, "DESCRIPTION", None)  # a longer text, as it is written
        sub = bench_sub.add_parser(  # argparse %-formats help: HELP is text as written
            module.NAME, help=module.HELP.replace("%", "%%"),
            description=description or module.HELP,
            **({"formatter_class": argparse.RawDescriptionHelpFormatter} if description else {}),
        )
        sub.add_argument("--json", action="store_true", help="print one JSON object")
        module.add_arguments(sub)
        sub.set_defaults(func=_runner(module))


def _runner(module):  # type: ignore[no-untyped-def]
    def run(args: argparse.Namespace) -> int:
        print_report(module.run(args), as_json=args.json)
        return 0

    return run
