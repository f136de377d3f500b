"""The fuzz targets (``fuzz/``) still work: each one over its seeds and its committed
crash regressions, without atheris (CI does not install it; ``make fuzz`` does)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fuzz.campaign import dictionary_text, parse
from fuzz.targets import TARGETS, load

REGRESSIONS = Path(__file__).resolve().parents[2] / "fuzz" / "regressions"


@pytest.mark.parametrize("name", TARGETS)
def test_target_accepts_its_seeds(name: str) -> None:
    target = load(name)
    inputs = target.seeds()
    assert len(inputs) >= 10
    assert all(len(data) <= target.MAX_LEN for data in inputs)
    for data in inputs:
        target.test_one_input(data)


def regression_inputs() -> list[tuple[str, Path]]:
    return [
        (d.name, f)
        for d in sorted(REGRESSIONS.iterdir())
        if d.is_dir()
        for f in sorted(d.iterdir())
    ]


@pytest.mark.parametrize(("name", "path"), regression_inputs(), ids=lambda x: str(x))
def test_crash_regression_input_no_longer_crashes(name: str, path: Path) -> None:
    load(name).test_one_input(path.read_bytes())


def test_the_datagram_target_decodes_again_what_it_encodes() -> None:
    """The round-trip check runs the decoder on the re-encoded datagram: a datagram the
    decoder refuses (a nack range with last < first) fails it."""
    from amcast.protocols.errors import DecodeError
    from amcast.protocols.wire.codec import Datagram, Kind

    from fuzz.targets import datagram

    node = datagram.new_node(in_view=True)
    datagram._check_roundtrip(node, Datagram(Kind.NACK, 2, 1, 0, nacks=((3, 1, 2),)))
    with pytest.raises(DecodeError, match="nack last"):
        datagram._check_roundtrip(node, Datagram(Kind.NACK, 2, 1, 0, nacks=((3, 2, 1),)))


def test_the_frames_target_refuses_an_internal_error_reply() -> None:
    """A stream the daemon answers with ``internal_error`` is a finding: the check reads
    the daemon's replies (here: a hello the recording backend cannot welcome)."""
    from fuzz.targets import frames

    class Broken(frames.RecordingBackend):
        def status(self) -> dict[str, object]:
            raise RuntimeError("status failed")

    stream = b"".join(
        frames.encode_frame(f) for f in ({"t": "hello", "v": 1}, {"t": "status", "id": 1})
    )
    frames._check_dispatch(7, stream)
    original = frames.RecordingBackend
    frames.RecordingBackend = Broken  # type: ignore[misc]
    try:
        with pytest.raises(AssertionError, match="failed to handle a frame"):
            frames._check_dispatch(7, stream)
    finally:
        frames.RecordingBackend = original  # type: ignore[misc]



def test_the_sealed_target_seals_as_a_sender_does() -> None:
    """Its datagrams are what ``Authenticator.seal`` makes with the same fields."""
    from amcast.protocols.wire.auth import Authenticator

    from fuzz.targets import sealed

    session = bytes(range(16))
    sender = Authenticator(sealed.RINGS[0], session)
    for counter, body in enumerate((b"first", b"", b"x" * 3000)):
        wall_ms = 1_800_000_000_000 + counter
        assert sealed.seal(1, sealed.KEY_1, session, counter, wall_ms, 1, body) == (
            sender.seal(body, wall_ms))


def _sealed_talk(*records: bytes) -> bytes:
    """An input of the ``sealed`` target: in view, the given records after a datagram of
    a real conversation (so the Nodes decode something)."""
    from fuzz.targets import datagram, sealed

    body = datagram._conversation(True, 10, 0)[0][1]
    return bytes((sealed.FLAG_IN_VIEW,)) + sealed._make(0, 0, body) + b"".join(records)


def test_the_sealed_target_refuses_a_gate_that_admits_a_replay(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from amcast.protocols.wire.replay import ReplayGuard

    from fuzz.targets import sealed

    replay = bytes((sealed.REPLAY,)) + sealed.INDEX.pack(0)
    talk = _sealed_talk(replay)
    sealed.test_one_input(talk)  # the real guard refuses the copy
    monkeypatch.setattr(ReplayGuard, "check", lambda *args: None)
    with pytest.raises(AssertionError, match="twice"):
        sealed.test_one_input(talk)


def test_the_sealed_target_refuses_paths_that_disagree(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``open`` that forgets to record what it admitted accepts a replay ``unseal`` +
    ``admit`` refuses; a simulator path that skips the replay check lets a Node take a
    copy the daemon's Node drops."""
    from amcast.protocols.node import Node
    from amcast.protocols.wire.auth import Authenticator

    from fuzz.targets import sealed

    talk = _sealed_talk(bytes((sealed.REPLAY,)) + sealed.INDEX.pack(0))
    open_ = Authenticator.open
    with monkeypatch.context() as m:
        m.setattr(Authenticator, "open",
                  lambda self, data, wall_ms: bytes(self.unseal(data)[1]))
        with pytest.raises(AssertionError, match="disagree"):
            sealed.test_one_input(talk)
    assert Authenticator.open is open_
    unseal = Node.unseal
    monkeypatch.setattr(Node, "unseal", lambda self, data: (None, *unseal(self, data)[1:]))
    with pytest.raises(AssertionError, match="differ in: counters, events"):
        sealed.test_one_input(talk)


LIBFUZZER_LOG = """\
#2\tINITED cov: 1101 ft: 4010 corp: 60/9Kb exec/s: 0 rss: 48Mb
#13099\tNEW    cov: 1189 ft: 5725 corp: 202/180Kb lim: 5385 exec/s: 654 rss: 51Mb L: 711/5385
#13374\tDONE   cov: 1189 ft: 5725 corp: 202/180Kb lim: 5385 exec/s: 636 rss: 51Mb
Done 13374 runs in 21 second(s)
stat::number_of_executed_units: 13374
stat::average_exec_per_sec:     636
stat::new_units_added:          380
stat::slowest_unit_time_sec:    0
stat::peak_rss_mb:              51
"""


def test_campaign_reads_libfuzzer_figures() -> None:
    assert parse(LIBFUZZER_LOG) == {
        "executions": 13374,
        "exec_per_s": 636,
        "new_units": 380,
        "peak_rss_mb": 51,
        "cov": 1189,
        "ft": 5725,
        "corpus_files": 202,
        "corpus_size": "180Kb",
    }
    assert parse("no figures")["executions"] == 0


def test_campaign_dictionary_escapes_what_libfuzzer_cannot_read_raw() -> None:
    assert dictionary_text([b"join", b'a"\\', b"\x00\xff"]) == (
        '"join"\n"a\\x22\\x5c"\n"\\x00\\xff"\n'
    )
