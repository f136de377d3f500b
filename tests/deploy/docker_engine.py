"""A private Docker engine for the container tests (``make container-test``).

The engine (dockerd, from Debian's docker.io) runs inside a network namespace this
module creates and is entered with ``nsenter --net`` (``ip netns exec`` would remount
/sys): its bridges, iptables rules and published ports stay in that namespace, and
nothing reaches the host's network. Docker Hub and PyPI cannot be reached from there, so
the images are built from local material only:

- the base image ``amcast-base:bookworm`` is bootstrapped with debootstrap
  (``deploy/container/base-image.sh``);
- the Python dependencies come from a local wheel cache
  (``deploy/container/wheelhouse.sh``) served over HTTP on the namespace's loopback,
  and the build runs with ``--network host`` (the namespace's host) to reach it; the
  cache holds the native data path's wheel too, built on this host by maturin (the
  Rust project's image cannot be pulled), which the ``build-native`` stage takes as it
  is (``NATIVE_PREBUILT``);
- the compose file's Prometheus is replaced by ``amcast-prometheus:local``: Debian's
  prometheus binary (the one ``make deploy-tools`` installs for promtool) on the base.

The engine's data root (``AMCAST_DOCKER_ROOT``, default /var/lib/amcast-container-test)
is kept between runs, so later runs reuse the base image and the build cache; a lock
file keeps two runs from sharing it at once.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.parse
from collections.abc import Sequence
from pathlib import Path

from tests.deploy.conftest import REPO
from tests.deploy.netns import ip

BASE_IMAGE = "amcast-base:bookworm"
PROMETHEUS_IMAGE = "amcast-prometheus:local"
WHEEL_PORT = 8765
TOOLS = {
    "dockerd": "Debian package docker.io",
    "docker": "Debian package docker.io",
    "docker-compose": "Debian package docker-compose",
    "debootstrap": "Debian package debootstrap",
    "nsenter": "Debian package util-linux",
    "prometheus": "Debian package prometheus",
    "ip": "Debian package iproute2",
}


def missing_tools() -> list[str]:
    return [f"{tool} ({where})" for tool, where in TOOLS.items() if shutil.which(tool) is None]


def progress(text: str) -> None:
    print(f"[container-test {time.strftime('%H:%M:%S')}] {text}", flush=True)


class DockerEngine:
    """dockerd in a fresh network namespace; ``run``/``docker``/``compose`` talk to it."""

    def __init__(self, tag: str, data_root: Path) -> None:
        self.netns = f"amcct{tag}"
        self.data_root = data_root
        self.tmp = Path(tempfile.mkdtemp(prefix="amcct-", dir="/tmp"))
        self.socket = self.tmp / "docker.sock"
        self.env = {**os.environ, "DOCKER_HOST": f"unix://{self.socket}",
                    "DOCKER_BUILDKIT": "0", "COMPOSE_DOCKER_CLI_BUILD": "0"}
        self._lock: int | None = None
        self._dockerd: subprocess.Popen[bytes] | None = None
        self._wheels: subprocess.Popen[bytes] | None = None

    # -- life --------------------------------------------------------------------------

    def start(self, timeout: float = 60.0) -> None:
        self.data_root.mkdir(parents=True, exist_ok=True)
        self._lock = os.open(self.data_root.parent / f".{self.data_root.name}.lock",
                             os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RuntimeError(f"another container test holds {self.data_root}") from None
        ip("netns", "add", self.netns)
        ip("-n", self.netns, "link", "set", "lo", "up")
        log = (self.tmp / "dockerd.log").open("wb")
        self._dockerd = subprocess.Popen(
            [*self.in_netns(), "dockerd", "--data-root", str(self.data_root),
             "--exec-root", str(self.tmp / "exec"), "--pidfile", str(self.tmp / "dockerd.pid"),
             "--host", f"unix://{self.socket}"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while True:
            if self._dockerd.poll() is not None:
                raise RuntimeError(f"dockerd exited: {self.log_tail()}")
            probe = self.docker("version", "--format", "{{.Server.Version}}", check=False)
            if probe.returncode == 0:
                progress(f"dockerd {probe.stdout.strip()} up in namespace {self.netns}")
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"dockerd did not answer in {timeout:.0f} s: "
                                   f"{self.log_tail()}")
            time.sleep(0.5)

    def stop(self) -> None:
        if self._wheels is not None:
            self._wheels.terminate()
            self._wheels.wait(10)
        if self._dockerd is not None and self._dockerd.poll() is None:
            os.killpg(self._dockerd.pid, signal.SIGTERM)
            try:
                self._dockerd.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self._dockerd.pid, signal.SIGKILL)
                self._dockerd.wait(10)
        ip("netns", "del", self.netns, check=False)
        if self._lock is not None:
            os.close(self._lock)
        for mountpoint in self._mounts_below(self.tmp):  # dockerd's netns handle
            subprocess.run(["umount", mountpoint], capture_output=True, check=False)
        shutil.rmtree(self.tmp, ignore_errors=True)

    @staticmethod
    def _mounts_below(directory: Path) -> list[str]:
        prefix = f"{directory}/"
        with open("/proc/self/mounts") as mounts:
            points = [line.split()[1] for line in mounts]
        return sorted((p for p in points if p.startswith(prefix)), key=len, reverse=True)

    def log_tail(self, lines: int = 15) -> str:
        text = (self.tmp / "dockerd.log").read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    # -- commands ----------------------------------------------------------------------

    def in_netns(self) -> list[str]:
        return ["nsenter", f"--net=/run/netns/{self.netns}"]

    def run(self, argv: Sequence[str], *, timeout: float = 600, check: bool = True,
            cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(list(argv), cwd=cwd, env=self.env, capture_output=True,
                              text=True, timeout=timeout, check=False)
        if check and done.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} exited {done.returncode}:\n"
                                 f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        return done

    def docker(self, *args: str, timeout: float = 600,
               check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.run(["docker", *args], timeout=timeout, check=check)

    def http_get(self, url: str, timeout: float = 10) -> str:
        """GET ``url`` from inside the namespace (where published ports listen)."""
        code = ("import sys, urllib.request; "
                "sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())")
        return self.run([*self.in_netns(), "python3", "-c", code, url],
                        timeout=timeout).stdout

    # -- images ------------------------------------------------------------------------

    def build_images(self, wheelhouse: Path) -> None:
        started = time.monotonic()
        progress(f"base image {BASE_IMAGE} (debootstrap on the first run, then cached)")
        self.run(["sh", "deploy/container/base-image.sh", BASE_IMAGE], timeout=900)
        progress("wheel cache from requirements.lock")
        self.run(["sh", "deploy/container/wheelhouse.sh", str(wheelhouse)], timeout=600)
        self._wheels = subprocess.Popen(
            [*self.in_netns(), "python3", "-m", "http.server", str(WHEEL_PORT),
             "--bind", "127.0.0.1", "--directory", str(wheelhouse)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wheel_url = f"http://127.0.0.1:{WHEEL_PORT}/"
        deadline = time.monotonic() + 20
        while True:
            try:
                self.http_get(wheel_url)
                break
            except AssertionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        progress("docker build --target amcastd-native -t amcast:latest")
        self.docker("build", "--network", "host", "--build-arg", f"BASE_IMAGE={BASE_IMAGE}",
                    "--build-arg", f"RUST_IMAGE={BASE_IMAGE}",
                    "--build-arg", "NATIVE_PREBUILT=1",
                    "--build-arg", f"PIP_OPTS=--no-index --find-links {wheel_url}",
                    "--target", "amcastd-native", "-t", "amcast:latest", ".", timeout=900)
        progress(f"{PROMETHEUS_IMAGE}: Debian's prometheus on the base image")
        context = self.tmp / "prometheus"
        context.mkdir()
        shutil.copy2(shutil.which("prometheus") or "prometheus", context / "prometheus")
        (context / "Dockerfile").write_text(
            f"FROM {BASE_IMAGE}\n"
            "COPY prometheus /bin/prometheus\n"
            # Debian's build keeps its data in /var/lib/prometheus/metrics2 by default
            "RUN install -d -o nobody -g nogroup /var/lib/prometheus/metrics2\n"
            "USER nobody\n"
            "WORKDIR /var/lib/prometheus\n"
            "EXPOSE 9090\n"
            'ENTRYPOINT ["/bin/prometheus"]\n'
            'CMD ["--config.file=/etc/prometheus/prometheus.yml"]\n')
        self.run(["docker", "build", "-t", PROMETHEUS_IMAGE, str(context)], timeout=300)
        progress(f"images built in {time.monotonic() - started:.0f} s")

    # -- compose -----------------------------------------------------------------------

    def compose(self, project: str, files: Sequence[str], *args: str,
                timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess[str]:
        argv = ["docker-compose", "-p", project]
        for name in files:
            argv += ["-f", name]
        return self.run([*argv, *args], timeout=timeout, check=check)


def query_prometheus(engine: DockerEngine, expr: str) -> list[dict]:
    import json

    url = "http://127.0.0.1:9090/api/v1/query?query=" + urllib.parse.quote(expr)
    answer = json.loads(engine.http_get(url))
    assert answer["status"] == "success", answer
    return answer["data"]["result"]
