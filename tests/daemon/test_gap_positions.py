"""A gap notice's ``after`` is in the units of the ``deliver`` frames.

The engine counts its own payloads (amcastd's envelopes, each holding one or more
application messages of one ``send`` frame, and control notices); clients count
application messages (``docs/api.md``, ``deliver``). An application transfers state
from the gap's ``after``, so it must name the last message the client saw: the gap
frame, ``welcome``'s ``gap``, the delivery log's ``gap`` record and the delivery records
all agree on it. A ``FakeNode`` (daemon_helpers.py) plays the engine, so the envelopes
per vertex, and the engine's own ``after``, are the test's.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from amcast.protocols.events import OrderGap
from daemon_helpers import FakeNode, Raw, envelope

from amcast.socket_protocol import encode_gone
from tests.daemon.test_pump import fake_daemon, joined

VIEW = 4


def deliver(fake: FakeNode, envelopes: list[bytes], view: int = VIEW) -> None:
    """One ordered vertex of node 1 holding ``envelopes``, delivered in ``view``."""
    ev = fake.deliver(envelopes, sender=1)
    fake.pending[-1] = dataclasses.replace(ev, view=view)


def last_position(frames: list[dict[str, Any]]) -> tuple[int, int]:
    """(view, position) of the last message of the last ``deliver`` frame, as
    ``docs/api.md`` numbers it: ``position + index + i``."""
    f = [x for x in frames if x["t"] == "deliver"][-1]
    _client, _groups, index, payloads = f["batches"][-1]
    return f["view"], f["position"] + index + len(payloads) - 1


async def test_the_gap_after_is_the_last_message_the_client_saw(make_cluster: Any) -> None:
    fake = FakeNode()
    c, d = await fake_daemon(make_cluster, fake)
    raw = await joined(c)
    # two vertices: three envelopes (3 + 1 + 2 messages), then one of 4 messages
    deliver(fake, [envelope(1, ["g"], [b"a", b"b", b"c"]), envelope(2, ["g"], [b"d"]),
                   envelope(3, ["g"], [b"e", b"f"])])
    deliver(fake, [envelope(1, ["g"], [b"g", b"h", b"i", b"j"])])
    # the engine's after: its 4th payload (position 3), the daemon's 10th message
    fake.pending.append(OrderGap(VIEW + 3, (VIEW, 3)))
    d.request_pump()
    frames = [await raw.next(), await raw.next()]
    assert sum(len(b[3]) for f in frames for b in f["batches"]) == 10
    assert await raw.sync(1) == []  # the gap came before the sync's reply
    seen = last_position(frames)
    assert seen == (VIEW, 9)
    assert raw.notices == [{"t": "gap", "view": VIEW + 3, "after": list(seen)}]
    late = await Raw.open(c.socket(0), hello=False)  # welcome carries the last gap
    late.send({"t": "hello", "v": 1, "name": "late"})
    welcome = await late.next()
    assert welcome["gap"] == {"t": "gap", "view": VIEW + 3, "after": list(seen)}
    await c.stop()
    recs = [json.loads(x) for x in
            (Path(d.config.logs.dir) / "delivery.jsonl").read_text().splitlines()]
    (gap,) = [r for r in recs if r["type"] == "gap"]
    assert gap["after"] == list(seen)
    last = [r for r in recs if r["type"] == "delivery"][-1]
    assert (last["view"], last["position"] + last["count"] - 1) == seen


async def test_a_control_notice_last_or_nothing_ordered_moves_no_gap_position(
    make_cluster: Any,
) -> None:
    """The engine's last payload may be a control notice (a group change), which no
    client sees: ``after`` stays on the last message. A life that delivered no ordered
    message says null, whatever the engine counted."""
    fake = FakeNode()
    c, d = await fake_daemon(make_cluster, fake)
    raw = await joined(c)
    fake.pending.append(OrderGap(VIEW, None))
    d.request_pump()
    assert await raw.sync(1) == []
    assert raw.notices == [{"t": "gap", "view": VIEW, "after": None}]
    deliver(fake, [envelope(1, ["g"], [b"a", b"b"])], view=VIEW)
    deliver(fake, [encode_gone(VIEW + 1, 99)], view=VIEW + 1)  # a remote client went
    fake.pending.append(OrderGap(VIEW + 2, (VIEW + 1, 0)))
    d.request_pump()
    frames = [await raw.next()]
    assert await raw.sync(2) == []
    assert raw.notices[-1] == {"t": "gap", "view": VIEW + 2,
                               "after": list(last_position(frames))}
    assert last_position(frames) == (VIEW, 1)


async def test_the_daemons_of_a_new_cluster_send_no_gap(make_cluster: Any) -> None:
    """Real engines: the daemons that form a cluster's first view missed nothing (no
    order came before it), so none tells its clients of a gap or logs one. A daemon
    that came too late for the first view may get one (the others multicast their
    client tables in the first view: it did miss ordered notices)."""
    c = await make_cluster(3)
    welcomes = []
    for i in range(3):
        raw = await Raw.open(c.socket(i), hello=False)
        raw.send({"t": "hello", "v": 1, "name": "w"})
        welcomes.append(await raw.next())
    await c.stop()
    formed = 0
    for d, welcome in zip(c.daemons, welcomes, strict=True):
        recs = [json.loads(x) for x in
                (Path(d.config.logs.dir) / "delivery.jsonl").read_text().splitlines()]
        first = next(i for i, r in enumerate(recs) if r["type"] == "view")
        if recs[first]["previous"] is not None:
            continue  # it joined a later view
        formed += 1
        assert [r for r in recs[:first] if r["type"] == "gap"] == []
        if welcome["view"] == recs[first]["view"]:
            assert welcome["gap"] is None
    assert formed >= 2  # a majority formed it
