"""The Prometheus endpoint, served from the daemon's event loop with bounded cost.

Theory of operation: ``MetricsHttpServer.start`` binds a listening socket and accepts on
the daemon's loop (uvloop): a reader callback accepts a batch at a time, at most as many
connections as the request budget has tokens (``max_requests_per_s``, a token bucket
with bursts of one second's worth); while it is empty nothing is accepted: connections
wait in the kernel's backlog at no cost to the daemon
(``amcast_metrics_accept_pauses_total``). No thread per connection. An accepted
connection past ``max_connections`` open ones (a TLS handshake in progress counts) is
closed before anything is read (``refused{reason="max_connections"}``); otherwise one
task serves it:

1. with TLS, the handshake, done by the loop as the socket is attached to its streams
   (``loop.connect_accepted_socket(ssl=...)``: ``StreamWriter.start_tls`` would lose a
   ClientHello already read, uvloop issue 707); a failure is counted ``tls_handshake``;
2. the request head, parsed by ``h11`` (never by hand) with ``max_header_bytes`` as its
   limit (431, or 400 for a malformed head, both counted by code). The handshake and the
   head together must arrive within ``header_timeout_s`` of the connection (or of the
   previous response, for keep-alive): a slow or silent client (slowloris, half-open
   connections) is cut off and counted ``header_timeout``; a keep-alive connection that
   simply sends nothing more is closed quietly;
3. the answer: each request takes a token of the budget, 429 without one; then, with
   basic auth, credentials (401 with ``WWW-Authenticate``, before any path or method is
   looked at); then only
   ``GET /metrics`` (405 for another method, 404 for another path, 400 for a request
   with a body). Every answer is counted by code; any answer but 200 closes the
   connection;
4. the response is written and drained within ``header_timeout_s`` (a client that does
   not read is cut off: ``write_timeout``).

Rendering (``generate_latest``, or OpenMetrics when ``Accept`` asks for it, through
prometheus-client's ``choose_encoder``) runs on the loop, so the collectors read the
daemon's state where it lives; at most one render per format per ``render_interval_s``:
scrapes in between get the cached bytes, so a scrape storm costs one render per interval.
``amcast_metrics_renders_total`` counts renders.

Basic auth: a credential that verified before is recognised on the loop from a keyed
digest (``BasicAuth.cached``); any other goes to bcrypt on one worker thread, created
with the server only when auth is configured, one check at a time (at most
``max_connections`` wait, each holding its connection's slot).

Memory is bounded by ``max_connections`` x (``max_header_bytes`` + one response); the
threads by one (the bcrypt worker).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import errno
import socket
import ssl
import time
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

import h11
import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.exposition import choose_encoder

from ..protocols.errors import ConfigurationError
from .metrics_access import BasicAuth, MetricsAccess, parse_basic

log = structlog.get_logger("amcastd")

REFUSAL_REASONS = (
    "accept_error",
    "max_connections",
    "header_timeout",
    "tls_handshake",
    "write_timeout",
)
RESPONSE_CODES = ("200", "400", "401", "404", "405", "429", "431")
METRICS_PATH = b"/metrics"
READ_CHUNK = 4096
BACKLOG = 128
ACCEPT_RETRY_S = 0.1
ACCEPT_BATCH = 64
MIN_PAUSE_S = 0.001
REALM = b'Basic realm="amcast metrics", charset="UTF-8"'


def listening_socket(address: str, port: int) -> socket.socket:
    """A listening TCP socket (``SO_REUSEADDR``), resolved and bound here: asyncio's own
    resolution would start libuv's resolver threads (four) for the daemon's lifetime.
    ``ConfigurationError`` naming the address, the port and the errno when it cannot be
    had (the daemon's one line at start-up; ``amcastd --check`` says the same)."""
    try:
        family, kind, proto, _, sockaddr = socket.getaddrinfo(
            address, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        raise ConfigurationError(f"metrics.address {address!r}: {exc.strerror}") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(sockaddr)
        except OSError as exc:
            name = errno.errorcode.get(exc.errno or 0, str(exc.errno))
            raise ConfigurationError(
                f"metrics endpoint {address}:{port} cannot be bound ({name}: {exc.strerror}):"
                " choose another metrics.port (0 picks a free one) or metrics.address"
            ) from None
        sock.listen(BACKLOG)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


class _Refused(Exception):
    """The connection is cut off for ``reason`` (one of ``REFUSAL_REASONS``)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _Closed(Exception):
    """The client closed, or an idle keep-alive connection ended: nothing to count."""


class EndpointMetrics:
    """The endpoint's own counters, on the registry it serves."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.refused = Counter(
            "amcast_metrics_connections_refused",
            "metrics endpoint connections closed by the daemon before a response, by reason "
            "(accept_error, max_connections, header_timeout, tls_handshake, write_timeout)",
            labelnames=["reason"],
            registry=registry,
        )
        self.requests = Counter(
            "amcast_metrics_requests",
            "metrics endpoint requests answered, by status code",
            labelnames=["code"],
            registry=registry,
        )
        self.accept_pauses = Counter(
            "amcast_metrics_accept_pauses",
            "times the endpoint stopped accepting until its request budget "
            "(metrics.max_requests_per_s) had a token again",
            registry=registry,
        )
        self.renders = Counter(
            "amcast_metrics_renders",
            "expositions rendered (scrapes within metrics.render_interval_s share one)",
            registry=registry,
        )
        self.connections = Gauge(
            "amcast_metrics_connections", "metrics endpoint connections open now", registry=registry
        )
        for reason in REFUSAL_REASONS:
            self.refused.labels(reason)
        for code in RESPONSE_CODES:
            self.requests.labels(code)


class RequestBudget:
    """A token bucket: ``rate`` requests a second on average, bursts of ``max(1, rate)``."""

    def __init__(self, rate: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._rate = rate
        self._burst = max(1.0, rate)
        self._clock = clock
        self._tokens = self._burst
        self._at = clock()

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self._burst, self._tokens + (now - self._at) * self._rate)
        self._at = now

    def tokens(self) -> float:
        """Tokens now (nothing is taken)."""
        self._refill()
        return self._tokens

    def wait_s(self) -> float:
        """Seconds until a token is due (0 when one is there)."""
        self._refill()
        return max(0.0, (1.0 - self._tokens) / self._rate)

    def take(self) -> bool:
        """Take one request's token; False when there is none."""
        self._refill()
        if self._tokens < 1.0:
            return False
        self._tokens -= 1.0
        return True


class RenderCache:
    """One exposition per content type, rendered at most once per ``interval`` seconds."""

    def __init__(
        self,
        registry: CollectorRegistry,
        interval: float,
        renders: Counter,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._registry = registry
        self._interval = interval
        self._renders = renders
        self._clock = clock
        self._cache: dict[str, tuple[float, bytes]] = {}

    def exposition(self, accept: str) -> tuple[bytes, str]:
        """The body and its content type for an ``Accept`` header value."""
        encoder, content_type = choose_encoder(accept)
        now = self._clock()
        hit = self._cache.get(content_type)
        if hit is not None and now - hit[0] < self._interval:
            return hit[1], content_type
        self._renders.inc()  # before rendering: the render reports itself
        body = encoder(self._registry)
        self._cache[content_type] = (now, body)
        return body, content_type


class MetricsHttpServer:
    """``GET /metrics`` over HTTP/1.1 (optionally TLS and basic auth) on the running loop."""

    def __init__(
        self,
        registry: CollectorRegistry,
        section: Any,
        access: MetricsAccess,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.section = section
        self.access = access
        self.counters = EndpointMetrics(registry)
        self.cache = RenderCache(registry, section.render_interval_s, self.counters.renders, clock)
        self.budget = RequestBudget(section.max_requests_per_s, clock)
        self._listener: socket.socket | None = None
        self._resume: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._auth_pool: concurrent.futures.ThreadPoolExecutor | None = None

    @property
    def open_connections(self) -> int:
        return len(self._tasks)

    def connection_tasks(self) -> tuple[asyncio.Task[None], ...]:
        """The tasks serving the open connections (each ends when its connection does)."""
        return tuple(self._tasks)

    async def start(self) -> int:
        """Listen on ``section.address:section.port``; the bound port (0 picks one)."""
        s = self.section
        if self.access.auth is not None:
            self._auth_pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="amcast-metrics-auth"
            )
            if self.access.tls is None:
                log.warning(
                    "metrics basic auth without TLS: passwords cross the network in "
                    "clear text (set metrics.tls_cert_file and tls_key_file)"
                )
        self._listener = listening_socket(s.address, s.port)
        asyncio.get_running_loop().add_reader(self._listener, self._on_readable)
        return int(self._listener.getsockname()[1])

    def close(self) -> None:
        """Stop listening and cut every connection (their tasks end on the next turn)."""
        if self._resume is not None:
            self._resume.cancel()
            self._resume = None
        if self._listener is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed already
                asyncio.get_event_loop().remove_reader(self._listener)
            self._listener.close()
            self._listener = None
        for task in list(self._tasks):
            task.cancel()
        if self._auth_pool is not None:
            self._auth_pool.shutdown(wait=False, cancel_futures=True)
            self._auth_pool = None

    # ---- connections ---------------------------------------------------------------
    def _on_readable(self) -> None:
        """The listening socket is readable: accept what is pending, at most as many as
        the request budget has tokens (and ``ACCEPT_BATCH``), so a flood of connections
        cannot hold the loop. While the budget is empty nothing is accepted: connections
        wait in the kernel's backlog and cost the daemon nothing (counted in
        ``accept_pauses``); the tokens are taken by the requests."""
        listener = self._listener
        if listener is None:
            return
        tokens = self.budget.tokens()
        if tokens < 1:
            self.counters.accept_pauses.inc()
            self._pause_accepting(self.budget.wait_s())
            return
        for _ in range(min(ACCEPT_BATCH, int(tokens))):
            try:
                conn, _ = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # out of descriptors or buffers: count, pause, go on
                self.counters.refused.labels("accept_error").inc()
                log.warning("metrics endpoint cannot accept", error=str(exc))
                self._pause_accepting(ACCEPT_RETRY_S)
                return
            self._admit(conn)

    def _pause_accepting(self, seconds: float) -> None:
        loop = asyncio.get_running_loop()
        assert self._listener is not None
        loop.remove_reader(self._listener)
        self._resume = loop.call_later(max(seconds, MIN_PAUSE_S), self._resume_accepting)

    def _resume_accepting(self) -> None:
        self._resume = None
        if self._listener is not None:
            asyncio.get_running_loop().add_reader(self._listener, self._on_readable)

    def _admit(self, conn: socket.socket) -> None:
        """Serve ``conn``, or close it at once (counted) when every slot is taken."""
        if len(self._tasks) >= self.section.max_connections:
            self.counters.refused.labels("max_connections").inc()
            conn.close()
            return
        conn.setblocking(False)
        task = asyncio.get_running_loop().create_task(self._serve(conn))
        self._tasks.add(task)
        self.counters.connections.set(len(self._tasks))
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self.counters.connections.set(len(self._tasks))

    async def _open(
        self, conn: socket.socket, deadline: float
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """Streams over ``conn``, after the TLS handshake when configured (the loop does
        it as the socket is attached, so no byte of the handshake can be misread)."""
        loop = asyncio.get_running_loop()
        tls = self.access.tls
        reader = asyncio.StreamReader(limit=self.section.max_header_bytes, loop=loop)
        protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
        try:
            async with asyncio.timeout_at(deadline):
                transport, _ = await loop.connect_accepted_socket(
                    lambda: protocol,
                    conn,
                    ssl=tls,
                    ssl_handshake_timeout=None if tls is None else self.section.header_timeout_s,
                )
        except TimeoutError:
            conn.close()
            raise _Refused("header_timeout") from None
        except (ssl.SSLError, ConnectionError, OSError):
            conn.close()
            raise _Refused("tls_handshake") from None
        return reader, asyncio.StreamWriter(transport, protocol, reader, loop)

    async def _serve(self, conn: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        timeout = self.section.header_timeout_s
        deadline = loop.time() + timeout
        try:
            reader, writer = await self._open(conn, deadline)
        except _Refused as exc:
            self.counters.refused.labels(exc.reason).inc()
            return
        clean = False
        try:
            conn_h11 = h11.Connection(
                h11.SERVER, max_incomplete_event_size=self.section.max_header_bytes
            )
            served = 0
            while True:
                request = await self._read_head(conn_h11, reader, deadline, fresh=served == 0)
                if request is None:
                    clean = True
                    return
                status, headers, body = await self._answer(request)
                self.counters.requests.labels(str(status)).inc()
                if status != 200:
                    headers.append((b"Connection", b"close"))
                await self._send(
                    conn_h11, writer, status, headers, body, head=request.method == b"HEAD"
                )
                served += 1
                if status != 200 or conn_h11.our_state is not h11.DONE:
                    clean = True
                    return
                if not isinstance(conn_h11.next_event(), h11.EndOfMessage):
                    return  # a body we did not ask for: never reached (400 above)
                conn_h11.start_next_cycle()
                deadline = loop.time() + timeout
        except _Refused as exc:
            self.counters.refused.labels(exc.reason).inc()
        except h11.RemoteProtocolError as exc:
            await self._bad_request(writer, exc.error_status_hint)
            clean = True
        except (_Closed, ConnectionError, OSError, h11.LocalProtocolError):
            pass
        finally:
            if clean:
                writer.close()
            else:
                writer.transport.abort()

    async def _read_head(
        self, conn: h11.Connection, reader: asyncio.StreamReader, deadline: float, *, fresh: bool
    ) -> h11.Request | None:
        """The next request head; None at a clean end (EOF, or a keep-alive connection
        idle past the deadline with nothing of a next request received). A head larger
        than ``max_header_bytes`` is refused whether it came in pieces (h11 stops
        buffering past the limit) or at once (measured here)."""
        limit = self.section.max_header_bytes
        fed = len(conn.trailing_data[0])  # pipelined bytes of this request, if any
        received = fed > 0
        try:
            async with asyncio.timeout_at(deadline):
                while True:
                    event = conn.next_event()
                    if event is h11.NEED_DATA:
                        data = await reader.read(READ_CHUNK)
                        received = received or bool(data)
                        fed += len(data)
                        conn.receive_data(data)
                    elif isinstance(event, h11.Request):
                        if fed - len(conn.trailing_data[0]) > limit:
                            raise h11.RemoteProtocolError(
                                "request head too large", error_status_hint=431
                            )
                        return event
                    elif isinstance(event, h11.ConnectionClosed):
                        return None
                    else:
                        raise _Closed
        except TimeoutError:
            if not fresh and not received:
                return None
            raise _Refused("header_timeout") from None

    async def _send(
        self,
        conn: h11.Connection,
        writer: asyncio.StreamWriter,
        status: int,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
        *,
        head: bool = False,
    ) -> None:
        """Write the response (only its head for a HEAD request) and drain it in time."""
        headers.append((b"Content-Length", str(len(body)).encode()))
        writer.transport.set_write_buffer_limits(high=0)  # drain() = all handed to the kernel
        writer.write(
            conn.send(
                h11.Response(
                    status_code=status, headers=headers, reason=HTTPStatus(status).phrase.encode()
                )
            )
            + conn.send(h11.Data(data=b"" if head else body))
            + conn.send(h11.EndOfMessage())
        )
        try:
            async with asyncio.timeout(self.section.header_timeout_s):
                await writer.drain()
        except TimeoutError:
            raise _Refused("write_timeout") from None

    async def _bad_request(self, writer: asyncio.StreamWriter, status: int) -> None:
        """A head h11 refused (431 too large, 400 malformed): a minimal answer, then close.
        h11's own state is an error state now, so the bytes are written directly."""
        status = status if status in (400, 431) else 400
        self.counters.requests.labels(str(status)).inc()
        reason = b"Request Header Fields Too Large" if status == 431 else b"Bad Request"
        writer.write(
            b"HTTP/1.1 %d %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n" % (status, reason)
        )
        with contextlib.suppress(TimeoutError, ConnectionError, OSError):
            async with asyncio.timeout(self.section.header_timeout_s):
                await writer.drain()

    # ---- requests ------------------------------------------------------------------
    async def _answer(self, request: h11.Request) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """Status, headers and body for ``request``."""
        if not self.budget.take():
            return 429, [(b"Retry-After", b"1")], b"Too Many Requests\n"
        headers = {name.lower(): value for name, value in request.headers}
        auth = self.access.auth
        if auth is not None and not await self._authorized(auth, headers.get(b"authorization")):
            return 401, [(b"WWW-Authenticate", REALM)], b"Unauthorized\n"
        if request.method != b"GET":
            return 405, [(b"Allow", b"GET")], b"Method Not Allowed\n"
        path = request.target.split(b"?", 1)[0]
        if path != METRICS_PATH:
            return 404, [], b"Not Found: the metrics are at /metrics\n"
        if b"transfer-encoding" in headers or headers.get(b"content-length", b"0") != b"0":
            return 400, [], b"Bad Request: GET /metrics takes no body\n"
        accept = headers.get(b"accept", b"").decode("latin-1")
        body, content_type = self.cache.exposition(accept)
        return 200, [(b"Content-Type", content_type.encode())], body

    async def _authorized(self, auth: BasicAuth, header: bytes | None) -> bool:
        creds = parse_basic(header)
        if creds is None:
            return False
        if auth.cached(creds):
            return True
        assert self._auth_pool is not None
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._auth_pool, auth.verify, creds)
