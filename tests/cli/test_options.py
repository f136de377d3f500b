"""Every option of the ``amcast`` command line, checked in-process over the whole parser
tree (``amcast.cli.build_parser``, and the checkout's benchmarks, ``bench.cli.build_parser``,
which ``amcast bench`` hands the rest of its line): each help text formats, and a numeric
option given ``nan``, ``inf`` or a value below its least is refused in one line with exit
status 2 (``amcast.argtypes``), before anything starts."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import pytest

from amcast.cli import build_parser, main
from bench import cli as bench_cli


def parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[
        tuple[tuple[str, ...], argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from parsers(sub, (*path, name))


PARSERS = [*parsers(build_parser()), *list(parsers(bench_cli.build_parser(), ("bench",)))[1:]]
NUMERIC = [
    (path, "/".join(action.option_strings))
    for path, parser in PARSERS for action in parser._actions
    if action.option_strings and action.nargs != 0 and not action.choices
    and action.type not in (None, str, Path)
]


def refusal(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one line of a usage error (exit status 2) that ``argv`` must end in."""
    status = main(argv)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert status == 2 and len(lines) == 1, err
    return lines[0]


def test_the_tree_has_every_command_and_benchmark() -> None:
    names = {" ".join(path) for path, _ in PARSERS}
    assert {"send", "simulate", "cluster start", "bench cluster", "bench failover",
            "bench floor", "analyze"} <= names
    assert len(NUMERIC) > 50


@pytest.mark.parametrize("path", [p for p, _ in PARSERS], ids=lambda p: " ".join(p) or "amcast")
def test_every_help_text_formats(path: tuple[str, ...]) -> None:
    """argparse %-formats help strings: a "%" written as text (failover's "recovery to
    90%") made ``amcast bench --help`` a traceback."""
    parser = dict(PARSERS)[path]
    assert parser.format_help().startswith("usage: ")


@pytest.mark.parametrize(("path", "option"), NUMERIC, ids=lambda x: " ".join(x)
                         if isinstance(x, tuple) else x)
def test_numeric_options_refuse_nan_and_inf(
    path: tuple[str, ...], option: str, capsys: pytest.CaptureFixture[str],
) -> None:
    for value in ("nan", "inf"):
        line = refusal([*path, option.split("/")[0], value], capsys)
        assert f"argument {option}:" in line and f"'{value}'" in line
        assert line.endswith(f"(see amcast {' '.join(path)} --help)")


@pytest.mark.parametrize("argv", [
    ["cluster", "start", "--nodes", "0"],  # started a cluster of no daemons
    ["demo", "--size", "-1"],
    ["bench", "analytics", "--seed", "-1"],  # a traceback from the generator
    ["bench", "flood", "--nodes", "0"],  # a traceback
    ["bench", "abuse", "--flooders", "-1"],  # ran with none
    ["bench", "failover", "--kills", "-1"],
    ["bench", "cluster", "--size", "15"],  # a message carries 16 bytes of its own
    ["bench", "flood", "--attacker-nice", "20"],
    ["simulate", "--rate", "-5"],  # never ended
    ["simulate", "--preset", "membership", "--max-loss", "1"],
    ["simulate", "--duration", "0"],
    ["status", "--timeout", "0"],
    ["send", "--timeout", "-1"],
    ["listen", "--count", "0"],
    ["analyze", "--shuffle-partitions", "0"],
])
def test_values_below_their_least_are_refused_before_anything_starts(
    argv: list[str], capsys: pytest.CaptureFixture[str],
) -> None:
    line = refusal(argv, capsys)
    assert f"argument {argv[-2]}" in line and "want" in line and f"'{argv[-1]}'" in line, line
