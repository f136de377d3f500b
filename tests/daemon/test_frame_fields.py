"""Every field of every client frame is checked for type and range before the frame is
acted on: a bad one is refused with ``bad_field`` naming it (in ``detail`` and in
``field``), never accepted and never a crash. One ``ClientConnection`` driven by hand;
the same against a real daemon is the last test."""

from __future__ import annotations

from typing import Any

import pytest
from amcast.daemon.api import ApiServer, ClientConnection
from amcast.daemon.config import ApiSection
from daemon_helpers import Backend, FakeTransport, Raw

from amcast.socket_protocol import MAX_CLIENT_NAME_BYTES, FrameDecoder, encode_frame

TOO_BIG = 2**64 - 1  # msgpack's largest integer: above every id's range
BAD_IDS = ["abc", TOO_BIG, 2**63, 1.5, True, [1], b"1", {"a": 1}]


def _connect(hello: bool = True) -> tuple[ClientConnection, FakeTransport, Backend]:
    backend = Backend()
    server = ApiServer(ApiSection(hello_timeout_s=60, max_group_name_bytes=16), backend)
    conn = ClientConnection(server, 1)
    transport = FakeTransport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    if hello:
        conn.data_received(encode_frame({"t": "hello", "v": 1}))
        assert conn.greeted
        transport.out.clear()
    return conn, transport, backend


def _replies(transport: FakeTransport) -> list[dict[str, Any]]:
    return [f for f in FrameDecoder().feed(bytes(transport.out)) if isinstance(f, dict)]


REQUESTS: list[tuple[dict[str, Any], str]] = [
    *[({"t": "send", "id": bad, "groups": ["g"], "payloads": [b"x"]}, "id")
      for bad in [*BAD_IDS, -1]],  # a send's id numbers messages: never negative
    ({"t": "send", "id": 1, "payloads": [b"x"]}, "groups"),
    ({"t": "send", "id": 1, "groups": [], "payloads": [b"x"]}, "groups"),
    ({"t": "send", "id": 1, "groups": [""], "payloads": [b"x"]}, "groups"),
    ({"t": "send", "id": 1, "groups": [b"g"], "payloads": [b"x"]}, "groups"),
    ({"t": "send", "id": 1, "groups": 7, "payloads": [b"x"]}, "groups"),
    ({"t": "send", "id": 1, "groups": ["g" * 17], "payloads": [b"x"]}, "groups"),
    ({"t": "send", "id": 1, "groups": ["g"]}, "payloads"),
    ({"t": "send", "id": 1, "groups": ["g"], "payloads": []}, "payloads"),
    ({"t": "send", "id": 1, "groups": ["g"], "payloads": ["text"]}, "payloads"),
    ({"t": "send", "id": 1, "groups": ["g"], "payloads": b"x"}, "payloads"),
    ({"t": "send", "id": 1, "groups": ["g"], "payloads": [b"x", 7]}, "payloads"),
    ({"t": "send", "id": 1, "groups": ["g"], "payload": "text"}, "payload"),
    ({"t": "send", "id": 1, "groups": ["g"], "payload": None}, "payload"),
    *[({"t": "join", "id": bad, "groups": ["g"]}, "id") for bad in BAD_IDS],
    ({"t": "join", "id": -1}, "groups"),
    ({"t": "join", "id": -1, "groups": [1]}, "groups"),
    ({"t": "join", "id": -1, "groups": ["g" * 17]}, "groups"),
    ({"t": "join", "id": -1, "groups": ["g"], "members": "yes"}, "members"),
    ({"t": "join", "id": -1, "groups": ["g"], "members": 1}, "members"),
    *[({"t": "leave", "id": bad, "groups": ["g"]}, "id") for bad in BAD_IDS],
    ({"t": "leave", "id": -1, "groups": {"g": 1}}, "groups"),
    ({"t": "leave", "id": -1, "groups": None}, "groups"),
    *[({"t": "sync", "id": bad}, "id") for bad in BAD_IDS],
    *[({"t": "status", "id": bad}, "id") for bad in BAD_IDS],
]


@pytest.mark.parametrize(("frame", "field"), REQUESTS,
                         ids=[f"{f['t']}-{field}-{i}" for i, (f, field) in enumerate(REQUESTS)])
async def test_a_bad_field_is_refused_with_bad_field_naming_it(
    frame: dict[str, Any], field: str,
) -> None:
    conn, transport, backend = _connect()
    conn.data_received(encode_frame(frame))
    [err] = _replies(transport)
    assert (err["t"], err["code"], err["fatal"], err["field"]) == ("error", "bad_field",
                                                                   False, field)
    assert f"{frame['t']}.{field} " in err["detail"]
    good_id = field != "id"
    assert err.get("id") == (frame.get("id") if good_id else None)  # a bad id is not echoed
    assert backend.sent == [] and backend.requests == []  # nothing of it was done
    conn.data_received(encode_frame({"t": "sync", "id": 9}))  # and the connection goes on
    assert _replies(transport)[-1] == {"t": "synced", "id": 9}


