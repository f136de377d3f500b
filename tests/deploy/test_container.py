"""Dockerfile, lock files and docker-compose.yml.

These run in ``make check`` without a Docker engine: ``docker-compose config`` (Debian's
docker-compose parses and validates without an engine) checks the compose file, and the
structure of both files is checked below. Building the image and running the cluster is
``test_container_cluster.py`` (``make container-test``).
"""

from __future__ import annotations

import re
import subprocess
import tomllib

import yaml

from tests.deploy.conftest import REPO, require_tool


def _compose_config(*overrides: str) -> dict:
    tool = require_tool("docker-compose", "Debian package docker-compose")
    files = [arg for name in ("docker-compose.yml", *overrides) for arg in ("-f", name)]
    quiet = subprocess.run([tool, *files, "config", "-q"], cwd=REPO,
                           capture_output=True, text=True, timeout=60)
    assert quiet.returncode == 0, quiet.stderr
    full = subprocess.run([tool, *files, "--profile", "analytics", "config"],
                          cwd=REPO, capture_output=True, text=True, timeout=60, check=True)
    return yaml.safe_load(full.stdout)


def test_the_unicast_variant_names_every_member_by_its_service_name() -> None:
    from amcast.daemon.config import load_config

    services = _compose_config("docker-compose.unicast.yml")["services"]
    nodes = {name: s for name, s in services.items() if name.startswith("amcastd-")}
    for name, s in nodes.items():
        env = {k: str(v) for k, v in s["environment"].items()}
        cfg = load_config(REPO / "config" / "amcastd.toml", env)
        assert cfg.network.transport == "unicast"
        assert cfg.node.id == int(name.split("-")[1])
        assert {cfg.network.peers[m] for m in cfg.node.members} == {
            f"{other}:{cfg.network.port}" for other in nodes}


def test_compose_file_validates_and_describes_the_cluster() -> None:
    config = _compose_config()
    services = config["services"]
    nodes = {name: s for name, s in services.items() if name.startswith("amcastd-")}
    assert len(nodes) >= 3
    ids = sorted(int(s["environment"]["AMCAST_NODE__ID"]) for s in nodes.values())
    assert ids == list(range(len(nodes)))
    for s in nodes.values():
        env = s["environment"]
        assert env["AMCAST_NODE__MEMBERS"] == str(ids).replace(" ", "")
        assert s["build"]["target"] == "amcastd-native"  # the native data path
        address = s["networks"]["amcast"]["ipv4_address"]
        assert env["AMCAST_NETWORK__INTERFACE"] == address  # multicast joins on the bridge
        assert re.fullmatch(r"239\.\d+\.\d+\.\d+", env["AMCAST_NETWORK__GROUP"])
    assert config["networks"]["amcast"]["driver"] == "bridge"
    assert {"prometheus", "demo-sender", "demo-listener", "analytics"} <= set(services)
    assert services["analytics"]["command"][:2] == ["amcast", "analyze"]
    targets = yaml.safe_load((REPO / "deploy/prometheus/prometheus.yml").read_text())
    scraped = targets["scrape_configs"][0]["static_configs"][0]["targets"]
    assert sorted(t.split(":")[0] for t in scraped) == sorted(nodes)
    binds = 0
    for name, s in services.items():
        for volume in s.get("volumes", []):
            source = volume["source"] if isinstance(volume, dict) else volume.split(":")[0]
            if source.startswith(("/", ".")):  # a bind mount (compose makes them absolute)
                assert (REPO / source).exists(), (name, source)
                binds += 1
    assert binds >= 2  # prometheus.yml and alerts.yml


