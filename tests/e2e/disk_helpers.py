"""A small tmpfs for one daemon's directory, in a mount namespace of its own, and a file
that fills it: the full disks of ``test_state_disk_full`` and ``test_log_disk_full``."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from pathlib import Path

import pytest

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
