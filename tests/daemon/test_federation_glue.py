"""The daemon's federation glue without processes: the ``[federation]`` config, the
framings (records in the own order, messages, link datagrams), the sealed link and its
counted refusals, the ``send`` frame's ``clusters`` field, and the clients' side of it.
Real daemons: tests/e2e/test_federation_e2e.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest
from amcast.daemon.api import ApiServer, ClientConnection
from amcast.daemon.config import ApiSection, DaemonConfig, FederationSection, load_config
from amcast.daemon.federation import Federation
from amcast.daemon.fedframing import (
    decode_link,
    decode_message,
    decode_record,
    encode_link,
    encode_message,
    encode_record,
    member_config,
    member_id,
    message_id,
    node_of,
)
from amcast.daemon.fedlink import FederationLink
from amcast.protocols.errors import ClientError, ConfigurationError, DecodeError
from amcast.protocols.wire.auth import Authenticator
from amcast.protocols.wire.keys import Keyring
from daemon_helpers import Backend, FakeTransport

from amcast import socket_protocol as sp
from amcast.client.errors import MessagesRefused
from amcast.client.records import Undelivered, batch_from_frame
from amcast.client.session import Session, normalize_clusters
from amcast.localcluster import free_port

KEY = Keyring.single(bytes(range(32)))


def section(ports: dict[str, list[int]], cluster: str = "a") -> FederationSection:
    return FederationSection(cluster=cluster, clusters={
        name: {"members": [f"{i}:127.0.0.1:{p}" for i, p in enumerate(ps)]}
        for name, ps in ports.items()})


# ---------------------------------------------------------------- config

def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "amcastd.toml"
    path.write_text("[node]\nid = 1\nmembers = [0, 1]\n" + text)
    return path


def test_a_federation_section_loads_and_names_every_address(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, (
        '[federation]\ncluster = "a"\n'
        '[federation.clusters.a]\nmembers = ["0:127.0.0.1:4000", "1:[::1]:4001"]\n'
        '[federation.clusters.b]\nmembers = ["0:10.0.0.1:4000"]\n')))
    fed = cfg.federation
    assert fed.enabled and fed.cluster == "a"
    assert fed.clusters["a"].addresses() == {0: ("127.0.0.1", 4000), 1: ("::1", 4001)}
    config = member_config(fed)
    assert config.clusters == {"a": ("a.0", "a.1"), "b": ("b.0",)}
    assert not DaemonConfig().federation.enabled


@pytest.mark.parametrize(("text", "needle"), [
    ('cluster = "c"\n[federation.clusters.a]\nmembers = ["0:h:1", "1:h:2"]\n',
     "cluster 'c' is not one of clusters"),
    ('cluster = "a"\n[federation.clusters.a]\nmembers = ["0:h:1", "h:2"]\n',
     "is not 'node:host:port'"),
    ('cluster = "a"\n[federation.clusters.a]\nmembers = ["0:h:1", "1:h:1"]\n',
     "address h:1 is also"),
    ('cluster = "a"\n[federation.clusters.a]\nmembers = ["0:h:1"]\n',
     "must list exactly node.members"),
    ('cluster = "A"\n[federation.clusters.A]\nmembers = ["0:h:1", "1:h:2"]\n',
     "a cluster name is"),
    ('[federation.clusters.a]\nmembers = ["0:h:1", "1:h:2"]\n',
     "cluster (this daemon's) is not set"),
    ('cluster = "a"\n[federation.clusters.a]\nmembers = ["0:h:1", "0:h:2"]\n',
     "listed twice"),
])
def test_a_bad_federation_section_is_a_clear_error(tmp_path: Path, text: str,
                                                   needle: str) -> None:
    with pytest.raises(ConfigurationError, match=needle.replace("(", r"\(").replace(
            ")", r"\)")):
        load_config(write(tmp_path, "[federation]\n" + text))


# ---------------------------------------------------------------- framings

def test_a_record_is_recognised_in_the_order_and_nothing_else_is() -> None:
    records = [b"\x01record bytes", b"\x02another"]
    assert decode_record(encode_record(records)) == records
    assert decode_record(sp.encode_envelope(1, ["g"], [b"x"])) is None
    assert decode_record(sp.encode_gone(1, 2)) is None
    assert decode_record(msgpack.packb(("fed", "text"))) is None
    assert decode_record(msgpack.packb(("fed", []))) is None
    assert decode_record(msgpack.packb(("fed", [b"x", "y"]))) is None
    assert decode_record(msgpack.packb(("other", b"x"))) is None
    assert decode_record(b"\x92\xc1") is None  # msgpack's never-used byte
    assert decode_record(b"") is None


def test_message_framing_round_trips_and_refuses_what_is_malformed() -> None:
    data = encode_message("a", 2, 7, 1.5, b"payload")
    assert decode_message(data) == ("a", 2, 7, 1.5, b"payload")
    for bad in (b"", b"\xff", msgpack.packb([1, "a", -1, 7, 1.5, b"p"]),
                msgpack.packb([2, "a", 2, 7, 1.5, b"p"]),
                msgpack.packb([1, "a", 2, 7, "t", b"p"]),
                msgpack.packb([1, "a", 2, 7, 1.5, "p"])):
        assert decode_message(bad) is None


def test_link_body_decoding_raises_typed_errors() -> None:
    assert decode_link(encode_link("a", 1, "b", b"d")) == ("a", 1, "b", b"d")
    cases = {b"\xc1": "malformed", msgpack.packb(["x"]): "malformed",
             msgpack.packb(["amcast-fed", 9, "a", 1, "b", b"d"]): "bad_version",
             msgpack.packb(["amcast-fed", 1, "a", -1, "b", b"d"]): "malformed"}
    for body, reason in cases.items():
        with pytest.raises(DecodeError) as err:
            decode_link(body)
        assert err.value.reason == reason


def test_ids_map_between_daemon_and_protocol() -> None:
    assert member_id("east", 3) == "east.3" and node_of("east.3") == 3
    assert message_id(("east", "east.3", 17)) == "east:3:17"


# ---------------------------------------------------------------- the sealed link

@pytest.fixture
def links() -> Iterator[tuple[FederationLink, FederationLink, dict[str, list[int]]]]:
    ports = {"a": [free_port()], "b": [free_port()]}
    clock = [1_000_000.0]
    a = FederationLink(section(ports, "a"), 0, KEY, lambda: clock[0])
    b = FederationLink(section(ports, "b"), 0, KEY, lambda: clock[0])
    try:
        yield a, b, ports
    finally:
        a.close()
        b.close()


def test_the_link_seals_and_opens_and_refuses_replays(links: Any) -> None:
    a, b, _ = links
    sealed = a.seal("b", b"datagram")
    assert b"datagram" not in sealed
    assert b.open(sealed) == ("a", 0, b"datagram")
    assert "a" in b.heard
    with pytest.raises(DecodeError) as err:
        b.open(sealed)
    assert err.value.reason == "replayed"


def test_the_link_refuses_other_keys_other_clusters_and_strangers(links: Any) -> None:
    a, b, _ = links
    forged = FederationLink.__new__(FederationLink)  # no socket: only seal() is used
    forged.cluster, forged.node_id = "a", 0
    forged._wall_clock = lambda: 1_000_000.0
    forged.auth = Authenticator(Keyring.single(bytes(32)), bytes(16))  # another key
    refusals = {
        "auth_failed": forged.seal("b", b"x"),
        "wrong_cluster": a.seal("c", b"x"),
        "bad_version": b"\x09" + a.seal("b", b"x")[1:],
    }
    stranger = a.seal("b", b"x")
    a.cluster = "z"  # a sender this federation does not list
    refusals["unknown_sender"] = a.seal("b", b"x")
    a.cluster = "b"
    refusals["own_cluster"] = a.seal("b", b"x")
    for reason, data in refusals.items():
        with pytest.raises(DecodeError) as err:
            b.open(data)
        assert err.value.reason == reason, reason
    assert b.open(stranger)[0] == "a"


class Host:
    node_id = 0
    view_id = 1
    dlog = None

    def __init__(self) -> None:
        self.api = Backend()
        self.metrics: Any = None
        self.submitted: list[bytes] = []

    def now(self) -> float:
        return 100.0

    def wall_time(self) -> float:
        return 1_000_000.0

    def submit_federation(self, envelope: bytes) -> None:
        self.submitted.append(envelope)


def test_bad_remote_datagrams_are_counted_drops_never_errors() -> None:
    ports = {"a": [free_port()], "b": [free_port()]}
    fed = Federation(section(ports, "a"), 0, KEY, Host(), wall_clock=lambda: 1_000_000.0)
    try:
        fed.on_datagrams([b"", b"\x01", b"\x01\x01" + bytes(60), bytes(200)])
        assert sum(fed.remote_drops.values()) == 4
        assert fed.status()["remote_drops"] == dict(fed.remote_drops)
        assert fed.refusal("g", [b"x"], ["a", "zz"]) == "unknown_cluster"
        assert fed.refusal("g", [bytes(60_000)], ["a", "b"]) == "message_too_large"
        assert fed.refusal("g", [b"x"], ["a", "b"]) == "overloaded"  # no view yet
        fed.on_view([0], [0])  # the cluster's first view: an empty member
        assert fed.member is not None and fed.member.state is not None
        assert fed.refusal("g", [b"x"], ["a", "b"]) is None
        assert fed.multicast(5, "g", [b"x", b"y"], ["a", "b"]) is None
        (payload,) = fed.host.submitted  # type: ignore[attr-defined]
        assert len(decode_record(payload) or []) == 2  # one payload, a record each
        assert fed.in_flight()[0]["clusters"] == ["a", "b"]
    finally:
        fed.close()


def test_a_member_joining_a_running_cluster_asks_for_the_state() -> None:
    ports = {"a": [free_port(), free_port()], "b": [free_port()]}
    host = Host()
    fed = Federation(section(ports, "a"), 0, KEY, host, wall_clock=lambda: 1_000_000.0)
    try:
        fed.on_view([0, 1], [0])  # node 1 was there before: it holds the state
        assert fed.member is not None and fed.member.state is None
        assert len(host.submitted) == 1  # the state request, into the own order
    finally:
        fed.close()


# ---------------------------------------------------------------- socket protocol

def _connect() -> tuple[ClientConnection, FakeTransport, Backend]:
    backend = Backend()
    server = ApiServer(ApiSection(hello_timeout_s=60), backend)
    conn = ClientConnection(server, 1)
    transport = FakeTransport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    conn.data_received(sp.encode_frame({"t": "hello", "v": 1}))
    transport.out.clear()
    return conn, transport, backend


@pytest.mark.parametrize(("fields", "field"), [
    ({"clusters": "a"}, "clusters"), ({"clusters": []}, "clusters"),
    ({"clusters": ["a", 1]}, "clusters"), ({"clusters": [""]}, "clusters"),
    ({"clusters": ["a"], "groups": ["g", "h"]}, "groups"),
])
async def test_a_bad_clusters_field_is_refused_with_bad_field(fields: dict[str, Any],
                                                              field: str) -> None:
    conn, transport, backend = _connect()
    conn.data_received(sp.encode_frame({"t": "send", "id": 0, "groups": ["g"],
                                        "payloads": [b"x"], **fields}))
    replies = [f for f in sp.FrameDecoder().feed(bytes(transport.out)) if isinstance(f, dict)]
    assert [(r["code"], r.get("field")) for r in replies] == [("bad_field", field)]
    assert backend.sent == []


def test_unknown_cluster_is_a_refusal_code() -> None:
    assert "unknown_cluster" in sp.REFUSAL_CODES and "unknown_cluster" in sp.ERROR_CODES


# ---------------------------------------------------------------- clients

WELCOME = {"node": 0, "client": 1, "cluster": "a", "clusters": ["a", "b", "c"]}


def test_clusters_are_checked_against_the_welcome() -> None:
    assert normalize_clusters(None, WELCOME) is None
    assert normalize_clusters(["a"], WELCOME) is None  # this cluster alone: local
    assert normalize_clusters("b,a", WELCOME) == ("a", "b")
    assert normalize_clusters(("c", "c"), WELCOME) == ("c",)
    for bad, code in ((["a", "x"], "unknown_cluster"), ([], "bad_field"), ([""], "bad_field")):
        with pytest.raises(ClientError) as err:
            normalize_clusters(bad, WELCOME)
        assert err.value.code == code
    with pytest.raises(ClientError) as err:
        normalize_clusters(["a"], {"node": 0, "client": 1})  # no federation
    assert err.value.code == "unknown_cluster"


def test_a_session_frames_cross_cluster_sends_apart_from_local_ones() -> None:
    s = Session(max_unconfirmed_bytes=1 << 20)
    s.welcome = WELCOME
    s.add(b"l1", "g", "agreed")
    s.add(b"x1", "g", "agreed", ["a", "b"])
    s.add(b"x2", "g", "agreed", ["b", "a"])
    s.add(b"l2", "g", "agreed", ["a"])
    with pytest.raises(ClientError):
        s.add(b"x", ["g", "h"], "agreed", ["b"])
    frames = [f for f in sp.FrameDecoder().feed(b"".join(d for d, _ in s.take()))]
    assert [(f["payloads"], f.get("clusters")) for f in frames] == [
        ([b"l1"], None), ([b"x1", b"x2"], ["a", "b"]), ([b"l2"], None)]


def test_a_cross_cluster_deliver_frame_becomes_deliveries_with_their_clusters() -> None:
    batch = batch_from_frame({
        "t": "deliver", "sender": 2, "seq": 9, "service": "safe", "position": None,
        "view": 4, "send_ts": 1.0, "clusters": ["a", "b"], "cluster": "b", "gts": 9,
        "msg_id": "b:2:17", "batches": [[7, ["g"], 0, [b"p"]]]})
    (d,) = list(batch)
    assert (d.clusters, d.cluster, d.gts, d.message_id, d.payload) == (
        ("a", "b"), "b", 9, "b:2:17", b"p")
    local = batch_from_frame({"t": "deliver", "sender": 2, "seq": 9, "service": "agreed",
                              "position": 5, "view": 4, "send_ts": 1.0,
                              "batches": [[7, ["g"], 0, [b"p"]]]})
    assert next(iter(local)).clusters == ()


def test_a_silent_cluster_is_a_health_warning_once_the_grace_is_over() -> None:
    ports = {"a": [free_port()], "b": [free_port()], "c": [free_port()]}
    clock = [1_000_000.0]
    host = Host()
    host.wall_time = lambda: clock[0]  # type: ignore[method-assign]
    fed = Federation(section(ports, "a"), 0, KEY, host, wall_clock=lambda: clock[0])
    try:
        assert fed.warnings() == []  # just started
        clock[0] += 10
        fed.link.heard["c"] = clock[0] - 0.5
        (warning,) = fed.warnings()
        assert "cluster(s) b for" in warning
        assert fed.status()["clusters"]["c"]["reachable"] is True
        assert fed.status()["clusters"]["b"]["reachable"] is False
    finally:
        fed.close()


def test_a_refused_cross_cluster_frame_is_raised_by_the_next_send() -> None:
    s = Session(max_unconfirmed_bytes=1 << 20)
    s.welcome = WELCOME
    s.add(b"x0", "g", "agreed", ["a", "b"])
    s.add(b"x1", "g", "agreed", ["a", "b"])
    s.take()
    s.on_frame({"t": "error", "code": "overloaded", "detail": "full", "fatal": False,
                "id": 0})
    with pytest.raises(MessagesRefused) as info:
        s.add(b"next", "g", "agreed", ["a", "b"])
    assert info.value.code == "overloaded" and info.value.messages == [0, 1]
    assert s.next_seq == 2


def test_a_message_to_a_silent_cluster_is_reported_stalled() -> None:
    ports = {"a": [free_port()], "b": [free_port()]}
    clock = [100.0]
    host = Host()
    host.now = lambda: clock[0]  # type: ignore[method-assign]
    host.wall_time = lambda: 1_000_000.0 + clock[0]  # type: ignore[method-assign]
    fed = Federation(section(ports, "a"), 0, KEY, host,
                     wall_clock=lambda: 1_000_000.0 + clock[0])
    try:
        fed.on_view([0], [0])
        assert fed.multicast(1, "g", [b"x"], ["a", "b"]) is None
        fed.tick()
        assert fed.stalled == 0
        clock[0] += fed.section.stall_after_s + 1  # nobody in b answers
        fed.tick()
        assert fed.stalled == 1 and fed.metrics_sample()["stalled"] == 1
        assert any("waiting longer than" in w for w in fed.warnings())
        assert fed.status()["in_flight"] == 1
        assert fed.link.sent >= 2  # the Submit, and at least one resend
    finally:
        fed.close()


class Conn:
    """A client connection that keeps the error frames it was sent."""

    def __init__(self) -> None:
        self.failed: list[tuple[str, str, Any, dict[str, Any]]] = []

    def fail(self, code: str, detail: str, *, ref: Any = None,
             extra: dict[str, Any] | None = None) -> None:
        self.failed.append((code, detail, ref, dict(extra or {})))


def _deadline_federation(deadline_s: float) -> tuple[Federation, Conn, list[float]]:
    ports = {"a": [free_port()], "b": [free_port()]}
    clock = [100.0]
    host = Host()
    host.now = lambda: clock[0]  # type: ignore[method-assign]
    host.wall_time = lambda: 1_000_000.0 + clock[0]  # type: ignore[method-assign]
    conn = Conn()
    host.api.clients = {1: conn}  # type: ignore[attr-defined]
    sec = section(ports, "a").model_copy(update={"deadline_s": deadline_s})
    fed = Federation(sec, 0, KEY, host, wall_clock=lambda: 1_000_000.0 + clock[0])
    fed.on_view([0], [0])
    return fed, conn, clock


def test_a_message_past_its_deadline_is_reported_to_its_client_once() -> None:
    fed, conn, clock = _deadline_federation(3.0)
    try:
        assert fed.multicast(1, "g", [b"x", b"y"], ["a", "b"], ref=7) is None
        clock[0] += 1.0
        fed.tick()
        assert conn.failed == []
        clock[0] += 3.0  # nobody in b answers
        fed.tick()
        ((code, detail, ref, extra),) = conn.failed
        assert (code, ref) == ("undelivered", 7)
        # this test's order never delivers the own Submit: a waits too
        assert extra == {"first": 0, "count": 2, "outcome": "unknown", "reason": "deadline",
                         "clusters": ["a", "b"]}
        assert "outcome is unknown" in detail
        clock[0] += 10.0
        fed.tick()
        assert len(conn.failed) == 1 and fed.status()["reported_undelivered"] == 2
        assert fed.report_shutdown() == 0  # reported already: not again
        assert fed.status()["in_flight"] == 2  # still sent
    finally:
        fed.close()


def test_an_order_gap_keeps_the_messages_and_shutdown_reports_them() -> None:
    fed, conn, clock = _deadline_federation(60.0)
    try:
        assert fed.multicast(1, "g", [b"x"], ["a", "b"], ref=3) is None
        old = fed.member
        assert old is not None and old.last_id is not None
        m = old.last_id
        fed.on_gap()
        assert fed.member is None
        fed.on_view([0], [0])
        assert fed.member is not None and fed.member is not old and fed.member.owns(m)
        clock[0] += 1.0
        fed.tick()
        assert conn.failed == []
        assert fed.report_shutdown() == 1
        ((code, _, ref, extra),) = conn.failed
        assert (code, ref, extra["reason"], extra["outcome"]) == (
            "undelivered", 3, "shutting_down", "unknown")
    finally:
        fed.close()


def test_a_session_reads_the_reason_of_an_undelivered_report() -> None:
    s = Session(max_unconfirmed_bytes=1 << 20)
    s.welcome = WELCOME
    for i in range(3):
        s.add(b"x%d" % i, "g", "agreed", ["a", "b"])
    s.take()
    ev = s.on_frame({"t": "error", "code": "undelivered", "detail": "late", "fatal": False,
                     "id": 0, "first": 1, "count": 2, "outcome": "unknown",
                     "reason": "deadline", "clusters": ["b"]})
    assert isinstance(ev, Undelivered)
    assert (ev.messages, ev.outcome, ev.reason, ev.clusters) == (
        range(1, 3), "unknown", "deadline", ("b",))
    old = s.on_frame({"t": "error", "code": "undelivered", "detail": "", "fatal": False,
                      "id": 0, "first": 0, "count": 1})
    assert isinstance(old, Undelivered) and (old.reason, old.clusters) == ("", ())
