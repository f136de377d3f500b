"""The unix-socket API against real in-process daemons (real Node, loopback multicast)."""

from __future__ import annotations

import asyncio
import grp
import json
import os
import pwd
import stat
import urllib.request
from pathlib import Path
from typing import Any

import msgpack
import pytest
from amcast.daemon.config import AccessSection
from amcast.protocols.errors import ClientError, ConfigurationError
from daemon_helpers import Raw

from amcast.client import Client, DeliveredBatch, MessagesRefused
from amcast.socket_protocol import PREFIX
from amcast.socket_protocol import encode_frame as encode
from tests.steady import STEADY


async def test_hello_is_required_and_versions_are_checked(make_cluster: Any) -> None:
    c = await make_cluster(1)
    raw = await Raw.open(c.socket(0), hello=False)
    raw.write(encode({"t": "status"}))
    err = await raw.next()
    assert (err["t"], err["code"], err["fatal"]) == ("error", "hello_required", True)
    assert await raw.closed()
    raw = await Raw.open(c.socket(0), hello=False)
    raw.write(encode({"t": "hello", "v": 99}))
    assert (await raw.next())["code"] == "unsupported_version"
    assert await raw.closed()


async def test_bad_frames_get_error_frames_and_everyone_keeps_being_served(
    make_cluster: Any,
) -> None:
    c = await make_cluster(2, api={"max_message_bytes": 1024})
    good = await Client.connect(c.socket(1))
    await good.join("g")
    bad = await Raw.open(c.socket(0))
    cases = [
        (PREFIX.pack(4) + b"\xc1\xff\x00\x01", "bad_frame"),
        (PREFIX.pack(2) + msgpack.packb([1]), "bad_frame"),
        (PREFIX.pack(100_000) + b"z" * 100_000, "frame_too_large"),
        (encode({"t": "frobnicate", "id": 7}), "unknown_type"),
        (encode({"t": "send", "groups": ["g"], "service": "eventual", "payload": b"x"}),
         "bad_service"),
        (encode({"t": "send", "groups": [], "payload": b"x"}), "bad_field"),
        (encode({"t": "send", "groups": ["g"], "payloads": ["text, not bin"]}), "bad_field"),
        (encode({"t": "send", "groups": ["g"], "payloads": [b"x" * 2000]}), "message_too_large"),
        (encode({"t": "join", "groups": "g" * 500}), "bad_field"),
    ]
    for data, code in cases:
        bad.write(data)
        err = await bad.next()
        assert (err["t"], err["code"], err["fatal"]) == ("error", code, False), (err, code)
    bad.write(encode({"t": "frobnicate", "id": 7}))
    assert (await bad.next())["id"] == 7
    # the misbehaving connection still works, and so does everyone else
    bad.write(encode({"t": "send", "groups": ["g"], "payloads": [b"after-garbage"]}))
    batch = await good.next_event(10)
    assert isinstance(batch, DeliveredBatch)
    assert [d.payload for d in batch] == [b"after-garbage"]
    status = await good.status()
    assert status["node"] == 1
    kinds = {"data", "ack_only", "heartbeat", "nack", "repair", "membership", "swap"}
    assert set(status["datagrams"]) == {"sent", "received"}
    assert set(status["datagrams"]["sent"]) == set(status["datagrams"]["received"]) == kinds
    assert status["datagrams"]["received"]["data"] >= 1  # node 0's messages came here
    # which implementation runs each part of the data path (Node.core, the modules)
    assert set(status["core"]) == {"decode", "seal", "order", "reliable", "io"}
    assert {status["core"][part]
            for part in ("decode", "seal", "order", "reliable", "io")} <= {"native", "pure"}
    s0 = c.daemons[0].counters.client_errors
    assert s0["bad_frame"] == 2 and s0["frame_too_large"] == 1
    await good.close()


async def test_unknown_socket_group_is_a_configuration_error(make_cluster: Any) -> None:
    with pytest.raises(ConfigurationError, match="no group named"):
        await make_cluster(1, api={"socket_group": "no-such-group-amcast"})


async def test_truncated_frame_at_half_close_gets_an_error(make_cluster: Any) -> None:
    c = await make_cluster(1)
    raw = await Raw.open(c.socket(0))
    raw.write(encode({"t": "status"})[:-3])
    raw.writer.write_eof()
    err = await raw.next()
    assert (err["code"], err["fatal"]) == ("truncated_frame", True)
    assert await raw.closed()


