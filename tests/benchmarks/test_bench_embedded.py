"""``amcast bench embedded``: both modes run from the same configuration files, the
sender's latency is measured and every node delivers everything."""

from __future__ import annotations

import json

import pytest

from bench import cli

pytestmark = [pytest.mark.processes, pytest.mark.slow]


def test_daemons_and_embedded_members_both_deliver_everything(capsys: pytest.CaptureFixture
                                                               ) -> None:
    assert cli.main(["embedded", "--nodes", "2", "--duration", "1", "--warmup", "0",
                     "--rate", "200", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    rows = report["tables"][0]["rows"]
    assert [r[1] for r in rows] == ["daemon", "embedded"]
    for n, _mode, p50, p99, samples, cpu, _per_msg, everywhere in rows:
        assert n == 2 and everywhere is True
        assert samples >= 150 and 0 < p50 <= p99 and cpu > 0
