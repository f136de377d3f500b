"""Ordinary failures of the CLI: one line, a documented exit status, never a traceback.

Each case runs ``amcast`` as a subprocess against a scripted daemon (or none)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.cli.helpers import AMCAST, amcast, env
from tests.client.fakedaemon import FakeDaemon


def test_send_on_a_stalled_daemon_says_so_and_exits_3(sock: str) -> None:
    with FakeDaemon(sock, stall_after_hello=True):
        r = amcast("send", "-s", sock, "-g", "g", "--timeout", "1", "hello")
    line = r.one_error_line()
    assert r.code == 3 and "stalled" in line and r.out == ""  # never "sent 1 message(s)"


def test_send_wait_that_times_out_says_so_and_exits_3(sock: str) -> None:
    with FakeDaemon(sock, echo=False):  # accepts, never delivers
        r = amcast("send", "-s", sock, "-g", "g", "--wait", "--timeout", "1", "a", "b")
    line = r.one_error_line()
    assert r.code == 3 and "2 of 2 message(s) not delivered back within 1 s" in line


def test_send_prints_sent_only_once_confirmed(sock: str) -> None:
    with FakeDaemon(sock) as fake:
        r = amcast("send", "-s", sock, "-g", "g", "a", "b")
        assert r.code == 0 and r.out == "sent 2 message(s) via node 0\n" and r.err == ""
        assert any(f["t"] == "sync" for f in fake.received)


def test_send_wait_prints_positions(sock: str) -> None:
    with FakeDaemon(sock):
        r = amcast("send", "-s", sock, "-g", "g", "--wait", "a", "b")
    assert r.code == 0, r.err
    assert r.out.splitlines() == ["0\t0:0:0:0\tagreed\ta", "1\t0:0:0:1\tagreed\tb"]


def test_refused_lines_are_named_and_exit_1(sock: str) -> None:
    with FakeDaemon(sock, refuse=lambda f: "too_many_groups"
                    if b"bad" in f["payloads"] else None):
        r = amcast("send", "-s", sock, "-g", "g", stdin="one\nbad\n")
    line = r.one_error_line()  # both lines went in one frame, refused whole
    assert r.code == 1 and "refused 2 message(s) (line 1, 2): too_many_groups" in line


def test_a_line_over_the_size_limit_is_named_and_exits_1(sock: str) -> None:
    with FakeDaemon(sock, max_message_bytes=10):
        r = amcast("send", "-s", sock, "-g", "g", stdin="short\n" + "x" * 20 + "\n")
    line = r.one_error_line()
    assert r.code == 1 and "line 2 not sent" in line


def test_no_daemon_exits_2(sock: str) -> None:
    for args in (["send", "-s", sock, "-g", "g", "x"], ["listen", "-s", sock, "-g", "g"],
                 ["status", "-s", sock]):
        r = amcast(*args)
        line = r.one_error_line()
        assert r.code == 2 and "no amcastd listening" in line, args


def test_a_daemon_that_stops_under_listen_exits_2(sock: str) -> None:
    with FakeDaemon(sock) as fake:
        p = subprocess.Popen([*AMCAST, "listen", "-s", sock, "-g", "g"], env=env(),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert fake.joined.wait(30)
            assert amcast("send", "-s", sock, "-g", "g", "hi").code == 0
            fake.stop()  # after the delivery of "hi" (written before the send's confirmation)
            out, err = p.communicate(timeout=30)
        finally:
            p.kill()
    assert out.endswith("\thi\n")
    assert p.returncode == 2 and "Traceback" not in err
    assert err.strip().splitlines() == [
        "amcast: error: connection to amcastd ended: shutting_down: the daemon is stopping"]


def test_status_into_a_closed_pipe_exits_quietly(sock: str) -> None:
    with FakeDaemon(sock):
        r, w = os.pipe()
        os.close(r)  # the reader is gone before anything is written: EPIPE
        try:
            p = subprocess.run([*AMCAST, "status", "-s", sock, "--interval", "0", "--json"],
                               stdout=w, stderr=subprocess.PIPE, text=True, timeout=60,
                               env=env())
        finally:
            os.close(w)
    assert p.returncode == 141 and p.stderr == ""


def test_status_health_exit_statuses(sock: str) -> None:
    with FakeDaemon(sock, health={"ok": True, "problems": []}):
        r = amcast("status", "-s", sock, "--health")
        assert r.code == 0 and r.out.startswith("healthy: node 0") and r.err == ""
    with FakeDaemon(sock, health={"ok": False, "problems": ["send window stalled for 12 s",
                                                            "peer 2 silent"]}):
        r = amcast("status", "-s", sock, "--health")
        assert r.code == 1
        assert r.one_error_line() == ("unhealthy: node 0: send window stalled for 12 s "
                                      "(+1 more: amcast status --json)")
        r = amcast("status", "-s", sock, "--json", "--interval", "0")
        assert r.code == 0 and '"problems": ["send window stalled for 12 s"' in r.out
    with FakeDaemon(sock, stall_after_hello=True):
        r = amcast("status", "-s", sock, "--health", "--timeout", "0.5")
        assert r.code == 1 and "no answer within 0.5 s" in r.one_error_line()
    r = amcast("status", "-s", sock, "--health")
    assert r.code == 2 and r.one_error_line().startswith("unreachable: no amcastd listening")


def test_cluster_stop_without_a_cluster_exits_1(short_dir: Path) -> None:
    r = amcast("cluster", "stop", "--dir", str(short_dir / "missing"))
    line = r.one_error_line()
    assert r.code == 1 and "no cluster in" in line and "cluster.json not found" in line


def test_usage_errors_are_one_line_naming_the_help_and_exit_2() -> None:
    r = amcast("send")
    assert r.code == 2 and r.one_error_line() == (
        "amcast send: error: the following arguments are required: --group/-g "
        "(see amcast send --help)")


@pytest.mark.parametrize(("args", "says"), [
    (("cluster", "--nodes", "4,x"), "--nodes '4,x': want comma-separated whole numbers"),
    (("floor", "--nodes", "1"), "--nodes '1': every size must be at least 2"),
    (("failover", "--nodes", "2"), "at least 3 (a kill must leave a majority)"),
    (("scale", "--nodes", "1,4"), "--nodes '1,4': every size must be at least 2"),
    (("views", "--sizes", ","), "--sizes: no size given"),
    (("engine", "--rules", "stoto,nope"), "--rules 'stoto,nope': want some of"),
    (("engine", "--rules", ""), "--rules '': want some of"),
    (("floor", "--rate", "0"), "argument --rate: want a number above 0, not '0'"),
    (("cluster", "--duration", "-1"), "argument --duration: want a number above 0, not '-1'"),
    (("abuse", "--duration", "nan"), "argument --duration: want a number above 0, not 'nan'"),
    (("flood", "--nodes", "0"), "argument --nodes: want a whole number at least 1, not '0'"),
])
def test_a_bench_option_out_of_its_range_is_one_line_and_exits_2(
    args: tuple[str, ...], says: str,
) -> None:
    r = amcast("bench", *args)
    assert r.code == 2 and says in r.one_error_line(), r.err