async def test_groups_route_deliveries_and_senders_need_not_join(make_cluster: Any) -> None:
    c = await make_cluster(2)
    a = await Client.connect(c.socket(0))
    b = await Client.connect(c.socket(1))
    outsider = await Client.connect(c.socket(1))
    assert await a.join("a", "common") == ["a", "common"]
    assert await b.join("b", "x") == ["b", "x"]
    assert await b.leave("x") == ["b"]
    outsider.send(b"to-a", "a")
    outsider.send(b"to-both", ["a", "b"])
    outsider.send(b"to-nobody", "nobody")
    outsider.send(b"to-b", "b")
    got_a = [d async for d in _take(a, 2)]
    got_b = [d async for d in _take(b, 2)]
    assert [d.payload for d in got_a] == [b"to-a", b"to-both"]
    assert [d.payload for d in got_b] == [b"to-both", b"to-b"]
    both_a, both_b = got_a[1], got_b[0]
    assert both_a.position == both_b.position and both_a.message_id == both_b.message_id
    assert both_a.sender == 1 and both_a.client == outsider.client_id
    assert both_a.groups == ("a", "b") and both_a.service == "agreed"
    assert outsider._events == type(outsider._events)()  # joined nothing, got nothing
    for cl in (a, b, outsider):
        await cl.close()


async def _take(client: Client, n: int) -> Any:
    got = 0
    async for d in client.deliveries(10):
        yield d
        got += 1
        if got == n:
            return


async def test_two_nodes_deliver_identical_sequences_with_backpressure(
    make_cluster: Any,
) -> None:
    # window_size 8, not 2: with 2 the engine can deadlock (its own trailing ack-only
    # vertices fill the window and an idle peer never acknowledges them; reported)
    c = await make_cluster(2, protocol={"insecure": True, **STEADY, "window_size": 8,
                                       "max_pending_bytes": 4096},
                           api={"max_message_bytes": 2048, "max_groups": 4,
                                "max_group_name_bytes": 16})
    clients = [await Client.connect(c.socket(i), max_batch_bytes=512) for i in range(2)]
    for cl in clients:
        await cl.join("g")
    per = 1500
    for i, cl in enumerate(clients):
        for k in range(per):
            cl.send(f"{i}-{k}".encode(), "g")
        await cl.drain()
    seqs: list[list[tuple[int | None, str, bytes]]] = [[], []]
    for i, cl in enumerate(clients):
        async for d in cl.deliveries(20):
            seqs[i].append((d.position, d.message_id, d.payload))
            if len(seqs[i]) == 2 * per:
                break
    assert seqs[0] == seqs[1]
    assert [p for p, _, _ in seqs[0]] == list(range(2 * per))
    for i in range(2):  # each client's messages in its sending order
        mine = [p for _, _, p in seqs[0] if p.startswith(f"{i}-".encode())]
        assert mine == [f"{i}-{k}".encode() for k in range(per)]
    assert sum(d.counters.backpressure_events for d in c.daemons) > 0
    for cl in clients:
        await cl.close()


async def test_slow_reader_is_disconnected_and_the_cluster_keeps_going(
    make_cluster: Any,
) -> None:
    # a client that reads nothing: the group is held back for it (flow control) until
    # slow_reader_timeout_s without progress, then it is disconnected and the group goes on
    c = await make_cluster(
        2, api={"client_queue_high_bytes": 65536, "client_queue_max_bytes": 1 << 20,
                "max_message_bytes": 16384, "max_groups": 4, "max_group_name_bytes": 16,
                "slow_reader_timeout_s": 1.0},
    )
    sleeper = await Raw.open(c.socket(0))
    sleeper.write(encode({"t": "join", "groups": ["g"]}))
    assert (await sleeper.next())["t"] == "groups"
    # the sleeper stops reading: its socket buffers fill, then the daemon's queue
    sleeper_transport = sleeper.writer.transport
    sleeper_transport.pause_reading()
    listener = await Client.connect(c.socket(0))
    await listener.join("g")
    sender = await Client.connect(c.socket(1))
    total = 0
    chunk = b"p" * 1000
    while c.daemons[0].counters.clients_disconnected["slow_reader"] == 0:
        for _ in range(200):
            sender.send(chunk, "g")
        total += 200
        await sender.drain()
        got = 0
        async for _ in listener.deliveries(10):
            got += 1
            if got == 200:
                break
        assert total < 20_000, "slow reader was never disconnected"
    sleeper_transport.resume_reading()
    frames = []
    try:
        while True:
            frames.append(await sleeper.next())
    except EOFError:
        pass
    assert frames[-1]["code"] == "slow_reader" and frames[-1]["fatal"]
    assert "slow_reader_timeout_s" in frames[-1]["detail"]  # no progress, not the cap
    assert c.daemons[0].counters.flow_holds >= 1
    sender.send(b"still-alive", "g")
    async for d in listener.deliveries(10):
        if d.payload == b"still-alive":
            break
    for cl in (listener, sender):
        await cl.close()


