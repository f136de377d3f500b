"""The client's sans-IO session: numbering, frames, confirmation, refusals, the end."""

from __future__ import annotations

from typing import Any

import pytest

from amcast.client import ClientError, ConnectionClosed, MessagesRefused, WouldBlock
from amcast.client.session import Session
from amcast.socket_protocol import FrameDecoder

WELCOME = {"t": "welcome", "v": 1, "node": 0, "client": 1, "view": 0, "members": [0],
           "max_frame_bytes": 4096, "max_message_bytes": 1024}


def session(**kw: Any) -> Session:
    s = Session(max_unconfirmed_bytes=kw.pop("bound", 1 << 20))
    s.on_frame(WELCOME)
    return s


def written(s: Session) -> list[dict[str, Any]]:
    dec = FrameDecoder(1 << 20)
    frames: list[dict[str, Any]] = []
    for data, _ in s.take():
        frames += dec.feed(data)  # type: ignore[arg-type]
    return frames


def test_messages_are_numbered_and_a_send_frame_id_is_its_first_number() -> None:
    s = session()
    assert [s.add(b"a", "g", "agreed"), s.add(b"b", "g", "agreed")] == [0, 1]
    assert s.add(b"c", ["g", "h"], "agreed") == 2
    assert s.add(b"d", ("g", "h"), "agreed") == 3  # same groups: same frame
    assert s.add(b"e", ["g", "h"], "safe") == 4
    frames = written(s)
    assert [(f["id"], f["groups"], f["service"], f["payloads"]) for f in frames] == [
        (0, ["g"], "agreed", [b"a", b"b"]),
        (2, ["g", "h"], "agreed", [b"c", b"d"]),
        (4, ["g", "h"], "safe", [b"e"]),
    ]
    assert s.add(b"f", "g", "agreed") == 5
    assert [f["id"] for f in written(s)] == [5]


def test_a_reused_group_list_is_read_at_each_send() -> None:
    s = session()
    groups = ["a"]
    s.add(b"1", groups, "agreed")
    groups[0] = "b"  # the caller mutates its list: the next message goes to b
    s.add(b"2", groups, "agreed")
    assert [(f["groups"], f["payloads"]) for f in written(s)] == [(["a"], [b"1"]),
                                                                 (["b"], [b"2"])]


def test_groups_that_are_not_strings_raise_even_after_a_list() -> None:
    s = session()
    s.add(b"1", ["a"], "agreed")
    for bad in (None, 3, [None]):
        with pytest.raises(ClientError, match="groups"):
            s.add(b"2", bad, "agreed")  # type: ignore[arg-type]
    assert [f["payloads"] for f in written(s)] == [[b"1"]]


@pytest.mark.parametrize("payload", ["text", 3, None, ["b"]])
def test_a_payload_that_is_not_bytes_raises_at_once(payload: Any) -> None:
    s = session()
    with pytest.raises(TypeError, match="bytes"):
        s.add(payload, "g", "agreed")
    assert s.next_seq == 0 and s.take() == []
    assert s.add(bytearray(b"ok"), "g", "agreed") == 0  # bytes-like is fine


def test_bad_arguments_raise_at_once_and_queue_nothing() -> None:
    s = session()
    s.add(b"before", "g", "agreed")
    for groups, service, code in (([], "agreed", "bad_field"), (["g", ""], "agreed",
                                  "bad_field"), ("g", "eventual", "bad_service")):
        with pytest.raises(ClientError) as info:
            s.add(b"x", groups, service)
        assert info.value.code == code
    with pytest.raises(ClientError) as info:
        s.add(b"x" * 1025, "g", "agreed")  # over max_message_bytes from the welcome
    assert info.value.code == "message_too_large"
    assert [f["payloads"] for f in written(s)] == [[b"before"]]  # the others were not hurt
    assert s.next_seq == 1


def test_frames_stay_under_max_frame_bytes() -> None:
    s = session()
    for k in range(40):
        s.add(bytes([k]) * 1000, "g", "agreed")
    data = s.take()
    assert len(data) > 1
    assert all(len(d) - 4 <= WELCOME["max_frame_bytes"] for d, _ in data)
    dec = FrameDecoder(1 << 20)
    payloads = [p for d, _ in data for f in dec.feed(d) for p in f["payloads"]]  # type: ignore
    assert payloads == [bytes([k]) * 1000 for k in range(40)]


def test_refusal_names_exactly_the_messages_of_the_refused_frame() -> None:
    s = session()
    for k in range(3):
        s.add(b"a%d" % k, "a", "agreed")
    for k in range(2):
        s.add(b"b%d" % k, "b", "agreed")
    s.take()
    s.on_frame({"t": "error", "code": "too_many_groups", "detail": "no", "fatal": False,
                "id": 3})
    assert s.alarm
    with pytest.raises(MessagesRefused) as info:
        s.add(b"next", "a", "agreed")
    err = info.value
    assert err.code == "too_many_groups" and err.messages == [3, 4]
    assert err.payloads == [b"b0", b"b1"]
    assert "3..4" in str(err)
    assert s.next_seq == 5  # the message in hand was not queued
    assert s.add(b"next", "a", "agreed") == 5  # reported once