def test_compose_makes_a_key_has_no_default_one_and_keeps_metrics_off_the_host() -> None:
    config = _compose_config()
    services = config["services"]
    keygen = services["keygen"]
    assert "amcast keygen -f /etc/amcast/keys/authkey" in " ".join(keygen["command"])
    text = (REPO / "docker-compose.yml").read_text()
    assert "GROUP_KEY" not in text and "change-me" not in text  # no default secret
    for name, s in services.items():
        if not name.startswith("amcastd-"):
            continue
        env = s["environment"]
        assert env["AMCAST_SECURITY__KEY_FILE"] == "/etc/amcast/keys/authkey"
        assert s["depends_on"]["keygen"]["condition"] == "service_completed_successfully"
        mounts = [v if isinstance(v, dict) else dict(
            zip(("source", "target", "mode"), v.split(":"), strict=False)) for v in s["volumes"]]
        keys = next(m for m in mounts if m["target"] == "/etc/amcast/keys")
        assert keys["source"] == "amcast-keys"
        assert keys.get("read_only") is True or keys.get("mode") == "ro"
        # metrics on the node's own bridge address (Prometheus' network), not 0.0.0.0
        assert env["AMCAST_METRICS__ADDRESS"] == s["networks"]["amcast"]["ipv4_address"]
        assert not s.get("ports")
    dockerfile = (REPO / "Dockerfile").read_text()
    assert "0.0.0.0" not in dockerfile
    assert "install -d -o amcast -g amcast -m 0700 /etc/amcast/keys" in dockerfile


def test_a_broken_compose_file_is_rejected(tmp_path) -> None:  # type: ignore[no-untyped-def]
    tool = require_tool("docker-compose", "Debian package docker-compose")
    bad = tmp_path / "docker-compose.yml"
    bad.write_text((REPO / "docker-compose.yml").read_text().replace("stop_signal: SIGTERM",
                                                                   "stop_signall: SIGTERM"))
    result = subprocess.run([tool, "-f", str(bad), "config", "-q"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0 and "stop_signall" in result.stderr


def test_dockerfile_is_multi_stage_non_root_with_a_socket_healthcheck() -> None:
    text = (REPO / "Dockerfile").read_text()
    assert re.search(r"^ARG BASE_IMAGE=python:3\.11-slim$", text, re.M)
    stages = re.findall(r"^FROM \$\{BASE_IMAGE\} AS (\w+)", text, re.M)
    assert stages == ["build", "amcastd"]
    # the analytics wheels come after the daemon's stage: building it does not need them;
    # the native data path is built on the Rust project's image, and the daemon's image
    # with it installed (the default target) has no compiler
    assert re.search(r"^ARG RUST_IMAGE=rust:1-bookworm$", text, re.M)
    # (Docker's classic builder builds every stage before the target: the analytics
    # stages, which need PyPI and a Debian mirror, come last)
    assert re.findall(r"^FROM (\S+) AS ([\w-]+)", text, re.M)[2:] == [
        ("${RUST_IMAGE}", "build-native"), ("amcastd", "amcastd-native"),
        ("build", "build-analytics"), ("amcastd", "analytics")]
    native_stage = text.split("FROM amcastd AS amcastd-native")[1].split("FROM build AS")[0]
    assert "--from=build-native" in native_stage and "cargo" not in native_stage
    assert 'native.core_name() == "native"' in native_stage  # the extension loads
    assert native_stage.rstrip().splitlines()[-1] == "USER amcast"
    build_native = text.split("AS build-native")[1].split("FROM ")[0]
    assert "maturin build --release --locked -m native/Cargo.toml" in build_native
    daemon_stage = text.split("FROM ${BASE_IMAGE} AS amcastd")[1].split("FROM ${RUST_IMAGE}")[0]
    assert re.search(r"^USER amcast$", daemon_stage, re.M)
    assert re.search(r"^EXPOSE 9464$", daemon_stage, re.M)
    health = re.search(r"^HEALTHCHECK .*\n\s+CMD (.*)$", daemon_stage, re.M)
    assert health and "--health" in health.group(1) and "status" in health.group(1)
    assert "-r requirements.lock" in text and "--no-index" in text


def test_the_locks_pin_every_runtime_dependency() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]

    def pins(name: str) -> dict[str, str]:
        lines = (REPO / name).read_text().splitlines()
        pairs = (ln.split("==") for ln in lines if ln and not ln.startswith("#"))
        return {re.sub(r"[-_.]+", "-", k).lower(): v for k, v in pairs}

    def names(reqs: list[str]) -> set[str]:
        return {re.sub(r"[-_.]+", "-", re.split(r"[<>=!~\[; ]", r)[0]).lower() for r in reqs}

    runtime = pins("requirements.lock")
    assert names(project["dependencies"]) <= set(runtime)
    analytics = pins("requirements-analytics.lock")
    assert names(project["dependencies"] + project["optional-dependencies"]["analytics"]) <= set(
        analytics)
    assert all(re.fullmatch(r"[\w.+!-]+", v) for v in {**runtime, **analytics}.values())
