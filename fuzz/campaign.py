"""A fuzzing campaign: run targets one after another, record what each did (``make fuzz``).

Theory of operation: for each target, in order, ``python -m fuzz.run`` (``fuzz.run``)
runs for ``--seconds`` under ``nice`` (one process at a time: the machine is shared).
Its corpus lives in ``var/fuzz/corpus/TARGET`` (git-ignored), so runs accumulate; the
seeds (real encodings, regenerated each run into ``var/fuzz/seeds``) and the committed
crash regressions (``fuzz/regressions/TARGET``) are read as extra corpora, a target's
``DICTIONARY`` tokens go to libFuzzer's ``-dict``. A crashing input lands in
``var/fuzz/crashes/TARGET``; the target stops there (fix, add the input to
``fuzz/regressions``, run again).

libFuzzer's own report (its last status line: ``cov`` edges, ``ft`` features, corpus
size; ``-print_final_stats``: executions, exec/s, peak RSS) is parsed and appended, with
the date, the machine and the commit, to ``docs/fuzz/results.md``; the full log stays in
``var/fuzz/logs``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata
import os
import platform
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from fuzz.targets import TARGETS, load

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "var" / "fuzz"
REGRESSIONS = ROOT / "fuzz" / "regressions"
RESULTS = ROOT / "docs" / "fuzz" / "results.md"
CRASH_PREFIXES = ("crash-", "timeout-", "oom-", "leak-", "slow-unit-")
STATUS_LINE = re.compile(r"^#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+) corp: (\d+)/(\S+)", re.MULTILINE)
FINAL_STAT = re.compile(r"^stat::(\w+):\s+(\d+)", re.MULTILINE)
RESULTS_HEADER = """# Fuzzing results

Appended by `make fuzz` (`fuzz/campaign.py`), one section per run. Columns are
libFuzzer's: *executions* and *exec/s* from its final statistics, *cov* the code edges
(Python branches of the instrumented modules) and *ft* the features (edges with hit
counts and comparisons) of its last status line, *corpus* the inputs kept after the run
(accumulated across runs in `var/fuzz/corpus`). *crashes*: inputs that raised anything
but the decoder's documented error or broke an invariant (see `fuzz/targets/*.py`).
"""


@dataclass(slots=True)
class Outcome:
    target: str
    seconds: float
    executions: int
    exec_per_s: int
    cov: int
    ft: int
    corpus_files: int
    corpus_size: str
    new_units: int
    peak_rss_mb: int
    crashes: list[str]
    exit_code: int


def write_inputs(directory: Path, inputs: list[bytes]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.iterdir():
        old.unlink()
    for i, data in enumerate(inputs):
        (directory / f"seed-{i:04d}").write_bytes(data)


def dictionary_text(tokens: list[bytes]) -> str:
    """libFuzzer ``-dict`` format: one quoted token a line, bytes outside printable
    ASCII (and ``"`` and ``\\``) as ``\\xNN``."""
    lines = []
    for token in tokens:
        body = "".join(
            chr(b) if 0x20 <= b < 0x7F and b not in (0x22, 0x5C) else f"\\x{b:02x}" for b in token
        )
        lines.append(f'"{body}"')
    return "\n".join(lines) + "\n"


def crash_files(directory: Path) -> set[str]:
    if not directory.is_dir():
        return set()
    return {p.name for p in directory.iterdir() if p.name.startswith(CRASH_PREFIXES)}


def parse(log: str) -> dict[str, int | str]:
    """The figures of a libFuzzer log (zeros where it printed none)."""
    stats: dict[str, int | str] = {
        "executions": 0,
        "exec_per_s": 0,
        "new_units": 0,
        "peak_rss_mb": 0,
        "cov": 0,
        "ft": 0,
        "corpus_files": 0,
        "corpus_size": "0b",
    }
    lines = STATUS_LINE.findall(log)
    if lines:
        _, cov, ft, files, size = lines[-1]
        stats.update(cov=int(cov), ft=int(ft), corpus_files=int(files), corpus_size=size)
    names = {
        "number_of_executed_units": "executions",
        "average_exec_per_sec": "exec_per_s",
        "new_units_added": "new_units",
        "peak_rss_mb": "peak_rss_mb",
    }
    for key, value in FINAL_STAT.findall(log):
        if key in names:
            stats[names[key]] = int(value)
    return stats


def run_target(name: str, seconds: int, niceness: int, python: str) -> Outcome:
    module = load(name)
    corpus = WORK / "corpus" / name
    seeds = WORK / "seeds" / name
    crashes = WORK / "crashes" / name
    logs = WORK / "logs"
    for d in (corpus, crashes, logs):
        d.mkdir(parents=True, exist_ok=True)
    write_inputs(seeds, module.seeds())
    args = [
        python,
        "-m",
        "fuzz.run",
        name,
        f"-max_total_time={seconds}",
        "-print_final_stats=1",
        f"-timeout={module.TIMEOUT_S}",
        f"-max_len={module.MAX_LEN}",
        f"-artifact_prefix={crashes}/",
    ]
    tokens = getattr(module, "DICTIONARY", None)
    if tokens:
        dict_path = WORK / "dict" / f"{name}.dict"
        dict_path.parent.mkdir(parents=True, exist_ok=True)
        dict_path.write_text(dictionary_text(tokens))
        args.append(f"-dict={dict_path}")
    args += [str(corpus), str(seeds)]
    if (REGRESSIONS / name).is_dir():
        args.append(str(REGRESSIONS / name))
    before = crash_files(crashes)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    log_path = logs / f"{name}-{stamp}.log"
    print(f"fuzz: {name} for {seconds} s (log: {log_path.relative_to(ROOT)})", flush=True)
    start = time.monotonic()
    with log_path.open("w") as log:
        proc = subprocess.run(
            ["nice", "-n", str(niceness), *args],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            check=False,
        )
    elapsed = time.monotonic() - start
    stats = parse(log_path.read_text(errors="replace"))
    found = sorted(crash_files(crashes) - before)
    outcome = Outcome(name, round(elapsed), crashes=found, exit_code=proc.returncode, **stats)  # type: ignore[arg-type]
    if outcome.corpus_files == 0:  # libFuzzer printed no status line: count ourselves
        outcome.corpus_files = sum(1 for _ in corpus.iterdir())
    print(
        f"fuzz: {name}: {outcome.executions} executions, {outcome.exec_per_s} exec/s, "
        f"cov {outcome.cov}, ft {outcome.ft}, corpus {outcome.corpus_files}, "
        f"crashes {len(found)}",
        flush=True,
    )
    if proc.returncode != 0 and not found:
        print(
            f"fuzz: {name} exited {proc.returncode} without a crash file; see {log_path}",
            file=sys.stderr,
        )
    return outcome


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"{platform.node()}, {cpu}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, atheris {importlib.metadata.version('atheris')}"
    )


