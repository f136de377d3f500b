"""``amcast cluster start``'s files (``LocalCluster.write_configs``): each config holds the
group key, so it and its node folder are the owner's alone (issue 14, item 9)."""

from __future__ import annotations

import stat
import tomllib
from pathlib import Path

from amcast.protocols.wire.keys import Keyring

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
