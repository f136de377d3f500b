"""Shared by the network-namespace tests: run ``ip``, and skip (with the reason) where
namespaces cannot be made."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess

import pytest


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=20,
                          check=check)


def namespaces_or_skip(prefix: str) -> str:
    """A fresh random tag for this test's namespaces and links, once a probe namespace
    could be made; ``pytest.skip`` with the reason otherwise."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("network namespaces need root and iproute2 (`ip`)")
    tag = secrets.token_hex(3)
    probe = f"{prefix}p{tag}"
    if ip("netns", "add", probe, check=False).returncode != 0:
        pytest.skip("this machine forbids creating network namespaces (`ip netns add` failed)")
    ip("netns", "del", probe)
    return tag
