"""The metrics endpoint (item 8): bounded connections, header timeout and size, methods
and paths, the render cache, TLS and basic auth, and start-up refusals.

Most tests run ``MetricsHttpServer`` alone on the test's loop with a registry whose
collector counts its calls; the last ones run a real in-process daemon. Every wait is on
a socket read or a task with a bounded timeout; the header timeouts are short real
timeouts (a slowloris client sends nothing more, so nothing else could end the wait).
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import os
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import bcrypt
import pytest
from amcast.daemon.config import DaemonConfig, MetricsSection
from amcast.daemon.metrics_access import MetricsAccess, load_access
from amcast.daemon.metrics_http import MetricsHttpServer
from amcast.protocols.errors import ConfigurationError
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from amcast.localcluster import LocalCluster

WAIT_S = 10.0
PASSWORD = "s3cret"


class CountingCollector(Collector):
    def __init__(self) -> None:
        self.calls = 0

    def collect(self) -> Iterator[Metric]:
        self.calls += 1
        yield GaugeMetricFamily("test_collections", "times collected", value=self.calls)


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    value = registry.get_sample_value(name, labels)
    assert value is not None, f"{name}{labels} not exported"
    return value


async def serving(
    access: MetricsAccess | None = None, clock: Any = None, **settings: Any
) -> tuple[MetricsHttpServer, CollectorRegistry, CountingCollector, int]:
    registry = CollectorRegistry(auto_describe=False)
    collector = CountingCollector()
    registry.register(collector)
    section = MetricsSection(port=0, **settings)
    extra = {} if clock is None else {"clock": clock}
    server = MetricsHttpServer(registry, section, access or MetricsAccess(), **extra)
    port = await server.start()
    return server, registry, collector, port


async def exchange(port: int, request: bytes) -> bytes:
    """Send ``request`` on a new connection; everything until the server closes it."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    try:
        return await asyncio.wait_for(reader.read(1 << 20), WAIT_S)
    finally:
        writer.close()


def get(path: str = "/metrics", extra: str = "") -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{extra}\r\n".encode()


