"""The container image built and the compose cluster run (``make container-test``).

Not part of ``make test`` or ``make check``: it needs root, a Docker engine (Debian's
docker.io, run in a namespace of its own by ``docker_engine.DockerEngine``) and
debootstrap, and takes minutes (see docs/operations.md, "Containers" for the time it
takes). For each transport (the compose file as it is, multicast on the bridge; and with
``docker-compose.unicast.yml``) it checks, against the real image:

- every daemon becomes ``healthy`` by the image's HEALTHCHECK (``amcast status
  --health``) and reports one primary view of the three nodes;
- three listeners, one per container, receive the same 1,500 messages (500 sent
  concurrently through each container's daemon) in the same order, each exactly once;
- the daemons' delivery logs (read from the shared volume after a SIGTERM stop) agree
  on every (view, position), and are owner-only files in owner-only directories;
- Prometheus (the compose file's service and scrape configuration, on a locally built
  image) scrapes all three daemons and sees their delivered-message counters;
- the compose demo's listener prints the demo sender's messages.
"""

from __future__ import annotations

import io
import json
import os
import secrets
import subprocess
import tarfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.deploy.conftest import REPO
from tests.deploy.docker_engine import (
    PROMETHEUS_IMAGE,
    DockerEngine,
    missing_tools,
    progress,
    query_prometheus,
)

pytestmark = pytest.mark.container

NODES = ("amcastd-0", "amcastd-1", "amcastd-2")
PER_NODE = 500
TRANSPORTS = {"multicast": (), "unicast": ("docker-compose.unicast.yml",)}


@pytest.fixture(scope="module")
def engine() -> Iterator[DockerEngine]:
    if os.geteuid() != 0:
        pytest.skip("the container test needs root (dockerd, network namespaces, debootstrap)")
    if missing := missing_tools():
        pytest.skip("missing: " + ", ".join(missing))
    data_root = Path(os.environ.get("AMCAST_DOCKER_ROOT", "/var/lib/amcast-container-test"))
    engine = DockerEngine(secrets.token_hex(3), data_root)
    try:
        engine.start()
        engine.build_images(REPO / "var" / "container" / "wheelhouse")
        yield engine
    finally:
        engine.stop()


