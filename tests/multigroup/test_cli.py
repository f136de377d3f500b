"""``amcast simulate --preset multigroup``: the SCALATOM sweep from the command line."""

from __future__ import annotations

import json

import pytest

from amcast.cli import main


def test_multigroup_preset_prints_seeds_and_failed(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--preset", "multigroup", "--seeds", "8", "--seed", "40",
                 "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["seeds"] == 8 and report["failed"] == []


def test_multigroup_preset_runs_the_production_protocol(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--preset", "multigroup", "--protocol", "production",
                 "--seeds", "8", "--seed", "40", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["seeds"] == 8 and report["failed"] == []
    assert report["protocol"] == "production"


def test_protocol_option_belongs_to_the_multigroup_preset() -> None:
    assert main(["simulate", "--preset", "faults", "--protocol", "production"]) == 2


def test_multigroup_preset_exits_1_on_a_violation(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import amcast.protocols.multigroup.simulation as sim

    real = sim.check_run

    def planted(*args, **kwargs):  # type: ignore[no-untyped-def]
        return [*real(*args, **kwargs), "acyclicity: planted"]

    monkeypatch.setattr(sim, "check_run", planted)
    assert main(["simulate", "--preset", "multigroup", "--seeds", "2", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["failed"] == [1, 2] and "planted" in report["notes"][0]


def test_multigroup_preset_refuses_options_it_ignores() -> None:
    assert main(["simulate", "--preset", "multigroup", "--messages", "3"]) == 2
