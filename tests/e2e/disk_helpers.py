"""A small tmpfs for one daemon's directory, in a mount namespace of its own, and a file
that fills it: the full disks of ``test_state_disk_full`` and ``test_log_disk_full``
(``node3_on_tmpfs``: 4 daemons under the paced load, node 3's directory on the tmpfs)."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from amcast.faultload import FaultRun, loaded
from amcast.localcluster import LocalCluster

TMPFS = "size=256k,mode=0700"


def mount_tmpfs(label: str) -> str:
    """A ``sh -c`` script: mount a 256 KiB tmpfs on ``$0`` (made if missing), then exec
    the rest of the command line; run it under ``unshare -m``."""
    return f'mkdir -p "$0" && mount -t tmpfs -o {TMPFS} {label} "$0" && exec "$@"'


def mount_namespaces_or_skip(directory: Path) -> None:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("a tmpfs in a mount namespace of its own needs root and unshare")
    probe = directory / "probe"
    result = subprocess.run(["unshare", "-m", "sh", "-c", mount_tmpfs("amcast-probe"),
                             str(probe), "true"],
                            capture_output=True, timeout=20, check=False)
    if result.returncode != 0:
        pytest.skip("this machine forbids a tmpfs in a new mount namespace: "
                    + result.stderr.decode(errors="replace").strip())


def seen_inside(pid: int, path: Path) -> Path:
    """``path`` as process ``pid`` sees it (its own mount namespace), from outside."""
    return Path(f"/proc/{pid}/root") / path.relative_to("/")


def fill(directory: Path) -> Path:
    """Write a file into ``directory`` until the filesystem is full; its path."""
    filler = directory / "filler"
    chunk = b"\0" * 4096
    with open(filler, "wb", buffering=0) as fh:
        while True:
            try:
                fh.write(chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
                return filler


@asynccontextmanager
async def node3_on_tmpfs(prefix: str, subdir: str) -> AsyncIterator[FaultRun]:
    """4 daemons under ``faultload``'s paced load, node 3's ``node<3>/<subdir>`` (its
    ``state`` or ``logs`` directory) on a 256 KiB tmpfs of its own; skips with the reason
    where that is not allowed. Everything is removed afterwards."""
    directory = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    try:
        mount_namespaces_or_skip(directory)
    except BaseException:  # pytest.skip too: leave nothing behind
        shutil.rmtree(directory, ignore_errors=True)
        raise
    wrapper = ["unshare", "-m", "sh", "-c", mount_tmpfs(f"amcast-{subdir}"),
               str(directory / "node3" / subdir)]
    cluster = LocalCluster(4, directory, metrics=False, log_level="info",
                           wrappers=[[], [], [], wrapper])
    try:
        async with loaded(cluster) as fault_run:
            yield fault_run
    finally:
        shutil.rmtree(directory, ignore_errors=True)
