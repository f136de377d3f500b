"""Shared by the network-namespace tests: run ``ip``, skip (with the reason) where
namespaces cannot be made, build and tear down bridges and veth pairs, and count a
recorder's deliveries in a time window."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess

import pytest

from amcast.faultload import DELIVER, Recorder


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


def add_bridge(name: str) -> None:
    """A bridge that floods multicast to every port (no snooping: no querier here)."""
    ip("link", "add", name, "type", "bridge", "mcast_snooping", "0")
    ip("link", "set", name, "up")


def plug(ns: str, outer: str, inner: str, bridge: str) -> None:
    """A veth pair: ``inner`` in namespace ``ns``, ``outer`` on ``bridge``, up."""
    ip("link", "add", outer, "type", "veth", "peer", "name", inner)
    ip("link", "set", inner, "netns", ns)
    ip("link", "set", outer, "master", bridge)
    ip("link", "set", outer, "up")


def multicast_setup(inner: str, transport: str) -> list[tuple[str, ...]]:
    """``ip -n NS`` steps that bring ``inner`` up with an IPv4 multicast route, or, for
    unicast, with multicast switched off on it and on the loopback (no multicast route)."""
    if transport == "multicast":
        return [("link", "set", inner, "up", "multicast", "on"),
                ("route", "add", "224.0.0.0/4", "dev", inner)]
    return [("link", "set", inner, "up", "multicast", "off"),
            ("link", "set", "lo", "multicast", "off")]


def remove(namespaces: list[str], bridges: tuple[str, ...] | list[str]) -> None:
    """Delete the namespaces (their veth ends go with them) and the bridges."""
    for ns in namespaces:
        ip("netns", "del", ns, check=False)
    for bridge in bridges:
        ip("link", "del", bridge, check=False)


def delivered_between(rec: Recorder, start: float, end: float) -> int:
    return sum(1 for e in rec.timeline if e[0] == DELIVER and start <= e[1] < end)
