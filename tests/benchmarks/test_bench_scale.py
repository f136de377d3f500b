"""``amcast bench scale --quick``: the figures add up and grow with n the way the
protocol says they must (deterministic: the simulator runs on a virtual clock)."""

from __future__ import annotations

import argparse
import json
from itertools import pairwise

import pytest
from amcast.protocols.node import Node
from amcast.protocols.node_config import NodeConfig
from amcast.protocols.ordering import TotalOrderEngine
from amcast.protocols.session import prompt_ackers

from bench import scale
from tests.cli.helpers import amcast

ORIGINAL = (TotalOrderEngine.insert, TotalOrderEngine.close, Node.receive_datagram)


@pytest.fixture(scope="module")
def report() -> dict:
    args = argparse.Namespace(nodes=scale.DEFAULT_NODES, seed=1, quick=True, json=True)
    out = scale.run(args)
    return json.loads(json.dumps(out))  # what --json prints


def test_keys_and_tables(report: dict) -> None:
    assert set(report) >= {"title", "tables", "figures", "points", "notes"}
    for table in report["tables"]:
        assert all(len(row) == len(table["columns"]) for row in table["rows"])
    for load in ("light", "all"):
        assert [p["n"] for p in report["points"][load]] == [4, 8, 16]
        for p in report["points"][load]:
            assert set(p["sent"]) == set(p["received"]) == set(scale.KINDS)
            assert set(p["cpu ms by layer"]) == set(scale.LAYERS)


def test_probes_are_removed(report: dict) -> None:
    assert (TotalOrderEngine.insert, TotalOrderEngine.close,
            Node.receive_datagram) == ORIGINAL


@pytest.mark.parametrize("load", ["light", "all"])
def test_header_split_adds_up_and_grows_with_n(report: dict, load: str) -> None:
    points = report["points"][load]
    for p in points:
        assert p["header: seal (AEAD header+tag)"] == 54.0  # 38-byte sealed header, 16-byte GCM tag
        parts = p["header: seal (AEAD header+tag)"] + p["header: ack vector"] + p["header: other"]
        assert p["header bytes"] == pytest.approx(parts)
        assert 20 <= p["header: other"] <= 30  # ids, seq, service, float time, framing
        assert p["messages per data vertex"] == 1.0
    for small, big in pairwise(points):
        assert big["header: ack vector"] > small["header: ack vector"]
        assert big["header bytes"] > small["header bytes"]
        assert big["bytes received"] > small["bytes received"]


@pytest.mark.parametrize("load", ["light", "all"])
def test_every_datagram_reaches_the_other_members(report: dict, load: str) -> None:
    for p in report["points"][load]:
        n = p["n"]
        assert p["datagrams sent"] == pytest.approx(sum(p["sent"].values()))
        for kind in scale.KINDS:  # no loss: n - 1 receptions of every datagram
            assert p["received"][kind] == pytest.approx((n - 1) * p["sent"][kind])
        assert p["sent"]["data"] == 1.0
        assert p["sent"]["nack"] == p["sent"]["repair"] == 0


def test_light_load_half_the_group_acks_at_once_and_half_vote(report: dict) -> None:
    for p in report["points"]["light"]:
        n = p["n"]
        prompt = prompt_ackers(n, n / 2)  # at most one ack per prompt acker and message;
        # a lazy one acks at most once per lazy_ack_delay (its acks cover ~10 messages
        # in steady state; in this short run the acks at its end weigh more)
        delay = NodeConfig(group_key=scale.KEY).lazy_ack_delay
        lazy = (n - 1 - prompt) * (p["virtual seconds"] / delay + 1)
        assert lazy / p["messages"] < n - 1 - prompt  # lazy ones acking every message fail
        assert prompt / 2 <= p["sent"]["ack_only"] <= prompt + lazy / p["messages"]
        assert p["phi"] == n / 2
        assert n - p["phi"] <= p["mean ntail at delivery"] < n - p["phi"] + 1  # ~n/2 voters
        shares = p["rule share"]
        assert shares["default"] == 0 and shares["gl_prefix"] + shares["early"] == 1.0


def test_all_send_acks_ride_on_data(report: dict) -> None:
    for light, busy in zip(report["points"]["light"], report["points"]["all"], strict=True):
        assert busy["sent"]["ack_only"] < 0.5
        assert busy["datagrams received"] < light["datagrams received"] / 2


def test_cpu_is_positive_and_grows_faster_at_light_load(report: dict) -> None:
    for load in ("light", "all"):
        for p in report["points"][load]:
            layers = p["cpu ms by layer"]
            assert all(v > 0 for v in layers.values())
            assert sum(layers.values()) == pytest.approx(p["cpu ms"])
            assert p["cpu ms per node"] == pytest.approx(p["cpu ms"] / p["n"])
    light = report["points"]["light"]
    # n^2 receptions per message: 4x the group is >= 4x the CPU (by far, in practice)
    assert light[-1]["cpu ms"] > 4 * light[0]["cpu ms"]
    assert report["figures"]["light: datagrams received per message ~ n^b, fitted b"] > 1.9


def test_cli_quick_json() -> None:
    result = amcast("bench", "scale", "--quick", "--nodes", "4,8", "--json")
    assert result.code == 0, result.err
    out = json.loads(result.out)
    assert [p["n"] for p in out["points"]["light"]] == [4, 8]
    assert "[bench scale] n=8, all" in result.err
