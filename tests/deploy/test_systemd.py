"""``deploy/systemd`` units pass ``systemd-analyze verify`` (with ExecStart pointed at
this checkout's amcastd, since verify checks that the binary exists), and the check is
able to fail."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.deploy.conftest import REPO, require_tool

UNITS = REPO / "deploy" / "systemd"
AMCASTD = Path(sys.executable).with_name("amcastd")


def _verify(tmp_path: Path, name: str, text: str) -> subprocess.CompletedProcess[str]:
    """verify also runs man(1) on Documentation='s pages: the generated ones are found
    through MANPATH (deploy/manpages.py, as the Debian package installs them)."""
    tool = require_tool("systemd-analyze", "part of systemd")
    unit = tmp_path / name
    unit.write_text(text.replace("/usr/local/bin/amcastd", str(AMCASTD)))
    man = tmp_path / "man"
    subprocess.run([sys.executable, str(REPO / "deploy" / "manpages.py"), str(man)],
                   check=True, capture_output=True, timeout=120)
    return subprocess.run([tool, "verify", str(unit)], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path, env={**os.environ, "MANPATH": str(man)})


@pytest.mark.parametrize(("source", "name"), [("amcastd.service", "amcastd.service"),
                                              ("amcastd@.service", "amcastd@node1.service")])
def test_units_verify_cleanly(tmp_path: Path, source: str, name: str) -> None:
    result = _verify(tmp_path, name, (UNITS / source).read_text())
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == "" and result.stdout.strip() == "", result.stderr


def test_a_broken_unit_is_reported(tmp_path: Path) -> None:
    text = (UNITS / "amcastd.service").read_text().replace("Type=notify", "Type=notifyy")
    result = _verify(tmp_path, "amcastd.service", text)
    assert "Failed to parse service type" in result.stderr


def test_units_are_notify_hardened_and_use_only_the_address_families_amcastd_opens() -> None:
    sources = " ".join((REPO / "daemon" / f).read_text()
                       for f in ("transport.py", "unicast.py", "notify.py"))
    used = set(re.findall(r"socket\.(AF_INET6|AF_INET|AF_UNIX)\b", sources))
    assert used == {"AF_INET", "AF_INET6", "AF_UNIX"}  # IPv4 and IPv6 networks, unix sockets
    for source in ("amcastd.service", "amcastd@.service"):
        settings = dict(
            line.split("=", 1) for line in (UNITS / source).read_text().splitlines()
            if "=" in line and not line.startswith("#")
        )
        assert settings["Type"] == "notify" and int(settings["WatchdogSec"]) > 0
        assert set(settings["RestrictAddressFamilies"].split()) == used
        assert settings["CapabilityBoundingSet"] == ""
        for key in ("NoNewPrivileges", "ProtectHome", "PrivateTmp"):
            assert settings[key] == "yes"
        assert settings["ProtectSystem"] == "strict"
        assert settings["RuntimeDirectoryMode"] == "0750"  # the socket's group reaches it
        # logs and state (delivery records, ballots) and whatever else it creates: owner only
        assert settings["LogsDirectoryMode"] == "0700" and settings["UMask"] == "0077"
        assert settings["ExecReload"] == "/bin/kill -HUP $MAINPID"  # key rollover, members
        assert settings["Environment"]  # socket path / group come from the unit's dirs
