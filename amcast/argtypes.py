"""Value types of the command line's options and its parser class, shared by
``amcast.commands``, the benchmarks (``bench/``) and ``amcastd`` (a leaf: it imports nothing
of amcast, so the daemon may use it; tests/test_layering.py).

Theory of operation: argparse calls an option's ``type`` on its text; an
``ArgumentTypeError`` becomes ``amcast CMD: error: argument --x: <why>`` and exit status 2,
the documented usage error. So a count below its least sensible value, a negative or
infinite duration, or ``nan`` is refused before anything starts, instead of running a
benchmark with nonsense or failing later with a traceback. ``OneLineParser`` makes every
usage error that one line (argparse prints the whole usage first).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import NoReturn

USAGE_ERROR = 2
"""The exit status of a usage error, ``amcast``'s and ``amcastd``'s."""


class OneLineParser(argparse.ArgumentParser):
    """A usage error is one line: what was wrong, and where the help is. Subcommands'
    parsers are of this class as well."""

    def format_help(self) -> str:
        """The help as plain text: the docstrings' ``double backticks`` dropped."""
        return super().format_help().replace("``", "")

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE_ERROR, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def whole(minimum: int = 0, maximum: int | None = None) -> Callable[[str], int]:
    """A whole number of at least ``minimum`` and at most ``maximum`` (a count, a size)."""

    def parse(text: str) -> int:
        try:
            value: int | None = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum or (maximum is not None and value > maximum):
            bound = f"at least {minimum}" + ("" if maximum is None else f" and at most {maximum}")
            raise argparse.ArgumentTypeError(f"want a whole number {bound}, not {text!r}")
        return value

    return parse


def number(minimum: float = 0.0, *, above: bool = False,
           maximum: float = math.inf) -> Callable[[str], float]:
    """A finite number at least ``minimum`` (above it with ``above``) and at most
    ``maximum``: seconds, a rate, a fraction."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        low_ok = value > minimum if above else value >= minimum
        if not (math.isfinite(value) and low_ok and value <= maximum):
            bound = f"above {minimum:g}" if above else f"at least {minimum:g}"
            if maximum < math.inf:
                bound += f" and at most {maximum:g}"
            raise argparse.ArgumentTypeError(f"want a number {bound}, not {text!r}")
        return value

    return parse


positive = number(above=True)
"""A finite number above 0 (a duration, a rate)."""

non_negative = number()
"""A finite number of at least 0 (a warm-up, a delay)."""