async def test_socket_permissions_metrics_logs_and_clean_stop(make_cluster: Any) -> None:
    group = grp.getgrgid(os.getgid()).gr_name
    c = await make_cluster(2, api={"socket_mode": 0o600, "socket_group": group})
    path = c.socket(0)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert os.stat(path).st_gid == os.getgid()
    cl = await Client.connect(path)
    await cl.join("g")
    cl.send(b"m1", "g", "agreed")
    cl.send(b"m2", "g", "causal")
    cl.send(b"m3", "g", "safe")
    got = [d async for d in _take(cl, 3)]
    assert sorted(d.service for d in got) == ["agreed", "causal", "safe"]
    port = c.daemons[0].metrics_port
    body = await asyncio.to_thread(
        lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
    )
    text = body.decode()
    for name in ("amcast_messages_delivered_total 3.0", "amcast_datagrams_sent_total",
                 "amcast_delivery_latency_seconds_bucket", "amcast_clients_connected 1.0",
                 'amcast_batches_delivered_total{service="causal"}'):
        assert name in text, name
    labels = ",".join(f'{part}="{impl}"' for part, impl in sorted(c.daemons[0].core.items()))
    assert f"amcast_core_info{{{labels}}} 1.0" in text
    view_line = next(line for line in text.splitlines() if line.startswith("amcast_view_id "))
    assert float(view_line.split()[1]) == c.daemons[0].view_id
    codes = await c.stop()
    assert codes == [0, 0]
    assert not Path(path).exists()
    with pytest.raises(ClientError):
        await cl.next_event(5)  # the daemon said shutting_down and closed
    log_dir = Path(c.daemons[0].config.logs.dir)
    records = [json.loads(x) for x in (log_dir / "delivery.jsonl").read_text().splitlines()]
    kinds = [r["type"] for r in records]
    assert kinds[0] == "start" and "view" in kinds and kinds.count("delivery") >= 1
    deliveries = [r for r in records if r["type"] == "delivery"]
    assert sum(r["count"] for r in deliveries) == 3
    ordered = sorted((r for r in deliveries if r["position"] is not None),
                     key=lambda r: r["position"])
    assert [r["position"] for r in ordered] == list(range(len(ordered)))
    metrics = [json.loads(x) for x in (log_dir / "metrics.jsonl").read_text().splitlines()]
    assert metrics[-1]["messages_delivered"] == 3 and metrics[-1]["type"] == "metrics"


@pytest.mark.slow
async def test_a_slow_client_that_keeps_reading_slows_the_group_and_is_never_cut_off(
    make_cluster: Any,
) -> None:
    # end-to-end flow control: deliveries outrun this client many times over; its daemon
    # holds its releases whenever the client is behind, the senders' windows close, and
    # the client gets every message, in order, without being disconnected
    c = await make_cluster(
        3, api={"client_queue_high_bytes": 65536, "client_queue_max_bytes": 1 << 20,
                "max_message_bytes": 16384, "slow_reader_timeout_s": 30.0},
    )
    slow = await Client.connect(c.socket(0))
    await slow.join("g")
    senders = [await Client.connect(c.socket(i)) for i in (1, 2)]
    per, size = 1500, 2000
    for k, sender in enumerate(senders):
        for j in range(per):
            sender.send(f"{k}-{j}-".encode().ljust(size, b"."), "g")
    drains = [asyncio.ensure_future(s.drain()) for s in senders]
    got: list[bytes] = []
    async for d in slow.deliveries(30):
        got.append(d.payload)
        if len(got) % 100 == 0:
            await asyncio.sleep(0.02)  # the application's work: it reads slowly
        if len(got) == 2 * per:
            break
    await asyncio.gather(*drains)
    for k in range(2):
        mine = [p.split(b"-")[1] for p in got if p.startswith(f"{k}-".encode())]
        assert mine == [str(j).encode() for j in range(per)]
    d0 = c.daemons[0]
    assert d0.counters.clients_disconnected["slow_reader"] == 0
    assert d0.counters.flow_holds >= 1  # it was behind, and the group waited for it
    for cl in (slow, *senders):
        await cl.close()


