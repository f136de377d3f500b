"""``amcast cluster start``'s files (``LocalCluster.write_configs``): each config holds the
group key, so it and its node folder are the owner's alone (issue 14, item 9)."""

from __future__ import annotations

import socket
import stat
import tomllib
from pathlib import Path

import pytest
from amcast.protocols.errors import AmcastError
from amcast.protocols.wire.keys import Keyring

from amcast import localcluster
from amcast.localcluster import LocalCluster


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_configs_holding_the_key_are_owner_only_even_over_wider_old_files(
    tmp_path: Path,
) -> None:
    cluster = LocalCluster(2, tmp_path / "c", metrics=False)
    old = tmp_path / "c" / "node0"
    old.mkdir(parents=True, mode=0o755)
    (old / "amcastd.toml").write_text("stale")
    (old / "amcastd.toml").chmod(0o644)
    cluster.write_configs()
    for node in cluster.nodes:
        assert mode(node.config) == 0o600, node.config
        assert mode(node.config.parent) == 0o700, node.config.parent
        text = node.config.read_text()
        assert tomllib.loads(text)["security"]["key_file"] == str(cluster.key_file)
        assert "group_key" not in text  # the configs hold no secret
    assert cluster.key_file is not None and mode(cluster.key_file) == 0o400
    assert len(Keyring.parse(cluster.key_file.read_text()).ids) == 1  # one fresh key


@pytest.mark.parametrize("kind", [socket.SOCK_DGRAM, socket.SOCK_STREAM])
def test_free_ports_lie_below_the_kernels_ephemeral_range_and_are_free(kind: int) -> None:
    """A killed daemon's port must still be free at its restart: the kernel hands ports
    of its ephemeral range to every socket bound to port 0 (clients, senders, other
    tests' daemons), never one below it."""
    low = localcluster._ephemeral_low()
    ports = {localcluster.free_port(kind) for _ in range(50)}
    assert len(ports) > 40  # random, not one port over and over
    for port in ports:
        assert localcluster.PORT_FLOOR <= port < low
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", ports.pop()))


def test_free_port_takes_the_kernels_pick_when_no_room_is_below_its_range(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    narrow = tmp_path / "ip_local_port_range"
    narrow.write_text(f"{localcluster.PORT_FLOOR + 10}\t60999\n")
    monkeypatch.setattr(localcluster, "EPHEMERAL_RANGE", narrow)
    assert localcluster.free_port() >= localcluster.PORT_FLOOR + 10
    monkeypatch.setattr(localcluster, "EPHEMERAL_RANGE", tmp_path / "missing")
    assert localcluster._ephemeral_low() == 32768


def test_a_port_taken_between_its_pick_and_the_bind_starts_the_cluster_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The CI failure of 292dff8: a daemon exited with EADDRINUSE because another process
    took its free port first. ``start`` sees that in the daemon's log, stops the others
    and starts over on fresh ports; a port it was given stays a failure."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    real = localcluster.free_port
    handed = []

    def first_metrics_port_taken(kind: int = socket.SOCK_DGRAM) -> int:
        if kind == socket.SOCK_STREAM and not handed:
            handed.append(port)
            return port
        return real(kind)

    monkeypatch.setattr(localcluster, "free_port", first_metrics_port_taken)
    cluster = LocalCluster(2, tmp_path / "c", transport="unicast")
    try:
        cluster.start(timeout=20)
        assert handed == [port]
        assert port not in [n.metrics_port for n in cluster.nodes]
        assert len(cluster.alive()) == 2
        logs = [(n.config.parent / "amcastd.log").read_text() for n in cluster.nodes]
        assert sum(f"127.0.0.1:{port} cannot be bound (EADDRINUSE" in x for x in logs) == 1
    finally:
        cluster.stop()
        taken.close()


def test_a_taken_port_in_configs_written_before_start_fails_with_the_daemons_line(
    tmp_path: Path,
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        cluster = LocalCluster(2, tmp_path / "c")
        cluster.write_configs()
        config = cluster.nodes[1].config
        port = cluster.nodes[1].metrics_port
        config.write_text(config.read_text().replace(
            f"port = {port}", f"port = {taken.getsockname()[1]}"))
        with pytest.raises(AmcastError, match=r"cannot be bound \(EADDRINUSE"):
            cluster.start(timeout=20)
        assert cluster.alive() == []
