"""Access control (``amcast.daemon.access``): principals, rules, first match, the default,
identity resolution, and the ``[access]`` config section's validation. No sockets but a
socketpair (``SO_PEERCRED`` of this very process)."""

from __future__ import annotations

import os
import pwd
import socket
from pathlib import Path

import pytest
from amcast.daemon.access import (
    CACHE_GROUPS,
    AccessPolicy,
    PeerIdentity,
    Principals,
    Rule,
    parse_principal,
    peer_identity,
    resolve,
)
from amcast.daemon.config import AccessSection, DaemonConfig, load_config
from amcast.protocols.errors import ConfigurationError

ALICE = PeerIdentity(
    1001, 100, 42, "alice", "users", frozenset({100, 2001}), frozenset({"users", "readers"})
)
BOB = PeerIdentity(
    1002, 100, 43, "bob", "users", frozenset({100, 2002}), frozenset({"users", "writers"})
)
ROOT = PeerIdentity(0, 0, 1, "root", "root", frozenset({0}), frozenset({"root"}))
NAMELESS = PeerIdentity(4242, 4242, 7)  # no passwd or group entry: numbers only


def policy(*rules: dict[str, object], default: str = "allow") -> AccessPolicy:
    return AccessPolicy.from_config(
        AccessSection.model_validate({"default": default, "rules": list(rules)})
    )


def test_principals_parse_and_reject_with_what_is_accepted() -> None:
    assert parse_principal("user:alice") == ("user", "alice")
    assert parse_principal("uid:0") == ("uid", 0)
    assert parse_principal("group:amcast-writers") == ("group", "amcast-writers")
    assert parse_principal("gid:100") == ("gid", 100)
    assert parse_principal("*") == ("*", "*")
    for bad in ("alice", "usr:alice", "user:", "uid:root", "gid:-1", ""):
        with pytest.raises(ValueError, match=r"user:NAME|takes a number"):
            parse_principal(bad)


@pytest.mark.parametrize(
    ("principal", "admitted"),
    [
        ("user:alice", {"alice"}),
        ("uid:1002", {"bob"}),
        ("group:readers", {"alice"}),  # a supplementary group, by name
        ("gid:2002", {"bob"}),  # a supplementary group, by number
        ("group:users", {"alice", "bob"}),  # the primary group, by name
        ("gid:4242", {"nameless"}),  # a primary gid with no name
        ("uid:4242", {"nameless"}),
        ("user:root", {"root"}),
        ("*", {"alice", "bob", "root", "nameless", "unknown"}),
    ],
)
def test_who_each_principal_admits(principal: str, admitted: set[str]) -> None:
    p = Principals.parse([principal])
    people = {"alice": ALICE, "bob": BOB, "root": ROOT, "nameless": NAMELESS, "unknown": None}
    assert {name for name, who in people.items() if p.admits(who)} == admitted


def test_first_matching_rule_decides_and_the_default_covers_the_rest() -> None:
    p = policy(
        {"groups": "orders.audit", "join": ["user:bob"], "send": []},
        {"groups": "orders.*", "join": ["user:alice", "group:readers"], "send": ["group:writers"]},
        {"groups": ["public", "public.*"], "join": ["*"], "send": ["*"]},
        default="deny",
    )
    assert p.allows(ALICE, "join", "orders.eu") and not p.allows(ALICE, "send", "orders.eu")
    assert p.allows(BOB, "send", "orders.eu") and not p.allows(BOB, "join", "orders.eu")
    # the earlier, narrower rule wins over orders.*: alice may not join orders.audit
    assert not p.allows(ALICE, "join", "orders.audit") and p.allows(BOB, "join", "orders.audit")
    assert not p.allows(BOB, "send", "orders.audit")  # [] = nobody
    assert p.allows(None, "send", "public") and p.allows(NAMELESS, "join", "public.news")
    assert not p.allows(ALICE, "join", "private")  # no rule: default deny
    assert not p.allows(ROOT, "join", "orders.eu")  # root is not special
    assert not p.allows(ALICE, "join", "Orders.eu")  # case-sensitive
    assert p.allows(ALICE, "join", "orders.eu.sub")  # * matches dots too