async def test_connections_that_never_say_hello_cannot_keep_a_client_out(
    make_cluster: Any,
) -> None:
    """Connections that never say hello used to take one of ``max_clients`` each until
    ``hello_timeout``: a flood of them, reopened as they closed, kept honest clients out
    with ``too_many_clients``. Now they share ``max_pending_hellos`` slots of their own,
    the oldest going first (``too_many_pending_hellos``), so a client that says hello is
    served however many are silent; the silent ones left get ``hello_timeout``, a
    greeted client never does."""
    c = await make_cluster(1, api={"max_clients": 4, "max_pending_hellos": 3,
                                   "hello_timeout_s": 3.0})
    greeted = await Raw.open(c.socket(0))
    silent: list[Raw] = []
    honest: list[Client] = []
    for k in range(3):  # the flood, reopened: 8 more silent connections each time
        silent += [await Raw.open(c.socket(0), hello=False) for _ in range(8)]
        client = await Client.connect(c.socket(0), name=f"honest{k}")
        honest.append(client)
        await client.join(f"g{k}")
        client.send(f"m{k}".encode(), f"g{k}")
        assert [d.payload async for d in _take(client, 1)] == [f"m{k}".encode()]
    for raw in silent[:-2]:  # each closed for a newer connection, honest ones included
        err = await raw.next()
        assert (err["code"], err["fatal"]) == ("too_many_pending_hellos", True)
        assert "api.max_pending_hellos" in err["detail"]
        assert await raw.closed()
    for raw in silent[-2:]:  # the last two were still waiting when the flood stopped
        err = await raw.next()
        assert (err["t"], err["code"], err["fatal"]) == ("error", "hello_timeout", True)
        assert "api.hello_timeout_s" in err["detail"]
        assert await raw.closed()
    greeted.write(encode({"t": "status", "id": 2}))  # well past the timeout: still served
    st = await greeted.next()
    assert st["t"] == "status"
    assert st["counters"]["clients_disconnected"]["too_many_pending_hellos"] == 22
    for client in honest:
        await client.close()


async def _metrics_text(port: int) -> str:
    body = await asyncio.to_thread(
        lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
    )
    return body.decode()


