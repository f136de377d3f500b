"""Datagrams refused because the sender is configured otherwise (``daemon.refusals``):
one warning a minute per reason with what to check, and the recent counts that the
health problem of a daemon cut off that way names.

The unit tests feed ``RefusalWatch`` counters; the others run three daemons in one event
loop, one of them with another key file, insecure, or with another ordering rule (a
join the group refuses: its health says why first).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from amcast.daemon.refusals import CAUSES, LOG_EVERY_S, RECENT_S, RefusalWatch
from amcast.daemon.runner import Daemon

from amcast.keygen import create
from tests.daemon.daemon_helpers import group_config, loopback_group, running, until


def test_one_warning_a_minute_per_reason_with_the_count_since_the_last() -> None:
    watch = RefusalWatch()
    assert watch.update({"auth_failed": 0, "replayed": 9}, 0.0) == []  # weather: no word
    first = watch.update({"auth_failed": 5}, 1.0)
    assert [(n.reason, n.count, n.cause) for n in first] == [
        ("auth_failed", 5, CAUSES["auth_failed"])]
    assert watch.update({"auth_failed": 50}, 2.0) == []  # within the minute: counted only
    assert watch.update({"auth_failed": 50, "unknown_key": 1}, 3.0)[0].reason == "unknown_key"
    later = watch.update({"auth_failed": 70, "unknown_key": 1}, 1.0 + LOG_EVERY_S)
    assert [(n.reason, n.count) for n in later] == [("auth_failed", 65)]
    assert watch.update({"auth_failed": 70, "unknown_key": 1}, 1.0 + 3 * LOG_EVERY_S) == []


def test_the_recent_counts_cover_the_last_seconds_only() -> None:
    watch = RefusalWatch()
    watch.update({"auth_failed": 10}, 0.0)
    watch.update({"auth_failed": 30, "bad_version": 2}, 5.0)
    assert watch.recent() == {"auth_failed": 30, "bad_version": 2}
    watch.update({"auth_failed": 31, "bad_version": 2}, RECENT_S + 1.0)
    assert watch.recent() == {"auth_failed": 21, "bad_version": 2}
    watch.update({"auth_failed": 31, "bad_version": 2}, 2 * RECENT_S + 6.0)
    assert watch.recent() == {}
    text = RefusalWatch.describe({"bad_version": 2, "auth_failed": 21})
    assert text.startswith("21 auth_failed (they fail authentication: a key file other")
    assert "; 2 bad_version (they speak another wire version" in text


@pytest.mark.parametrize(("odd", "here", "there"), [
    ("another key", "auth_failed", "auth_failed"),
    ("insecure", "auth_unexpected", "auth_missing"),
])
async def test_a_daemon_cut_off_by_its_configuration_names_the_cause(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], odd: str, here: str, there: str,
) -> None:
    key, other = tmp_path / "authkey", tmp_path / "otherkey"
    create(key)
    create(other)
    sealed = {"security": {"key_file": str(key)}}
    odd_one = ({"security": {"key_file": str(other)}} if odd == "another key"
               else {"protocol": {"insecure": True}})
    group = loopback_group()
    daemons = [Daemon(group_config(tmp_path, n, group, **(odd_one if n == 2 else sealed)),
                      environ={}) for n in range(3)]
    loop = asyncio.get_running_loop()
    two = daemons[2]

    def settled() -> bool:
        problems = two.health()["problems"]
        return (all(d.primary and d.members == [0, 1] for d in daemons[:2])
                and bool(problems) and problems[0].startswith("datagrams arrive but are "
                                                             "refused"))

    async with running(daemons):
        deadline = loop.time() + 30  # a few seconds; a loaded CI machine more
        while not settled() and loop.time() < deadline:
            await asyncio.sleep(0.1)
        problems = two.health()["problems"]
        assert settled(), problems
        assert f" {here} (they {CAUSES[here]})" in problems[0], problems
        assert problems[0].endswith(f"in the last {RECENT_S:g} s")
        assert not [p for p in problems if p.startswith("heard nothing")], problems
        assert all(d.health()["ok"] for d in daemons[:2])  # they order
        assert daemons[0].counters.drops[there] > 0
    warned = [ln for ln in capsys.readouterr().out.splitlines()
              if "datagrams refused: the sender and this daemon are not configured" in ln]
    assert any("node=2 " in ln and f"reason={here}" in ln for ln in warned), warned
    assert any("node=0 " in ln and f"reason={there}" in ln for ln in warned), warned
    assert sum("node=0 " in ln for ln in warned) == 1, warned  # once a minute at most


async def test_a_daemon_the_group_refuses_says_why_first(tmp_path: Path) -> None:
    """Another ordering rule than the group's: the coordinator refuses its join with the
    setting named (``JoinRefused``); its health says so before anything else."""
    key = tmp_path / "authkey"
    create(key)
    sealed = {"key_file": str(key)}
    group = loopback_group()
    daemons = [Daemon(group_config(tmp_path, n, group, security=sealed,
                                   **({"protocol": {"rule": "lex"}} if n == 2 else {})),
                      environ={}) for n in range(3)]
    loop = asyncio.get_running_loop()
    two = daemons[2]
    async with running(daemons):
        deadline = loop.time() + 30
        while ((two.join_refused is None or not all(d.primary for d in daemons[:2]))
               and loop.time() < deadline):
            await asyncio.sleep(0.1)
        problems = two.health()["problems"]
        assert problems and problems[0].startswith(
            "the group refused this daemon's join: config_mismatch: rule: "), problems
        assert "rule: 'gltoto' (coordinator), 'lex' (refused daemon)" in problems[0], problems
        assert not two.primary and all(d.primary for d in daemons[:2])


async def test_a_refused_duplicate_id_daemon_does_not_wedge_the_next_view_change(
    tmp_path: Path,
) -> None:
    """The sequence an operator met: a fifth daemon started with node 2's id (its own
    state dir, socket and logs) is refused and stopped; then node 3 stops. The view
    change completes without node 3 (before, the impostor's incarnation had replaced
    node 2's at the coordinator, whose view change then waited for ever), and the real
    node 2 warns that another daemon claimed its id, healthy all the same."""
    key = tmp_path / "authkey"
    create(key)
    sealed = {"key_file": str(key)}
    group = loopback_group()
    members = (0, 1, 2, 3)
    daemons = [Daemon(group_config(tmp_path, n, group, members=members, security=sealed),
                      environ={}) for n in members]
    impostor_config = group_config(tmp_path / "impostor", 2, group, members=members,
                                   security=sealed)

    async with running(daemons):
        await until(lambda: all(d.primary and d.members == list(members) for d in daemons),
                    "the first view")
        impostor = Daemon(impostor_config, environ={})
        async with running([impostor]):
            await until(lambda: impostor.join_refused is not None, "the refusal")
            assert impostor.join_refused.startswith("duplicate_node_id"), impostor.join_refused
        three = daemons[3]
        three.request_stop("test")
        await until(lambda: all(d.members == [0, 1, 2] and d.health()["ok"]
                                for d in daemons[:3]), "the view without node 3")
        assert all(d.counters.drops.get("stale_incarnation", 0) == 0 for d in daemons[:3])
        warnings = daemons[2].health()["warnings"]
        assert warnings and warnings[0].startswith("another daemon claims this node's id 2")
