"""Group membership on 3 real daemons (loopback multicast, ``LocalCluster``).

Watchers (``join`` with ``"members": true``) on every daemon must see the same
``members`` notices at the same places among the group's messages: joins, a leave, a
disconnect, a late join; after a kill -9 the survivors' watchers see the same ``view``
notice, and a client of the restarted daemon gets the full list.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from amcast.client import BlockingClient, MembersChange
from amcast.localcluster import LocalCluster
from tests.daemon.daemon_helpers import Raw
from tests.steady import STEADY

pytestmark = pytest.mark.processes
WAIT = 20.0  # bound on every wait (a loaded 2-core machine)


@pytest.fixture
async def cluster(request: pytest.FixtureRequest) -> AsyncIterator[LocalCluster]:
    directory = Path(tempfile.mkdtemp(prefix="amgm-", dir="/tmp"))
    c = LocalCluster(3, directory, metrics=False, protocol=dict(request.param))
    await asyncio.to_thread(c.start, 60)
    try:
        yield c
    finally:
        await asyncio.to_thread(c.stop, 20)
        shutil.rmtree(directory, ignore_errors=True)


class Client:
    """A raw connection that records what it receives: deliveries and notices."""

    def __init__(self, raw: Raw) -> None:
        self.raw = raw
        self.events: list[tuple[Any, ...]] = []
        self.replies: list[dict[str, Any]] = []
        self.id = -1

    @classmethod
    async def open(cls, path: str, name: str) -> Client:
        raw = await Raw.open(path, hello=False)
        raw.send({"t": "hello", "v": 1, "name": name})
        c = cls(raw)
        c.id = (await raw.next(WAIT))["client"]
        return c

    async def pump(self, until: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + WAIT
        while not until():
            left = deadline - time.monotonic()
            assert left > 0, f"timed out waiting for {what}: {self.events}"
            f = await self.raw.next(left)
            if f["t"] == "deliver":
                for _c, _g, index, payloads in f["batches"]:
                    for i, p in enumerate(payloads):
                        self.events.append(("msg", f["view"], f["position"] + index + i, p))
            elif f["t"] == "members":
                self.events.append(("members", f["view"], f["position"], f["cause"],
                                    f["joined"], f["left"], f["members"]))
            else:
                self.replies.append(f)

    async def request(self, frame: dict[str, Any], ref: int) -> dict[str, Any]:
        self.raw.send({**frame, "id": ref})
        await self.pump(lambda: any(r.get("id") == ref for r in self.replies), frame["t"])
        reply = next(r for r in self.replies if r.get("id") == ref)
        assert reply["t"] == "groups", reply
        return reply

    async def status(self) -> dict[str, Any]:
        self.raw.send({"t": "status", "id": -99})
        await self.pump(lambda: any(r.get("id") == -99 for r in self.replies), "status")
        return next(r for r in self.replies if r.get("id") == -99)

    def has(self, kind: str, pred: Callable[[tuple[Any, ...]], bool]) -> bool:
        return any(e[0] == kind and pred(e) for e in self.events)

    def notices(self) -> list[tuple[Any, ...]]:
        return [e for e in self.events if e[0] == "members"]


async def send(sender: Client, payload: bytes, watchers: list[Client]) -> None:
    sender.raw.send({"t": "send", "groups": ["g"], "payloads": [payload], "id": 0})
    for w in watchers:
        await w.pump(lambda w=w: w.has("msg", lambda e: e[3] == payload), f"message {payload!r}")


def library_watcher(path: str) -> object:
    with BlockingClient(path, name="lib") as client:
        assert client.join("g", members=True) == ["g"]
        return client.next_event(WAIT)


def member(node: int, c: Client, name: str) -> list[Any]:
    return [node, c.id, name]


@pytest.mark.parametrize("cluster", [STEADY], indirect=True)
async def test_joins_leave_disconnect_and_late_join_seen_identically(
    cluster: LocalCluster,
) -> None:
    socks = cluster.sockets
    ws = [await Client.open(socks[i], f"w{i}") for i in range(3)]
    started = time.monotonic()
    for i, w in enumerate(ws):
        reply = await w.request({"t": "join", "groups": ["g"], "members": True}, -1)
        assert reply["groups"] == ["g"]
        assert w.notices()[0][3] == "join" and w.notices()[0][4] == [member(i, w, f"w{i}")]
    joined_at = time.monotonic()
    for w in ws:  # every watcher saw the last watcher's join
        await w.pump(lambda w=w: w.has("members", lambda e: e[4] == [member(2, ws[2], "w2")]),
                     "w2's join")
    sender = await Client.open(socks[0], "sender")
    await send(sender, b"m1", ws)
    a = await Client.open(socks[1], "a")
    await a.request({"t": "join", "groups": ["g"]}, -1)
    await send(sender, b"m2", ws)
    assert (await a.request({"t": "leave", "groups": ["g"]}, -2))["groups"] == []
    await send(sender, b"m3", ws)
    b = await Client.open(socks[2], "b")
    await b.request({"t": "join", "groups": ["g"]}, -1)
    b.raw.writer.close()
    for w in ws:
        await w.pump(lambda w=w: w.has("members", lambda e: e[3] == "disconnect"), "disconnect")
    await send(sender, b"m4", ws)
    late = await Client.open(socks[0], "late")
    await late.request({"t": "join", "groups": ["g"], "members": True}, -1)
    await send(sender, b"m5", [*ws, late])
    took = time.monotonic() - started
    # identical from the place where the last watcher joined
    w2_join = ws[2].notices()[0]
    tails = [w.events[w.events.index(w2_join):] for w in ws]
    assert tails[0] == tails[1] == tails[2], tails
    kinds = [(e[0], e[3]) for e in tails[0]]
    assert kinds == [("members", "join"), ("msg", b"m1"), ("members", "join"), ("msg", b"m2"),
                     ("members", "leave"), ("msg", b"m3"), ("members", "join"),
                     ("members", "disconnect"), ("msg", b"m4"), ("members", "join"),
                     ("msg", b"m5")]
    # a's own join and leave bracket exactly the messages it received
    assert [e[3] for e in a.events if e[0] == "msg"] == [b"m2"]
    # the late joiner's first notice is the full list
    first = late.notices()[0]
    assert first[3] == "join" and first[6] == sorted(
        [member(i, w, f"w{i}") for i, w in enumerate(ws)] + [member(0, late, "late")])
    assert late.events[-1][3] == b"m5" and late.events[0] == first
    status = await sender.status()
    assert status["group_membership"]["members"] == 4 and status["group_membership"]["complete"]
    # the client library: a MembersChange first, from next_event
    change = await asyncio.to_thread(library_watcher, socks[1])
    assert isinstance(change, MembersChange) and change.cause == "join"
    assert change.joined == [m for m in change.members if m[2] == "lib"]
    assert len(change.members) == 5 and change.joined[0][0] == 1
    # amcast listen --members: one '#' line per notice, then the message
    listen = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "amcast", "listen", "--socket", socks[2], "-g", "g", "--members",
        "--count", "1", "--timeout", str(WAIT), stdout=asyncio.subprocess.PIPE)
    assert listen.stdout is not None
    line = (await asyncio.wait_for(listen.stdout.readline(), WAIT)).decode()
    assert line.startswith("# members g join view ") and "2/" in line, line
    sender.raw.send({"t": "send", "groups": ["g"], "payloads": [b"m6"], "id": 1})
    out, _ = await asyncio.wait_for(listen.communicate(), WAIT)
    assert out.decode().rstrip().endswith("m6") and await listen.wait() == 0
    print(f"3 watcher joins: {(joined_at - started) / 3 * 1000:.1f} ms each; "
          f"whole scenario {took:.2f} s")


@pytest.mark.parametrize("cluster", [{}], indirect=True)
async def test_kill9_survivors_see_the_same_view_notice_and_a_restarted_client_the_list(
    cluster: LocalCluster,
) -> None:
    socks = cluster.sockets
    ws = [await Client.open(socks[i], f"w{i}") for i in range(2)]
    for w in ws:
        await w.request({"t": "join", "groups": ["g"], "members": True}, -1)
    doomed = await Client.open(socks[2], "doomed")
    await doomed.request({"t": "join", "groups": ["g"]}, -1)
    for w in ws:
        await w.pump(lambda w=w: w.has("members", lambda e: e[4] == [member(2, doomed, "doomed")]),
                     "doomed's join")
    cluster.kill(2)
    for w in ws:
        await w.pump(lambda w=w: w.has("members", lambda e: e[3] == "view"), "the view notice")
    v0 = [e for e in ws[0].notices() if e[3] == "view"]
    v1 = [e for e in ws[1].notices() if e[3] == "view"]
    assert v0 == v1 and len(v0) == 1
    assert v0[0][2] == 0 and v0[0][5] == [member(2, doomed, "doomed")]
    assert v0[0][6] == [member(0, ws[0], "w0"), member(1, ws[1], "w1")]
    await asyncio.to_thread(cluster.wait_exit, 2, 10)
    await asyncio.to_thread(cluster.restart, 2, 30, 3)
    newcomer = await Client.open(socks[2], "new")
    await newcomer.request({"t": "join", "groups": ["g"], "members": True}, -1)
    await newcomer.pump(lambda: bool(newcomer.notices()), "the newcomer's list")
    first = newcomer.notices()[0]
    assert first[6] == [member(0, ws[0], "w0"), member(1, ws[1], "w1"),
                        member(2, newcomer, "new")], first
    for w in ws:
        await w.pump(lambda w=w: w.has("members", lambda e: member(2, newcomer, "new") in e[4]),
                     "the newcomer's arrival")
