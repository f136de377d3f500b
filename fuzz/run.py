"""Run one fuzz target under atheris: ``python -m fuzz.run TARGET [libFuzzer args]``.

Theory of operation: the target module is imported inside
``atheris.instrument_imports`` restricted to the target's ``INSTRUMENT`` packages, so
libFuzzer's coverage counts edges of our code (and of pure-Python parsers we rely on,
such as ``tomllib``), not of the fuzzing harness or the standard library at large. The
remaining arguments go to libFuzzer unchanged (corpus directories, ``-max_total_time``,
``-dict``, ``-artifact_prefix`` ...). Any exception escaping ``test_one_input`` is a
crash: libFuzzer prints it and writes the input to the artifact prefix.
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> None:
    try:
        import atheris
    except ImportError:
        sys.exit("fuzz.run needs atheris: pip install atheris (or run `make fuzz`)")
    if len(argv) < 2:
        sys.exit("usage: python -m fuzz.run TARGET [libFuzzer args]")
    from fuzz.targets import TARGETS

    name = argv[1]
    if name not in TARGETS:
        sys.exit(f"unknown fuzz target {name!r}; targets: {', '.join(TARGETS)}")
    import importlib

    # the target and what it uses are imported here for the first time, instrumented
    with atheris.instrument_imports(include=list(_instrument_list(name))):
        target = importlib.import_module(f"fuzz.targets.{name}")
    atheris.Setup([argv[0], *argv[2:]], target.test_one_input)
    atheris.Fuzz()


def _instrument_list(name: str) -> tuple[str, ...]:
    """The packages to instrument for target ``name``: read from its source so that
    reading it imports none of them uninstrumented."""
    import ast
    from pathlib import Path

    source = Path(__file__).with_name("targets") / f"{name}.py"
    for node in ast.parse(source.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "INSTRUMENT" for t in node.targets
        ):
            return tuple(ast.literal_eval(node.value))
    raise SystemExit(f"fuzz target {name} has no INSTRUMENT tuple")


if __name__ == "__main__":
    main(sys.argv)
