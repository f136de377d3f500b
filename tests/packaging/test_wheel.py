"""The installed package: one top-level import name, and it lives beside python-daemon.

The wheel is built from a copy of the tracked files (no build litter in the checkout).
Its top-level names must be exactly ``amcast`` (plus its dist-info): the repository's
``daemon/``, ``protocols/`` and ``analytics/`` folders are mapped to ``amcast.daemon``,
``amcast.protocols`` and ``amcast.analytics``, so installing amcast never overwrites
PyPI's ``python-daemon`` (whose module is ``daemon``, PEP 3143). Every Python file of
those folders must be in the wheel (a package missing from pyproject's list would ship
a broken install). The second test installs the wheel and python-daemon into a fresh
virtualenv and runs a real daemon from it.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {"amcast": "amcast", "daemon": "amcast/daemon", "protocols": "amcast/protocols",
           "analytics": "amcast/analytics"}

pytestmark = pytest.mark.processes


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory, build_native: ModuleType) -> Path:
    whl = build_native.pure_wheel(tmp_path_factory.mktemp("wheel"))
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
