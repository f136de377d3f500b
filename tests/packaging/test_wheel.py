"""The installed package: one top-level import name, and it lives beside python-daemon.

The wheel is built from a copy of the tracked files (no build litter in the checkout).
Its top-level names must be exactly ``amcast`` (plus its dist-info): the repository's
``daemon/``, ``protocols/`` and ``analytics/`` folders are mapped to ``amcast.daemon``,
``amcast.protocols`` and ``amcast.analytics``, so installing amcast never overwrites
PyPI's ``python-daemon`` (whose module is ``daemon``, PEP 3143). Every Python file of
those folders must be in the wheel (a package missing from pyproject's list would ship
a broken install). It holds what users run, not the tooling kept beside the package
(``bench/``: the benchmarks; ``tools/``: fault injection and attack tools): none of their
modules is inside, and ``amcast --help`` runs from the unpacked wheel alone (not this
checkout), where ``amcast bench`` says in one line that benchmarks run from a source
checkout. The last test installs the wheel and python-daemon into a fresh virtualenv and
runs a real daemon from it.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {"amcast": "amcast", "daemon": "amcast/daemon", "protocols": "amcast/protocols",
           "analytics": "amcast/analytics"}
BESIDE = ("bench", "tools")
"""The checkout's tooling folders that once were modules of the package."""
MOVED = ("amcast/benchmarks/", "amcast/faultrelay.py", "amcast/floodattack.py")
"""Where that tooling used to sit inside the package."""
NOT_INSTALLED = "the benchmarks are not installed: they run from a source checkout"

pytestmark = pytest.mark.processes


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory, build_wheel: ModuleType) -> Path:
    whl = build_wheel.pure_wheel(tmp_path_factory.mktemp("wheel"))
    assert isinstance(whl, Path), whl
    return whl


def test_wheel_has_one_top_level_name_and_every_module(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"amcast"}
    top_level = [n for n in names if n.endswith(".dist-info/top_level.txt")]
    if top_level:
        assert zipfile.ZipFile(wheel).read(top_level[0]).decode().split() == ["amcast"]
    expected = {
        f"{FOLDERS[folder]}/{path.relative_to(ROOT / folder).as_posix()}"
        for folder in FOLDERS
        for path in (ROOT / folder).rglob("*.py")
        if "__pycache__" not in path.parts
    }
    assert expected - set(names) == set()
    entry = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    scripts = zipfile.ZipFile(wheel).read(entry).decode()
    assert "amcastd = amcast.daemon.main:main" in scripts
    assert "amcast = amcast.cli:main" in scripts


def tooling_in(names: list[str]) -> list[str]:
    """The wheel's files that are tooling: a module of ``bench/`` or ``tools/`` under any
    folder, or one at the place it had in the package."""
    modules = {path.relative_to(ROOT / folder).as_posix()
               for folder in BESIDE for path in (ROOT / folder).rglob("*.py")
               if "__pycache__" not in path.parts}
    return sorted(
        n for n in names
        if n.startswith(MOVED)
        or any(f"/{folder}/" in f"/{n}" and n.split(f"{folder}/", 1)[1] in modules
               for folder in BESIDE))