def commit() -> str:
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=False
        ).stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    return head + (
        " (uncommitted changes)"
        if git("status", "--porcelain", "--", "fuzz", "protocols", "amcast", "daemon")
        else ""
    )


def report(outcomes: list[Outcome], started: dt.datetime, niceness: int, revision: str) -> str:
    rows = [
        f"## {started:%Y-%m-%d %H:%M} UTC",
        "",
        f"Machine: {machine()}. Commit {revision}. `nice -n {niceness}`, one target at a time.",
        "",
        "| target | seconds | executions | exec/s | cov | ft | corpus | new units "
        "| peak RSS MB | crashes |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for o in outcomes:
        rows.append(
            f"| {o.target} | {o.seconds} | {o.executions} | {o.exec_per_s} | {o.cov} | {o.ft} "
            f"| {o.corpus_files} ({o.corpus_size}) | {o.new_units} | {o.peak_rss_mb} "
            f"| {len(o.crashes)} |"
        )
    total = sum(o.seconds for o in outcomes)
    rows += [
        "",
        f"Total: {total} s, {sum(o.executions for o in outcomes)} executions, "
        f"{sum(len(o.crashes) for o in outcomes)} crashes.",
    ]
    for o in outcomes:
        for name in o.crashes:
            rows.append(f"- {o.target}: `var/fuzz/crashes/{o.target}/{name}`")
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m fuzz.campaign",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "targets",
        nargs="*",
        default=list(TARGETS),
        help=f"targets to run, in order (default: {' '.join(TARGETS)})",
    )
    parser.add_argument("--seconds", type=int, default=600, help="fuzzing time per target")
    parser.add_argument("--nice", type=int, default=19, help="niceness of the fuzzer")
    parser.add_argument(
        "--results", type=Path, default=RESULTS, help="markdown file the summary is appended to"
    )
    args = parser.parse_args(argv)
    unknown = [t for t in args.targets if t not in TARGETS]
    if unknown:
        parser.error(f"unknown target(s) {', '.join(unknown)}; targets: {', '.join(TARGETS)}")
    if args.seconds < 1:
        parser.error("--seconds must be >= 1")
    started, revision = dt.datetime.now(dt.UTC), commit()  # what was fuzzed
    outcomes = [run_target(t, args.seconds, args.nice, sys.executable) for t in args.targets]
    text = report(outcomes, started, args.nice, revision)
    args.results.parent.mkdir(parents=True, exist_ok=True)
    existing = args.results.read_text() if args.results.exists() else RESULTS_HEADER
    args.results.write_text(existing.rstrip("\n") + "\n\n" + text)
    print(f"fuzz: summary appended to {args.results}")
    return 1 if any(o.crashes for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
