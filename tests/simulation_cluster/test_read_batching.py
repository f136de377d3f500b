"""Nodes that read the network as a daemon does (``Cluster(read_batching=...)``).

A daemon wakes up, hands its Node every datagram the socket holds, then pulls the
output once (``Daemon._on_datagrams`` and one pump); by default the simulator hands over
one arrival at a time and pulls the output after each. The engines must be correct both
ways, so the CI runs seeds of both sweeps with reads batched as well (the long sweeps:
``amcast simulate --preset membership|faults --read-batching-ms 1``)."""

from __future__ import annotations

import argparse
import os

import pytest
from amcast.protocols.simulation.cluster import (
    READ_BATCH,
    Cluster,
    Workload,
    run_cluster_simulation,
)
from amcast.protocols.simulation.faults import Fault
from amcast.protocols.simulation.membership_sweep import run_membership_sweep

from amcast.cli import main


def _received(cluster: Cluster) -> int:
    return sum(sum(nd.stats.datagrams_received.values()) for nd in cluster.all_nodes)


def test_reads_take_several_datagrams_at_a_time_and_every_property_holds() -> None:
    batched = Cluster(5, seed=3, read_batching=0.001)
    result = batched.run(Workload(messages_per_node=50, interval=0.002), max_time=30.0)
    assert result.ok, result.violations
    assert len(result.sent) == 250
    assert sum(batched.reads.values()) * 3 < _received(batched)  # several per read
    one_by_one = Cluster(5, seed=3)
    assert one_by_one.run(Workload(messages_per_node=50, interval=0.002), max_time=30.0).ok
    assert not any(one_by_one.reads.values())


def test_a_paused_node_reads_what_waited_in_its_socket_in_batches_and_in_order() -> None:
    """Node 2 is stopped for 0.5 s while the others keep sending: on resuming it reads
    its socket buffer in batches of at most ``READ_BATCH``, in the order the datagrams
    arrived (those that arrived just before the pause, still unread, first), and the run
    stays correct."""
    cluster = Cluster(3, seed=5, read_batching=0.002)
    got: list[bytes] = []
    node = cluster.nodes[2]
    receive = node.receive_datagram

    def recording(data: bytes, now: float, **kw: object) -> bool:
        got.append(data)
        return receive(data, now, **kw)  # type: ignore[arg-type]

    node.receive_datagram = recording  # type: ignore[method-assign]
    sent: list[tuple[float, int, bytes]] = []
    multicast = cluster.network.multicast

    def tracking(src: int, data: bytes, now: float):  # type: ignore[no-untyped-def]
        arrivals, lost = multicast(src, data, now)
        sent.extend((at, len(sent), data) for at, dst in arrivals if dst == 2)
        return arrivals, lost

    cluster.network.multicast = tracking  # type: ignore[method-assign]
    cluster.schedule(Fault(0.02, "pause", (2,), duration=0.5))
    result = cluster.run(Workload(messages_per_node=300, interval=0.001), max_time=30.0)
    assert result.ok, result.violations
    assert got == [data for _, _, data in sorted(sent)][: len(got)]
    assert len(got) > 2 * READ_BATCH  # the buffer held more than one read's worth
    assert cluster.reads[2] < len(got) / 3


@pytest.mark.slow
def test_membership_sweep_with_reads_batched_every_property_holds() -> None:
    jobs = min(2, os.cpu_count() or 1)
    report = run_membership_sweep(range(200, 240), n_range=(3, 6), messages_per_node=25,
                                  jobs=jobs, read_batching=0.001)
    assert report["ok"], report["notes"][:10]
    assert "reads batched" in report["title"]
    assert report["figures"]["seeds with a crash-restart"] >= 4


@pytest.mark.slow
def test_faults_sweep_with_reads_batched_every_property_holds() -> None:
    report = run_cluster_simulation(range(200, 260), messages_per_node=12,
                                    read_batching=0.001)
    assert report["ok"], report["notes"][:10]
    assert report["figures"]["retransmissions"] > 0


def test_the_cli_refuses_a_read_batching_out_of_range(capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    status = main(["simulate", "--preset", "faults", "--seeds", "1",
                   "--read-batching-ms", "-1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1 and "--read-batching-ms" in err[0]


@pytest.mark.parametrize("argv", [
    ["--preset", "section7", "--read-batching-ms", "1"],
    ["--preset", "custom", "--read-batching-ms", "2"],
    ["--preset", "faults", "--seeds", "1", "--jobs", "2"],
    ["--preset", "section7", "--n", "16"],  # these three ran, ignoring the option
    ["--preset", "membership", "--seeds", "1", "--duplicate", "0.5"],
    ["--preset", "faults", "--seeds", "1", "--plot", "latency.png"],
])
def test_the_cli_refuses_a_flag_its_preset_would_ignore(
        argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["simulate", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    flag = argv[-2]
    assert status == 2 and len(err) == 1 and flag in err[0] and argv[1] in err[0]


def test_every_option_of_simulate_says_which_presets_read_it() -> None:
    """A new option must be placed in ``READ_BY`` (or be read by every preset), or a
    preset that ignores it would take it silently."""
    from amcast.commands import simulate

    every_preset = {"help", "preset", "seed", "json", "quiet"}
    parser = argparse.ArgumentParser()
    simulate.register(parser.add_subparsers())
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    dests = {a.dest for a in sub.choices["simulate"]._actions}
    assert dests - every_preset == set(simulate.READ_BY)