async def test_access_rules_decide_join_and_send_by_the_clients_own_uid_user_and_group(
    make_cluster: Any,
) -> None:
    """Issue 14 item 4: rules that name this test's own uid, user and group admit it;
    rules that name someone else refuse it with ``forbidden`` (whole frame, not fatal),
    counted per request, and ``status`` lists the client's identity."""
    uid, gid = os.getuid(), os.getgid()
    user, group = pwd.getpwuid(uid).pw_name, grp.getgrgid(gid).gr_name
    rules = [
        {"groups": "mine.*", "join": [f"uid:{uid}"], "send": [f"user:{user}"]},
        {"groups": "ours", "join": [f"group:{group}"], "send": [f"gid:{gid}"]},
        {"groups": "theirs.*", "join": [f"uid:{uid + 1}"], "send": ["group:no-such-amcast-grp"]},
    ]
    c = await make_cluster(1, access={"default": "deny", "rules": rules})
    d = c.daemons[0]
    cl = await Client.connect(c.socket(0), name="me")
    assert await cl.join("mine.a", "ours") == ["mine.a", "ours"]
    with pytest.raises(ClientError) as err:
        await cl.join("mine.b", "theirs.a")  # refused whole: not even mine.b
    assert err.value.code == "forbidden" and "theirs.a" in err.value.detail
    assert f"uid {uid}" in err.value.detail
    with pytest.raises(ClientError, match="forbidden"):
        await cl.join("elsewhere")  # no rule: the default (deny)
    raw = await Raw.open(c.socket(0))
    raw.send({"t": "send", "id": 5, "groups": ["mine.a", "theirs.a"], "payloads": [b"no"]})
    raw.send({"t": "send", "id": 6, "groups": ["ours"], "payloads": [b"x"] * 3})
    got = await raw.sync(-1)
    assert len(got) == 1 and (got[0]["code"], got[0]["id"], got[0]["fatal"]) == (
        "forbidden", 5, False)
    assert "theirs.a" in got[0]["detail"] and "mine.a" not in got[0]["detail"]
    raw.send({"t": "send", "id": 7, "groups": ["mine.a"], "payloads": [b"yes"]})
    assert await raw.sync(-2) == []  # the connection goes on after forbidden
    payloads = [d.payload async for d in _take(cl, 4)]
    assert payloads == [b"x", b"x", b"x", b"yes"]  # nothing of frame 5
    st = await cl.status()
    me = next(x for x in st["clients"] if x["name"] == "me")
    assert (me["uid"], me["user"], me["gid"], me["group"], me["pid"]) == (
        uid, user, gid, group, os.getpid())
    assert st["counters"]["requests_denied"] == {"join": 2, "send": 1}
    assert st["counters"]["client_errors"]["forbidden"] == 3
    text = await _metrics_text(d.metrics_port)
    assert 'amcast_client_requests_denied_total{request="join"} 2.0' in text
    assert 'amcast_client_requests_denied_total{request="send"} 1.0' in text
    # SIGHUP's reload: [access] applies to the next requests, without a restart
    d._reload = lambda: d.config.model_copy(update={"access": AccessSection(rules=[
        {"groups": "theirs.*", "join": [f"user:{user}"], "send": []}])})
    d.reload()
    assert await cl.join("theirs.a") == ["mine.a", "ours", "theirs.a"]
    assert await cl.join("elsewhere") == ["elsewhere", "mine.a", "ours", "theirs.a"]
    cl.send(b"z", "theirs.a")  # send = []: nobody
    with pytest.raises(MessagesRefused) as refused:
        await cl.sync()
    assert refused.value.code == "forbidden" and refused.value.messages == [0]
    assert d.counters.requests_denied["send"] == 2
    await cl.close()


