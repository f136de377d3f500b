"""``examples/bank.py`` against a real local federation: three clusters of three daemons,
a replica on each, transfers inside and across shards from every cluster; the replicas of
each cluster end with the same balances and history, and the total over the shards is
the total at the start. ``check`` itself is tested on planted violations."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from amcast.localfederation import LocalFederation
from tests.steady import STEADY

ROOT = Path(__file__).resolve().parents[2]
BANK = ROOT / "examples" / "bank.py"
spec = importlib.util.spec_from_file_location("bank", BANK)
assert spec is not None and spec.loader is not None
bank = importlib.util.module_from_spec(spec)
sys.modules["bank"] = bank  # dataclasses look the module up
spec.loader.exec_module(bank)


@pytest.mark.slow  # nine daemons: about 25 s on a shared CI host
@pytest.mark.processes
def test_the_sharded_bank_conserves_money_and_its_replicas_agree() -> None:
    path = Path(tempfile.mkdtemp(prefix="amcb-", dir="/tmp"))
    fed = LocalFederation(3, 3, path, protocol={**STEADY}, metrics=False)
    fed.start(timeout=60)
    try:
        replicas = [f"--replica={name}{i}={sock}" for name in fed.names
                    for i, sock in enumerate(fed.sockets(name))]
        env = {k: v for k, v in os.environ.items() if not k.startswith("AMCAST_")}
        env["PYTHONPATH"] = str(ROOT)
        r = subprocess.run([sys.executable, str(BANK), *replicas, "--replicas", "9",
                            "--transfers", "40", "--deadline", "60", "--check"],
                           capture_output=True, text=True, env=env, timeout=90)
    finally:
        fed.stop(timeout=10)
        shutil.rmtree(path, ignore_errors=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    *shards, verdict = [json.loads(line) for line in r.stdout.splitlines()]
    assert verdict["ok"] is True, verdict
    assert len(shards) == 9 and {s["cluster"] for s in shards} == {"a", "b", "c"}
    assert sum(s["total"] for s in shards) == 3 * 3 * 10 * 1000  # 3 replicas a shard
    assert all(s["transfers"] > 0 for s in shards)


def _shard(name: str, cluster: str, chain: str, balances: dict[str, int]) -> dict[str, Any]:
    return {"name": name, "cluster": cluster, "chain": chain, "balances": balances,
            "total": sum(balances.values()), "transfers": 1}


def test_check_finds_planted_violations() -> None:
    good = [_shard("a0", "a", "x", {"a0": 5, "a1": 15}),
            _shard("a1", "a", "x", {"a0": 5, "a1": 15}),
            _shard("b0", "b", "y", {"b0": 10, "b1": 10})]
    assert bank.check(good, 2, 2, 10) == []
    disagree = [*good[:1], _shard("a1", "a", "z", {"a0": 5, "a1": 15}), good[2]]
    assert bank.check(disagree, 2, 2, 10) == ["the replicas of cluster a disagree"]
    minted = [*good[:2], _shard("b0", "b", "y", {"b0": 11, "b1": 10})]
    assert bank.check(minted, 2, 2, 10) == ["the total is 41, not 40"]
    assert bank.check(good[:2], 2, 2, 10) == ["replicas of 1 clusters, not 2",
                                              "the total is 20, not 40"]


def test_a_transfer_goes_to_its_shards_and_the_senders_cluster() -> None:
    assert bank.shard_of("b17") == "b" and bank.accounts("c", 2) == ["c0", "c1"]
    s = bank.Shard("a", {"a0": 10, "a1": 10})
    raw = b"{}"
    s.apply({"t": "xfer", "id": "x", "from": "a0", "to": "b3", "amount": 4}, raw)
    s.apply({"t": "xfer", "id": "y", "from": "c1", "to": "a1", "amount": 2}, raw)
    s.apply({"t": "xfer", "id": "z", "from": "c1", "to": "b1", "amount": 2}, raw)
    assert s.balances == {"a0": 6, "a1": 12} and s.transfers == 2