def test_the_wheel_has_no_benchmark_fault_or_attack_module(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert tooling_in(names) == []
    assert len([n for n in names if n.endswith(".py")]) > 100  # the package itself is there


def test_the_tooling_check_sees_a_planted_module() -> None:
    planted = ["amcast/cli.py", "amcast/commands/bench.py", "amcast/benchmarks/engine.py",
               "amcast/floodattack.py", "amcast/bench/cluster.py", "tools/faultrelay.py",
               "bench/__main__.py"]
    assert tooling_in(planted) == sorted(planted[2:])


def _python(wheel: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` with the unpacked wheel as its ``amcast``: ``-S`` skips
    site-packages' ``.pth`` files (this checkout's editable install), and the
    dependencies come from this environment's site-packages, after the wheel; it runs in
    a directory outside the checkout."""
    site = tmp_path / "site"
    if not site.exists():
        zipfile.ZipFile(wheel).extractall(site)
    deps = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
           "PYTHONPATH": os.pathsep.join([str(site), *deps])}
    return subprocess.run([sys.executable, "-S", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)


def _unpacked(wheel: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``amcast ARGS`` from the unpacked wheel."""
    return _python(wheel, tmp_path, "-m", "amcast.cli", *args)


def test_amcast_runs_from_the_wheel_alone_and_says_where_benchmarks_run(
    wheel: Path, tmp_path: Path,
) -> None:
    done = _unpacked(wheel, tmp_path, "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: amcast") and "bench" in done.stdout
    for command in ("demo", "cluster", "simulate", "send", "listen", "status", "keygen"):
        assert f"    {command} " in done.stdout, command
    probe = _unpacked(wheel, tmp_path, "demo", "--help")
    assert probe.returncode == 0, probe.stderr
    run = _unpacked(wheel, tmp_path, "bench", "engine", "--sizes", "4")
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert run.returncode == 2 and run.stdout == "", run.stdout + run.stderr
    assert len(lines) == 1 and lines[0].startswith(f"amcast: error: {NOT_INSTALLED}"), lines
    for ask in (["bench"], ["bench", "--help"]):
        told = _unpacked(wheel, tmp_path, *ask)
        assert told.returncode == 0 and told.stderr == "", told.stderr
        said = told.stdout.splitlines()
        assert len(said) == 1 and said[0].startswith(f"amcast bench: {NOT_INSTALLED}"), said
    where = _python(  # the amcast those runs imported was the wheel's, not this checkout's
        wheel, tmp_path, "-c", "import amcast.cli, sys; print(amcast.cli.__file__); "
        "amcast.cli.main(['bench', 'engine']); print('bench' in sys.modules)")
    assert where.stdout.split() == [str(tmp_path / "site" / "amcast" / "cli.py"), "False"], (
        where.stdout + where.stderr)


def test_amcast_runs_beside_python_daemon_in_a_virtualenv(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", str(wheel),
                          "python-daemon"], capture_output=True, text=True, timeout=600)
    if pip.returncode != 0 and "No matching distribution" in pip.stderr + pip.stdout:
        pytest.skip(f"cannot install from the package index here: {pip.stderr[-300:]}")
    assert pip.returncode == 0, pip.stderr[-2000:]
    python = venv / "bin" / "python"
    probe = subprocess.run(
        [str(python), "-c",
         "import daemon, amcast.daemon.runner, amcast.protocols.node;"
         "print(daemon.DaemonContext.__module__, amcast.daemon.runner.__name__)"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.split() == ["daemon.daemon", "amcast.daemon.runner"]

    sock = tmp_path / "amcastd.sock"
    config = tmp_path / "amcastd.toml"
    config.write_text(
        f"[node]\nid = 0\nmembers = [0]\nstate_dir = \"{tmp_path / 'state'}\"\n"
        f"[network]\ngroup = \"239.255.77.13\"\nport = {_free_udp_port()}\n"
        "interface = \"127.0.0.1\"\n"
        f"[api]\nsocket = \"{sock}\"\n"
        f"[logs]\ndir = \"{tmp_path / 'logs'}\"\nformat = \"json\"\n"
        "[metrics]\nenabled = false\n"
        "[protocol]\ninsecure = true\n"
    )
    proc = subprocess.Popen([str(venv / "bin" / "amcastd"), "--config", str(config)],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        seen = _wait_for_line(proc, b"amcastd ready", timeout=30.0)
        assert b"amcastd ready" in seen, seen.decode(errors="replace")
        status = subprocess.run(
            [str(venv / "bin" / "amcast"), "status", "--socket", str(sock), "--json"],
            capture_output=True, text=True, timeout=30, cwd=tmp_path)
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["node"] == 0
        bench = subprocess.run([str(venv / "bin" / "amcast"), "bench", "engine"],
                               capture_output=True, text=True, timeout=60, cwd=tmp_path)
        assert bench.returncode == 2 and NOT_INSTALLED in bench.stderr, bench.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out.decode(errors="replace")


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_line(proc: subprocess.Popen[bytes], marker: bytes, *, timeout: float) -> bytes:
    """Read the process's output until ``marker`` appears, it exits, or ``timeout`` passes."""
    assert proc.stdout is not None
    seen = b""
    deadline = time.monotonic() + timeout
    while marker not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        chunk = os.read(proc.stdout.fileno(), 65536)
        if not chunk:
            break
        seen += chunk
    return seen