class Listener:
    """``amcast listen --json --members`` in one container, read line by line."""

    def __init__(self, engine: DockerEngine, container: str, count: int) -> None:
        self.events: list[dict] = []
        self.joined_by_all = threading.Event()
        self.proc = subprocess.Popen(
            ["docker", "exec", container, "amcast", "listen", "--group", "order", "--json",
             "--members", "--count", str(count), "--timeout", "90"],
            env=engine.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            event = json.loads(line)
            self.events.append(event)
            if event["event"] == "members" and len(event["members"]) == len(NODES):
                self.joined_by_all.set()

    def deliveries(self) -> list[tuple[str, str]]:
        return [(e["id"], e["payload"]) for e in self.events if e["event"] == "deliver"]

    def finish(self, timeout: float) -> int:
        code = self.proc.wait(timeout)
        self._reader.join(10)
        return code


def _containers(engine: DockerEngine, project: str, files: tuple[str, ...]) -> dict[str, str]:
    return {node: engine.compose(project, files, "ps", "-q", node).stdout.strip()
            for node in NODES}


def _wait_healthy(engine: DockerEngine, containers: dict[str, str], timeout: float) -> None:
    started = time.monotonic()
    while True:
        states = {node: engine.docker("inspect", "-f", "{{.State.Health.Status}}", cid)
                  .stdout.strip() for node, cid in containers.items()}
        if all(state == "healthy" for state in states.values()):
            return
        assert time.monotonic() - started < timeout, f"not healthy after {timeout} s: {states}"
        time.sleep(1)


def _delivery_logs(engine: DockerEngine, project: str) -> tarfile.TarFile:
    """Every node's log directory, as a tar of the shared volume (modes kept)."""
    raw = subprocess.run(
        ["docker", "run", "--rm", "--user", "0", "-v", f"{project}_amcast-logs:/logs:ro",
         "--entrypoint", "tar", "amcast:latest", "-C", "/logs", "-cf", "-", "."],
        env=engine.env, capture_output=True, timeout=120, check=True).stdout
    return tarfile.open(fileobj=io.BytesIO(raw))


def _ordered_records(logs: tarfile.TarFile, node: int) -> dict[tuple[int, int], tuple]:
    member = logs.extractfile(f"./node{node}/delivery.jsonl")
    assert member is not None
    ordered = {}
    for line in member.read().decode().splitlines():
        record = json.loads(line)
        if record["type"] == "delivery" and record["position"] is not None:
            key = (record["view"], record["position"])
            ordered[key] = (record["sender"], record["seq"], record["count"])
    return ordered


@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
def test_the_compose_cluster_runs_healthy_orders_identically_and_is_scraped(
    engine: DockerEngine, transport: str, tmp_path: Path,
) -> None:
    started = time.monotonic()
    project = f"amcct{secrets.token_hex(2)}"
    override = tmp_path / "local-images.yml"
    override.write_text(f'version: "3.8"\nservices:\n  prometheus:\n'
                        f"    image: {PROMETHEUS_IMAGE}\n")
    files = ("docker-compose.yml", *TRANSPORTS[transport], str(override))
    try:
        progress(f"{transport}: docker-compose up (the demo waits for healthy daemons)")
        engine.compose(project, files, "up", "-d", "--no-build")
        containers = _containers(engine, project, files)
        _wait_healthy(engine, containers, timeout=120)
        progress(f"{transport}: 3 daemons healthy {time.monotonic() - started:.0f} s "
                 "after docker-compose up")
        for node, cid in containers.items():
            status = json.loads(engine.docker("exec", cid, "amcast", "status", "--json").stdout)
            # the image is amcastd-native: the daemon decodes with the Rust extension
            assert status["core"]["decode"] == "native", (node, status["core"])
            assert status["view"]["primary"] is True, (node, status["view"])
            assert sorted(status["view"]["members"]) == [0, 1, 2], (node, status["view"])
            assert status["transport"] == transport, node

        listeners = [Listener(engine, cid, PER_NODE * len(NODES))
                     for cid in containers.values()]
        for listener in listeners:
            assert listener.joined_by_all.wait(60), listener.events
        progress(f"{transport}: 3 listeners joined; sending {PER_NODE} messages per node")
        senders = [
            subprocess.Popen(["docker", "exec", "-i", cid, "amcast", "send", "--group", "order",
                              "--timeout", "60"],
                             env=engine.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
            for cid in containers.values()]
        with ThreadPoolExecutor(len(senders)) as pool:
            outcomes = list(pool.map(
                lambda i: senders[i].communicate(
                    "".join(f"n{i}-{k}\n" for k in range(PER_NODE)), timeout=120),
                range(len(senders))))
        for sender, outcome in zip(senders, outcomes, strict=True):
            assert sender.returncode == 0, outcome
        for listener in listeners:
            assert listener.finish(120) == 0, listener.proc.stderr.read()  # type: ignore[union-attr]
        sequences = [listener.deliveries() for listener in listeners]
        assert sequences[0] == sequences[1] == sequences[2]
        expected = sorted(f"n{i}-{k}" for i in range(len(NODES)) for k in range(PER_NODE))
        assert sorted(payload for _id, payload in sequences[0]) == expected
        progress(f"{transport}: {len(sequences[0])} messages in one order at all 3 listeners")

        deadline = time.monotonic() + 60
        while True:
            up = query_prometheus(engine, 'up{job="amcast"}')
            delivered = query_prometheus(engine, "amcast_messages_delivered_total")
            counts = {r["metric"]["instance"]: float(r["value"][1]) for r in delivered}
            if (len(up) == len(NODES) and all(r["value"][1] == "1" for r in up)
                    and len(counts) == len(NODES)
                    and min(counts.values()) >= len(expected)):
                break
            assert time.monotonic() < deadline, (up, counts)
            time.sleep(2)
        progress(f"{transport}: Prometheus scrapes all 3 daemons: {sorted(counts.items())}")

        demo = engine.compose(project, files, "logs", "--no-color", "demo-listener").stdout
        assert "hello 1 from the compose demo" in demo

        engine.compose(project, files, "stop", *NODES)
        logs = _delivery_logs(engine, project)
        ordered = [_ordered_records(logs, node) for node in range(len(NODES))]
        common = set(ordered[0]) & set(ordered[1]) & set(ordered[2])
        assert len(common) > 0
        for key in sorted(set().union(*ordered)):
            assert len({o[key] for o in ordered if key in o}) == 1, key
        for info in logs.getmembers():
            if info.name.startswith("./node") and (info.isdir() or ".jsonl" in info.name):
                assert info.mode & 0o077 == 0, (info.name, oct(info.mode))
        progress(f"{transport}: delivery logs agree on {len(common)} common positions; "
                 f"the run took {time.monotonic() - started:.0f} s")
    finally:
        done = engine.compose(project, files, "down", "-v", "--timeout", "20", check=False)
        if done.returncode != 0:
            progress(f"{transport}: docker-compose down failed: {done.stderr[-500:]}")