async def read_response(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """One keep-alive response: (head, body)."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), WAIT_S)
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    return head, await asyncio.wait_for(reader.readexactly(length), WAIT_S)


async def closed_by_server(reader: asyncio.StreamReader) -> bool:
    try:
        return await asyncio.wait_for(reader.read(1), WAIT_S) == b""
    except ConnectionResetError:
        return True


async def test_connections_past_the_limit_are_closed_at_once_and_counted() -> None:
    server, registry, _, port = await serving(max_connections=2, render_interval_s=0)
    try:
        held = []
        for _ in range(2):  # two keep-alive scrapers hold both slots
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            head, _body = await read_response(reader)
            assert head.startswith(b"HTTP/1.1 200 ")
            held.append((reader, writer))
        assert server.open_connections == 2
        for _ in range(3):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(get())
            assert await closed_by_server(reader)
            writer.close()
        assert (
            sample(registry, "amcast_metrics_connections_refused_total", reason="max_connections")
            == 3
        )
        assert server.open_connections == 2
        # a slot freed is a slot served again
        tasks = server.connection_tasks()
        held[0][1].close()
        await asyncio.wait_for(asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED), WAIT_S)
        assert (await exchange(port, get())).startswith(b"HTTP/1.1 200 ")
        assert sample(registry, "amcast_metrics_requests_total", code="200") == 3
        held[1][1].close()
    finally:
        server.close()


async def test_slowloris_and_silent_connections_are_cut_off_at_the_header_timeout() -> None:
    server, registry, _, port = await serving(header_timeout_s=0.3)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # and never the blank line
        assert await closed_by_server(reader)
        writer.close()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)  # says nothing
        assert await closed_by_server(reader)
        writer.close()
        assert (
            sample(registry, "amcast_metrics_connections_refused_total", reason="header_timeout")
            == 2
        )
        # a keep-alive scraper idle after its scrape is closed too, but not counted
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        head, _ = await read_response(reader)
        assert head.startswith(b"HTTP/1.1 200 ")
        assert await closed_by_server(reader)
        writer.close()
        assert (
            sample(registry, "amcast_metrics_connections_refused_total", reason="header_timeout")
            == 2
        )
        assert server.open_connections == 0
    finally:
        server.close()


async def test_oversized_heads_get_431_and_malformed_ones_400() -> None:
    server, registry, _, port = await serving(max_header_bytes=1024)
    try:
        pad = "X-Pad: " + "a" * 2000 + "\r\n"
        at_once = await exchange(port, get(extra=pad))  # whole head in one read
        assert at_once.startswith(b"HTTP/1.1 431 ")
        endless = await exchange(port, b"GET /metrics HTTP/1.1\r\n" + b"X-Pad: a\r\n" * 400)
        assert endless.startswith(b"HTTP/1.1 431 ")  # never a blank line: not buffered on
        garbage = await exchange(port, b"\x16\x03\x01 this is not http\r\n\r\n")
        assert garbage.startswith(b"HTTP/1.1 400 ")
        assert sample(registry, "amcast_metrics_requests_total", code="431") == 2
        assert sample(registry, "amcast_metrics_requests_total", code="400") == 1
        fits = await exchange(port, get(extra="X-Pad: " + "a" * 500 + "\r\n"))
        assert fits.startswith(b"HTTP/1.1 200 ")
    finally:
        server.close()


async def test_only_get_metrics_is_served() -> None:
    server, registry, _, port = await serving()
    try:
        post = await exchange(
            port, b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi"
        )
        assert post.startswith(b"HTTP/1.1 405 ") and b"\r\nallow: get\r\n" in post.lower()
        head = await exchange(port, b"HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 405 ")
        assert (await exchange(port, get("/"))).startswith(b"HTTP/1.1 404 ")
        assert (await exchange(port, get("/metricsx"))).startswith(b"HTTP/1.1 404 ")
        body = await exchange(port, get(extra="Content-Length: 3\r\n") + b"abc")
        assert body.startswith(b"HTTP/1.1 400 ")
        ok = await exchange(port, get("/metrics?name[]=x"))
        assert ok.startswith(b"HTTP/1.1 200 ") and b"test_collections" in ok
        for code, n in (("405", 2), ("404", 2), ("400", 1), ("200", 1)):
            assert sample(registry, "amcast_metrics_requests_total", code=code) == n
    finally:
        server.close()


async def test_scrapes_within_the_render_interval_share_one_render() -> None:
    now = [100.0]
    server, registry, collector, port = await serving(render_interval_s=1.0, clock=lambda: now[0])
    try:
        first = await exchange(port, get())
        second = await exchange(port, get())
        assert collector.calls == 1
        assert first.split(b"\r\n\r\n", 1)[1] == second.split(b"\r\n\r\n", 1)[1]
        now[0] += 0.999
        await exchange(port, get())
        assert collector.calls == 1
        now[0] += 0.001  # the interval is over: the next scrape renders again
        third = await exchange(port, get())
        assert collector.calls == 2 and b"test_collections 2.0" in third
        # OpenMetrics when asked: its own render and cache entry
        openmetrics = "Accept: application/openmetrics-text; version=1.0.0\r\n"
        om = await exchange(port, get(extra=openmetrics))
        assert b"content-type: application/openmetrics-text" in om.lower()
        assert om.rstrip().endswith(b"# EOF") and collector.calls == 3
        await exchange(port, get(extra=openmetrics))
        assert collector.calls == 3
        assert sample(registry, "amcast_metrics_renders_total") == 3  # (this reads it directly)
    finally:
        server.close()


async def test_past_the_request_budget_requests_get_429_and_accepting_waits() -> None:
    now = [50.0]
    server, registry, _, port = await serving(max_requests_per_s=2, clock=lambda: now[0])
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for _ in range(2):  # the burst: one second's worth (the first paid at accept)
            writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            head, _ = await read_response(reader)
            assert head.startswith(b"HTTP/1.1 200 ")
        # none left: a request on an open connection gets 429 ...
        writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        head, _ = await read_response(reader)
        assert head.startswith(b"HTTP/1.1 429 ") and b"Retry-After: 1" in head
        assert await closed_by_server(reader)
        writer.close()
        # ... and a new connection is not even accepted: it waits in the backlog
        reader2, writer2 = await asyncio.open_connection("127.0.0.1", port)
        writer2.write(get())
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(reader2.read(1), 0.3)
        now[0] += 0.5  # one token back: accepted and answered
        answer = await asyncio.wait_for(reader2.read(1 << 20), WAIT_S)
        assert answer.startswith(b"HTTP/1.1 200 ")
        writer2.close()
        assert sample(registry, "amcast_metrics_accept_pauses_total") >= 1
        assert sample(registry, "amcast_metrics_requests_total", code="429") == 1
        assert sample(registry, "amcast_metrics_requests_total", code="200") == 3
    finally:
        server.close()


# ---- TLS and basic auth ---------------------------------------------------------------


def _cert(
    name: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: tuple[x509.Certificate, Any] | None,
    *,
    ca: bool = False,
) -> x509.Certificate:
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject if issuer is None else issuer[0].subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if not ca:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False
        )
    return builder.sign(key if issuer is None else issuer[1], hashes.SHA256())


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A throwaway self-signed server certificate, a client CA and a client certificate
    it signed, and a users file (alice, bcrypt cost 4: fast)."""
    d = tmp_path_factory.mktemp("pki")
    server_key = ec.generate_private_key(ec.SECP256R1())
    (d / "server.pem").write_bytes(
        _cert("localhost", server_key, None).public_bytes(serialization.Encoding.PEM)
    )
    _write_key(d / "server.key", server_key)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert("amcast test CA", ca_key, None, ca=True)
    (d / "ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    client_key = ec.generate_private_key(ec.SECP256R1())
    (d / "client.pem").write_bytes(
        _cert("prometheus", client_key, (ca, ca_key)).public_bytes(serialization.Encoding.PEM)
    )
    _write_key(d / "client.key", client_key)
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()
    (d / "users.yml").write_text(f"basic_auth_users:\n  alice: '{hashed}'\n")
    (d / "users.yml").chmod(0o600)
    return {p.stem if p.suffix != ".key" else p.stem + "_key": p for p in d.iterdir()}


def tls_settings(pki: dict[str, Path], **more: Any) -> dict[str, Any]:
    return {
        "tls_cert_file": str(pki["server"]),
        "tls_key_file": str(pki["server_key"]),
        "basic_auth_users_file": str(pki["users"]),
        **more,
    }


def https_get(
    port: int,
    pki: dict[str, Path],
    user: str | None,
    password: str = PASSWORD,
    client_cert: bool = False,
) -> tuple[int, dict[str, str], bytes]:
    ctx = ssl.create_default_context(cafile=str(pki["server"]))
    if client_cert:
        ctx.load_cert_chain(str(pki["client"]), str(pki["client_key"]))
    req = urllib.request.Request(f"https://localhost:{port}/metrics")
    if user is not None:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        req.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=WAIT_S) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


async def test_tls_with_basic_auth_serves_good_credentials_only(pki: dict[str, Path]) -> None:
    section = MetricsSection(**tls_settings(pki))
    server, registry, _, port = await serving(load_access(section), **tls_settings(pki))
    try:
        status, _, body = await asyncio.to_thread(https_get, port, pki, "alice")
        assert status == 200 and b"test_collections" in body
        status, _, _ = await asyncio.to_thread(https_get, port, pki, "alice")  # cached check
        assert status == 200
        for user, password in (("alice", "wrong"), ("mallory", PASSWORD), (None, "")):
            status, headers, _ = await asyncio.to_thread(https_get, port, pki, user, password)
            assert status == 401
            assert headers["WWW-Authenticate"].startswith('Basic realm="amcast metrics"')
        assert sample(registry, "amcast_metrics_requests_total", code="401") == 3
        assert sample(registry, "amcast_metrics_requests_total", code="200") == 2
        # plain HTTP to the TLS port: the handshake fails, counted
        assert await exchange(port, get()) == b""
        assert (
            sample(registry, "amcast_metrics_connections_refused_total", reason="tls_handshake")
            == 1
        )
    finally:
        server.close()


async def test_mutual_tls_requires_a_client_certificate_of_the_ca(pki: dict[str, Path]) -> None:
    settings = tls_settings(pki, tls_client_ca_file=str(pki["ca"]))
    server, registry, _, port = await serving(load_access(MetricsSection(**settings)), **settings)
    try:
        status, _, _ = await asyncio.to_thread(https_get, port, pki, "alice", PASSWORD, True)
        assert status == 200
        with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
            await asyncio.to_thread(https_get, port, pki, "alice")
        tasks = server.connection_tasks()  # the refused handshake's task, if still running
        if tasks:
            await asyncio.wait_for(asyncio.wait(tasks), WAIT_S)
        assert (
            sample(registry, "amcast_metrics_connections_refused_total", reason="tls_handshake")
            == 1
        )
    finally:
        server.close()


# ---- start-up refusals ------------------------------------------------------------------


def test_unusable_tls_or_users_files_refuse_to_start(pki: dict[str, Path], tmp_path: Path) -> None:
    def refused(**settings: Any) -> str:
        with pytest.raises(ConfigurationError) as exc:
            load_access(MetricsSection(**settings))
        assert "\n" not in str(exc.value)
        return str(exc.value)

    good = tls_settings(pki)
    assert "No such file" in refused(**{**good, "tls_cert_file": str(tmp_path / "none.pem")})
    assert "metrics.tls_key_file" in refused(**{**good, "tls_key_file": str(tmp_path / "no")})
    loose_key = tmp_path / "loose.key"
    loose_key.write_bytes(pki["server_key"].read_bytes())
    loose_key.chmod(0o644)
    assert "open to others" in refused(**{**good, "tls_key_file": str(loose_key)})
    loose_key.chmod(0o660)
    assert "writable by its group" in refused(**{**good, "tls_key_file": str(loose_key)})
    loose_key.chmod(0o640)  # read through the daemon's group (a Kubernetes Secret): allowed
    assert load_access(MetricsSection(**{**good, "tls_key_file": str(loose_key)})).tls
    other_key = tmp_path / "other.key"
    _write_key(other_key, ec.generate_private_key(ec.SECP256R1()))
    assert "do not load" in refused(**{**good, "tls_key_file": str(other_key)})
    loose_users = tmp_path / "users.yml"
    loose_users.write_bytes(pki["users"].read_bytes())
    loose_users.chmod(0o604)
    assert "open to others" in refused(basic_auth_users_file=str(loose_users))
    for text, why in (
        ("basic_auth_users: [alice]\n", "at least one name"),
        ("basic_auth_users:\n  alice: plain\n", "not a bcrypt hash"),
        ("tls_server_config: {}\nbasic_auth_users: {}\n", "exactly one mapping"),
        ("basic_auth_users: {a: [\n", "not valid YAML"),
    ):
        bad = tmp_path / "bad.yml"
        bad.write_text(text)
        bad.chmod(0o600)
        assert why in refused(basic_auth_users_file=str(bad))
    unreadable = tmp_path / "dir.yml"
    unreadable.mkdir(mode=0o700)
    assert "metrics.basic_auth_users_file" in refused(basic_auth_users_file=str(unreadable))
    with pytest.raises(ValueError, match="go together"):
        MetricsSection(tls_cert_file=str(pki["server"]))


@pytest.mark.processes
def test_amcastd_refuses_a_readable_key_in_one_line(pki: dict[str, Path], tmp_path: Path) -> None:
    """``amcastd --check`` and ``amcastd`` itself: exit 2 and one line naming the key."""
    loose_key = tmp_path / "loose.key"
    loose_key.write_bytes(pki["server_key"].read_bytes())
    loose_key.chmod(0o644)
    config = tmp_path / "amcastd.toml"
    config.write_text(
        f'[node]\nstate_dir = "{tmp_path}/state"\n[api]\nsocket = "{tmp_path}/s.sock"\n'
        f'[logs]\ndir = "{tmp_path}/logs"\nformat = "json"\n[protocol]\ninsecure = true\n'
        f'[network]\ngroup = "239.255.77.{os.getpid() % 250 + 1}"\nttl = 0\n'
        f'[metrics]\nport = 0\ntls_cert_file = "{pki["server"]}"\n'
        f'tls_key_file = "{loose_key}"\n'
    )
    for extra in (["--check"], []):
        env = {k: v for k, v in os.environ.items() if not k.startswith("AMCAST_")}
        done = subprocess.run(
            [sys.executable, "-m", "amcast.daemon", *extra, "--config", str(config)],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
        assert done.returncode == 2, done.stderr
        lines = [ln for ln in (done.stdout + done.stderr).splitlines() if ln.strip()]
        assert len(lines) == 1, lines
        assert "metrics.tls_key_file" in lines[0] and "chmod 600" in lines[0]


# ---- a real daemon ----------------------------------------------------------------------


async def test_a_daemon_serves_its_metrics_over_tls_with_basic_auth(
    make_cluster: Any, pki: dict[str, Path]
) -> None:
    c = await make_cluster(1, metrics={"port": 0, **tls_settings(pki)})
    port = c.daemons[0].metrics_port
    status, headers, body = await asyncio.to_thread(https_get, port, pki, "alice")
    assert status == 200 and headers["Content-Type"].startswith("text/plain")
    assert b"amcast_primary 1.0" in body
    assert b'amcast_metrics_requests_total{code="200"}' in body
    status, _, _ = await asyncio.to_thread(https_get, port, pki, "alice", "nope")
    assert status == 401


async def test_a_daemon_refuses_to_start_with_a_readable_users_file(
    make_cluster: Any, pki: dict[str, Path], tmp_path: Path
) -> None:
    users = tmp_path / "users.yml"
    users.write_bytes(pki["users"].read_bytes())
    users.chmod(0o644)
    with pytest.raises(ConfigurationError, match="open to others"):
        await make_cluster(1, metrics={"port": 0, "basic_auth_users_file": str(users)})
    assert DaemonConfig().metrics.address == "127.0.0.1"  # the default stays this host only


@pytest.mark.processes
def test_amcastd_on_uvloop_serves_tls_with_basic_auth(pki: dict[str, Path], tmp_path: Path) -> None:
    """The same through a real ``amcastd`` process (uvloop's ``start_tls``), with a
    client certificate required."""
    settings = tls_settings(pki, tls_client_ca_file=str(pki["ca"]))
    cluster = LocalCluster(
        1, tmp_path / "c", protocol={"insecure": True}, extra={"metrics": settings}
    )
    cluster.start()
    try:
        port = cluster.nodes[0].metrics_port
        status, _, body = https_get(port, pki, "alice", PASSWORD, client_cert=True)
        assert status == 200 and b"amcast_primary 1.0" in body
        status, headers, _ = https_get(port, pki, "alice", "wrong", client_cert=True)
        assert status == 401 and "WWW-Authenticate" in headers
        with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
            https_get(port, pki, "alice")  # no client certificate
        pid = cluster.nodes[0].pid
        with open(f"/proc/{pid}/status") as fh:
            threads = next(int(ln.split()[1]) for ln in fh if ln.startswith("Threads:"))
        assert threads == 2  # the loop and the bcrypt worker, nothing per connection
    finally:
        cluster.stop()