async def test_half_written_frames_time_out_and_free_their_slots(make_cluster: Any) -> None:
    """Issue 14 item 7: a length prefix then silence, part of a body then silence, or an
    oversized frame's prefix then silence held a connection slot (and up to one frame of
    memory) for ever. Now each gets ``frame_timeout`` after ``api.frame_timeout_s`` (on
    the daemon's 1 s tick), counted as a disconnect reason; a client that keeps
    completing frames is not timed out."""
    c = await make_cluster(1, api={"max_clients": 4, "frame_timeout_s": 0.3,
                                   "max_message_bytes": 1024})
    d = c.daemons[0]
    whole = encode({"t": "send", "id": 1, "groups": ["g"], "payloads": [b"p" * 500]})
    prefix_only = await Raw.open(c.socket(0))
    prefix_only.write(whole[:4])
    half_body = await Raw.open(c.socket(0))
    half_body.write(whole[: len(whole) // 2])
    oversized = await Raw.open(c.socket(0))
    oversized.write(PREFIX.pack(1 << 20) + b"z" * 1000)  # skipped, never complete
    assert (await oversized.next())["code"] == "frame_too_large"
    honest = await Raw.open(c.socket(0))
    for raw in (prefix_only, half_body, oversized):
        err = await raw.next(timeout=10)
        assert (err["t"], err["code"], err["fatal"]) == ("error", "frame_timeout", True)
        assert "api.frame_timeout_s" in err["detail"]
        assert await raw.closed()
    assert d.counters.clients_disconnected["frame_timeout"] == 3
    assert await honest.sync(1) == []  # served throughout, never timed out
    late = [await Raw.open(c.socket(0)) for _ in range(3)]  # the three slots are free again
    for raw in late:
        assert await raw.sync(2) == []


async def test_a_half_closed_client_frees_its_slot_at_once(make_cluster: Any) -> None:
    """A client that shuts down its sending side (shutdown(SHUT_WR)) and reads nothing
    used to keep its slot as long as deliveries were queued to it. Now it has left when
    the daemon reads the EOF: its slot is free at once and what is queued to it is
    dropped after ``close_grace_s``."""
    c = await make_cluster(1, api={"max_clients": 3, "close_grace_s": 0.3,
                                   "slow_reader_timeout_s": 60.0})
    d = c.daemons[0]
    quitter = await Raw.open(c.socket(0))
    quitter.send({"t": "join", "groups": ["g"], "id": -1})
    assert (await quitter.next())["t"] == "groups"
    qid = max(d.api.clients)
    sender = await Client.connect(c.socket(0))
    await sender.join("g")
    for i in range(40):  # 2.4 MB the quitter never reads: most of it queued in the daemon
        sender.send(str(i).encode().ljust(60_000, b"."), "g")
    _ = [x async for x in _take(sender, 40)]  # delivered, so written to the quitter too
    assert d.api.clients[qid].queued_bytes > 0
    gone = asyncio.Event()
    forget = d.api.forget

    def spy(conn: Any) -> None:
        forget(conn)
        if conn.id == qid:
            gone.set()

    d.api.forget = spy  # type: ignore[method-assign]
    quitter.writer.write_eof()
    await asyncio.wait_for(gone.wait(), 10)
    assert qid not in d.api.clients
    honest = await Raw.open(c.socket(0))  # the third slot
    assert await honest.sync(1) == []
    await d.api.wait_closed(10)  # its queue went with it after close_grace_s
    assert not d.api.closing
    await sender.close()


async def test_fifty_connections_are_served_and_the_next_one_past_max_clients_is_refused(
    make_cluster: Any,
) -> None:
    """Many greeted, idle connections cost a slot each and nothing else: a sender and a
    receiver among them keep being served, the one past ``max_clients`` is refused."""
    c = await make_cluster(1, api={"max_clients": 52})
    idle = [await Raw.open(c.socket(0)) for _ in range(50)]
    receiver = await Client.connect(c.socket(0))
    await receiver.join("g")
    sender = await Client.connect(c.socket(0))
    refused = await Raw.open(c.socket(0), hello=False)
    refused.send({"t": "hello", "v": 1})  # a connection takes a slot when it says hello
    err = await refused.next()
    assert (err["code"], err["fatal"]) == ("too_many_clients", True)
    for i in range(20):
        sender.send(f"m{i}".encode(), "g")
    got = [d.payload async for d in _take(receiver, 20)]
    assert got == [f"m{i}".encode() for i in range(20)]
    st = await sender.status()
    assert len(st["clients"]) == 52
    assert st["counters"]["clients_disconnected"]["too_many_clients"] == 1
    for raw in idle[:5]:
        assert await raw.sync(3) == []
    for cl in (receiver, sender):
        await cl.close()


async def test_requests_wait_while_their_answers_are_unread(make_cluster: Any) -> None:
    """One read of small requests (here 3,000 ``status`` frames in one write) used to
    queue every answer at once, thousands of times the request's size, to a client that
    reads none of them. Now the daemon stops handling a client's frames once what is
    queued to it passes ``client_queue_high_bytes`` (the rest wait undecoded) and goes
    on, in order, as it reads."""
    high = 65536
    c = await make_cluster(1, api={"client_queue_high_bytes": high,
                                   "client_queue_max_bytes": 4 << 20,
                                   "slow_reader_timeout_s": 30.0})
    d = c.daemons[0]
    raw = await Raw.open(c.socket(0))
    cid = max(d.api.clients)
    n = 3000
    raw.write(b"".join(encode({"t": "status", "id": i}) for i in range(n)))
    await raw.writer.drain()
    probe = await Client.connect(c.socket(0))  # a round trip: the daemon read the burst
    st = await probe.status()
    conn = d.api.clients[cid]
    reply = len(encode({**st, "t": "status", "id": 0}))
    assert conn._behind and conn._decoder.buffered > 0, "the burst was handled whole"
    assert conn.queued_bytes <= high + 2 * reply  # not n * reply
    assert conn._decoder.buffered < n * 20  # what waits stays undecoded: the request bytes
    assert n * reply > 20 * high  # what it would have been
    ids = [(await raw.next())["id"] for _ in range(n)]  # reading lets it go on
    assert ids == list(range(n))
    assert not conn._behind and conn._decoder.buffered == 0
    assert await raw.sync(-1) == []
    await probe.close()