def test_a_request_is_denied_the_groups_that_are_denied_only() -> None:
    p = policy({"groups": "secret*", "join": [], "send": ["uid:0"]})
    assert p.denied(ALICE, "send", ["a", "secret", "b", "secret2"]) == ["secret", "secret2"]
    assert p.denied(ROOT, "send", ["a", "secret"]) == []
    assert p.denied(ROOT, "join", ["secret"]) == ["secret"]


def test_no_rules_and_default_allow_is_open_and_default_deny_denies_everyone() -> None:
    assert AccessPolicy().open and policy().open
    assert AccessPolicy().denied(None, "join", ["x"]) == []
    closed = policy(default="deny")
    assert not closed.open
    for who in (ALICE, ROOT, None):
        assert closed.denied(who, "send", ["x", "y"]) == ["x", "y"]


def test_the_rule_cache_is_bounded_and_keeps_deciding_the_same() -> None:
    p = AccessPolicy(
        [Rule(("g*",), Principals.parse(["user:alice"]), Principals())], default_allows=False
    )
    for i in range(CACHE_GROUPS + 10):
        assert p.allows(ALICE, "join", f"g{i}") and not p.allows(ALICE, "send", f"g{i}")
        assert not p.allows(ALICE, "join", f"h{i}")
    assert len(p._cache) <= CACHE_GROUPS


def test_the_identity_of_this_process_from_so_peercred() -> None:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with a, b:
        who = peer_identity(a)
    assert who is not None
    assert (who.uid, who.gid, who.pid) == (os.getuid(), os.getgid(), os.getpid())
    assert who.user == pwd.getpwuid(os.getuid()).pw_name
    assert os.getgid() in who.gids and who.group in who.group_names
    assert who.info() == {
        "uid": os.getuid(),
        "user": who.user,
        "gid": os.getgid(),
        "group": who.group,
        "pid": os.getpid(),
    }


def test_names_that_do_not_resolve_are_none_and_credentials_that_cannot_be_read() -> None:
    unknown = resolve(2**31 - 3, 2**31 - 3, 1)  # almost certainly no such user or group
    assert (unknown.user, unknown.group) == (None, None)
    assert unknown.gids == frozenset({2**31 - 3}) and unknown.group_names == frozenset()
    assert peer_identity(None) is None
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        assert peer_identity(udp) is None  # no peer credentials on this socket


def test_the_default_config_has_no_rules_and_allows() -> None:
    assert DaemonConfig().access == AccessSection()
    assert AccessPolicy.from_config(DaemonConfig().access).open


@pytest.mark.parametrize(
    ("toml", "needle"),
    [
        (
            'rules = [{groups = "o.*", join = ["usr:alice"], send = []}]',
            "access.rules.0.join: 'usr:alice' is not a principal",
        ),
        (
            'rules = [{groups = "o.*", join = [], send = ["gid:staff"]}]',
            "access.rules.0.send: 'gid:staff': gid takes a number",
        ),
        ('rules = [{groups = "o.*", send = []}]', "access.rules.0.join: Field required"),
        (
            'rules = [{groups = "", join = [], send = []}]',
            "access.rules.0.groups: a group pattern is empty",
        ),
        ("rules = [{groups = [], join = [], send = []}]", "access.rules.0.groups"),
        (
            'rules = [{groups = "x", join = [], send = [], watch = []}]',
            "unknown key access.rules.0.watch",
        ),
        ('default = "maybe"', "access.default"),
    ],
)
def test_bad_rules_are_refused_naming_the_key(tmp_path: Path, toml: str, needle: str) -> None:
    path = tmp_path / "a.toml"
    path.write_text(f"[access]\n{toml}\n")
    with pytest.raises(ConfigurationError) as err:
        load_config(path)
    assert needle in str(err.value)


def test_rules_from_toml_array_of_tables_and_from_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "a.toml"
    path.write_text(
        '[access]\ndefault = "deny"\n[[access.rules]]\ngroups = "a.*"\n'
        'join = ["*"]\nsend = ["user:alice"]\n'
    )
    p = AccessPolicy.from_config(load_config(path).access)
    assert p.allows(BOB, "join", "a.b") and not p.allows(BOB, "send", "a.b")
    env = {"AMCAST_ACCESS__RULES": '[{"groups": "b", "join": ["uid:1002"], "send": []}]'}
    p = AccessPolicy.from_config(load_config(None, env).access)
    assert p.allows(BOB, "join", "b") and not p.allows(ALICE, "join", "b")
    assert p.allows(ALICE, "join", "c")  # default allow