HELLOS: list[tuple[dict[str, Any], str]] = [
    ({"t": "hello"}, "v"),
    ({"t": "hello", "v": "1"}, "v"),
    ({"t": "hello", "v": 1.0}, "v"),
    ({"t": "hello", "v": True}, "v"),
    ({"t": "hello", "v": None}, "v"),
    ({"t": "hello", "v": 1, "name": 7}, "name"),
    ({"t": "hello", "v": 1, "name": b"bin"}, "name"),
    ({"t": "hello", "v": 1, "name": "n" * (MAX_CLIENT_NAME_BYTES + 1)}, "name"),
    ({"t": "hello", "v": 1, "name": "é" * (MAX_CLIENT_NAME_BYTES // 2 + 1)}, "name"),
    *[({"t": "hello", "v": 1, "id": bad}, "id") for bad in BAD_IDS],
]


@pytest.mark.parametrize(("frame", "field"), HELLOS,
                         ids=[f"hello-{field}-{i}" for i, (_, field) in enumerate(HELLOS)])
async def test_a_bad_hello_is_refused_with_bad_field_and_closes(
    frame: dict[str, Any], field: str,
) -> None:
    conn, transport, _ = _connect(hello=False)
    conn.data_received(encode_frame(frame))
    [err] = _replies(transport)
    assert (err["code"], err["fatal"], err["field"]) == ("bad_field", True, field)
    assert f"hello.{field} " in err["detail"] and len(err["detail"]) < 200
    assert not conn.greeted and conn.closed and transport.closed


async def test_fields_at_the_edges_of_their_ranges_are_accepted() -> None:
    conn, transport, backend = _connect(hello=False)
    conn.data_received(encode_frame({"t": "hello", "v": 1, "id": -(2**63),
                                     "name": "n" * MAX_CLIENT_NAME_BYTES}))
    assert conn.greeted and conn.name == "n" * MAX_CLIENT_NAME_BYTES
    conn.data_received(b"".join(encode_frame(f) for f in [
        {"t": "send", "id": 2**63 - 1, "groups": "g" * 16, "payloads": [b""]},
        {"t": "send", "id": 0, "groups": ["g"], "payload": b"x", "extra": "ignored"},
        {"t": "join", "id": 2**63 - 1, "groups": ["g"], "members": True},
        {"t": "leave", "groups": "g"},
        {"t": "status", "id": -(2**63)},
        {"t": "sync", "id": -(2**63)},
    ]))
    assert [f["t"] for f in _replies(transport)] == ["welcome", "status", "synced"]
    assert backend.sent == [[b""], [b"x"]] and len(backend.requests) == 2


async def test_an_unknown_type_echoes_only_a_valid_id() -> None:
    conn, transport, _ = _connect()
    conn.data_received(encode_frame({"t": "frobnicate", "id": TOO_BIG}))
    conn.data_received(encode_frame({"t": "frobnicate", "id": -5}))
    errs = _replies(transport)
    assert [(e["code"], e.get("id")) for e in errs] == [("unknown_type", None),
                                                        ("unknown_type", -5)]


async def test_a_real_daemon_refuses_ids_out_of_range_and_goes_on(make_cluster: Any) -> None:
    """``send`` frames with ids ``"abc"`` and 2^64-1 used to be accepted (and the id
    echoed back as it came); now each is refused whole, nothing of it sent."""
    c = await make_cluster(1)
    raw = await Raw.open(c.socket(0))
    raw.send({"t": "join", "id": -1, "groups": ["g"]})
    assert (await raw.next())["t"] == "groups"
    raw.send({"t": "send", "id": "abc", "groups": ["g"], "payloads": [b"no"]})
    raw.send({"t": "send", "id": TOO_BIG, "groups": ["g"], "payloads": [b"no"]})
    raw.send({"t": "send", "id": 5, "groups": ["g"], "payloads": [b"yes"]})
    got = await raw.sync(6)  # the delivery may come before the synced reply, or after
    got += [] if any(f["t"] == "deliver" for f in got) else [await raw.next()]
    errors = [f for f in got if f["t"] == "error"]
    assert [(e["code"], e["field"], "id" in e) for e in errors] == [("bad_field", "id", False)] * 2
    [batch] = [f for f in got if f["t"] == "deliver"]
    assert batch["batches"][0][3] == [b"yes"]
    assert c.daemons[0].counters.client_errors["bad_field"] == 2