def test_synced_confirms_and_forgets_in_flight_frames() -> None:
    s = session()
    for _ in range(10):
        s.add(b"x" * 100, "g", "agreed")
    s.take()
    sync = FrameDecoder().feed(s.sync_frame())[0]
    assert sync["t"] == "sync" and sync["id"] < 0
    assert s.sync_frame() == b""  # one in flight
    s.add(b"y", "g", "agreed")
    s.take()
    assert s.inflight_bytes == 1001 and not s.confirmed
    s.on_frame({"t": "synced", "id": sync["id"]})
    assert s.synced_seq == 10 and s.inflight_bytes == 1
    again = FrameDecoder().feed(s.sync_frame())[0]
    s.on_frame({"t": "synced", "id": again["id"]})
    assert s.confirmed and s.inflight_bytes == 0 and s.unconfirmed_count() == 0


def test_a_lazy_sync_waits_for_an_eighth_of_the_bound_in_flight() -> None:
    s = session(bound=8000)
    assert s.lazy_sync_bytes == 1000 and not s.unsynced
    for _ in range(9):
        s.add(b"x" * 100, "g", "agreed")
    s.take()
    assert s.unsynced and s.sync_frame(lazy=True) == b""  # 900 bytes in flight
    s.add(b"y" * 100, "g", "agreed")
    s.take()
    sync = FrameDecoder().feed(s.sync_frame(lazy=True))[0]  # 1,000: at once
    assert sync["t"] == "sync" and not s.unsynced and s.sync_pending
    s.add(b"z", "g", "agreed")
    s.take()
    assert s.unsynced and s.sync_frame(lazy=True) == b""  # one in flight, as without lazy
    s.on_frame({"t": "synced", "id": sync["id"]})
    assert s.synced_seq == 10 and s.inflight_bytes == 1 and s.unsynced
    assert s.sync_frame(lazy=True) == b"" and s.sync_frame() != b""  # the timer's
    assert not s.unsynced


def test_a_daemon_without_sync_answers_unknown_type_which_confirms() -> None:
    s = session()
    s.add(b"x", "g", "agreed")
    s.take()
    rid = FrameDecoder().feed(s.sync_frame())[0]["id"]
    assert s.on_frame({"t": "error", "code": "unknown_type", "detail": "", "fatal": False,
                       "id": rid}) is None
    assert s.confirmed and not s.errors


def test_unconfirmed_bytes_are_bounded() -> None:
    s = session(bound=1000)
    for _ in range(10):
        s.add(b"x" * 100, "g", "agreed")
    with pytest.raises(WouldBlock):
        s.add(b"x", "g", "agreed")
    s.take()
    with pytest.raises(WouldBlock):  # written but not confirmed still counts
        s.add(b"x", "g", "agreed")
    rid = FrameDecoder().feed(s.sync_frame())[0]["id"]
    s.on_frame({"t": "synced", "id": rid})
    assert s.add(b"x", "g", "agreed") == 10
    s2 = session(bound=10)
    assert s2.add(b"y" * 500, "g", "agreed") == 0  # one message always fits when idle


def test_the_end_lists_unsent_unknown_and_undelivered_messages() -> None:
    s = session()
    for k in range(4):
        s.add(b"%d" % k, "a", "agreed")  # frame 0: 0..3
    for k in range(3):
        s.add(b"%d" % k, "b", "agreed")  # frame 4: 4..6
    s.take()
    rid = FrameDecoder().feed(s.sync_frame())[0]["id"]
    s.on_frame({"t": "synced", "id": rid})  # 0..6 confirmed and forgotten
    s.add(b"7", "a", "agreed")  # frame 7, written, unconfirmed
    s.take()
    s.add(b"8", "a", "agreed")  # pending, never written
    s.on_frame({"t": "error", "code": "undelivered", "fatal": False, "detail": "",
                "id": 0, "first": 2})
    s.on_frame({"t": "error", "code": "undelivered", "fatal": False, "detail": "", "id": 4,
                "first": 0})
    s.on_frame({"t": "error", "code": "shutting_down", "fatal": True, "detail": "stopping"})
    with pytest.raises(ConnectionClosed) as info:
        s.add(b"9", "a", "agreed")
    err = info.value
    assert err.code == "shutting_down"
    assert err.unknown == [range(2, 8)]
    assert [(b.messages, b.payloads) for b in err.unsent] == [(range(8, 9), [b"8"])]
    assert list(err.unknown_messages()) == [2, 3, 4, 5, 6, 7]


def test_errors_without_an_id_are_kept_bounded() -> None:
    s = session()
    for _ in range(500):
        s.on_frame({"t": "error", "code": "bad_frame", "detail": "", "fatal": False})
    assert len(s.errors) == 64


def test_replies_are_matched_by_negative_ids() -> None:
    s = session()
    rid = s.request_id()
    assert rid < 0
    reply = s.on_frame({"t": "groups", "groups": ["g"], "id": rid})
    assert reply is not None and reply.id == rid  # type: ignore[union-attr]
    err = s.on_frame({"t": "error", "code": "too_many_groups", "detail": "", "fatal": False,
                      "id": rid})
    assert err.error.code == "too_many_groups"  # type: ignore[union-attr]
