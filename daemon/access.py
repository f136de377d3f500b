"""Client access control: which local users may ``join`` and ``send`` to which groups.

Theory of operation (in the spirit of Spread's access-control modules; ``docs/api.md``,
Access control, is the user's view):

- *Identity.* The kernel tells the daemon who is at the other end of a unix socket:
  ``SO_PEERCRED`` gives the uid, gid and pid of the process that connected, at connect
  time; a client cannot lie about them. ``peer_identity`` reads them once per connection
  and resolves, best effort, the user name (``pwd``), the primary group's name and the
  uid's supplementary groups (``os.getgrouplist``, from the group database: a user
  added to a group needs no new login, one removed loses it at the next connection).
  Whatever cannot be resolved is ``None`` (or left out), and then only the numeric
  principals can match it.
- *Policy.* ``[access]`` (``AccessSection`` in ``amcast.daemon.config``) is an ordered
  list of rules. Each names group-name patterns (``fnmatch.fnmatchcase`` globs: ``*``,
  ``?``, ``[seq]``; ``*`` also matches dots) and, for each request, the principals it
  admits: ``user:NAME``, ``uid:N``, ``group:NAME``, ``gid:N`` (the primary group or a
  supplementary one), or ``*`` (anyone). The *first* rule with a pattern matching the
  group decides; a group no rule matches gets ``default`` (``allow`` unless configured,
  so no ``[access]`` section means exactly what the socket's permissions allow). uid 0
  is not special: root is admitted by a rule that names it (``uid:0``, ``user:root``,
  ``*``) like anyone else.
- A request names several groups: it is allowed only if every group is (``denied``
  lists the ones that are not; the API then refuses the whole frame with ``forbidden``).

Everything here is pure (no sockets, no logging) except ``peer_identity`` and
``resolve``, which read the socket option and the user and group databases. Decisions are
cached per group name (``AccessPolicy`` is immutable; a reload builds a new one), the
cache bounded by ``CACHE_GROUPS``.
"""

from __future__ import annotations

import contextlib
import fnmatch
import grp
import os
import pwd
import socket
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

REQUESTS = ("join", "send")
"""The requests access control decides; ``leave`` and ``status`` are always allowed."""
Request = Literal["join", "send"]
CACHE_GROUPS = 4096
"""Group names whose deciding rule is remembered (the cache starts over past this)."""
PRINCIPAL_KINDS = ("user", "uid", "group", "gid")
_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


@dataclass(frozen=True, slots=True)
class PeerIdentity:
    """Who connected: the kernel's uid, gid and pid, and the names resolved for them."""

    uid: int
    gid: int
    pid: int
    user: str | None = None
    """The uid's user name; ``None`` when the password database has no entry."""
    group: str | None = None
    """The primary gid's group name; ``None`` when the group database has none."""
    gids: frozenset[int] = frozenset()
    """The gid and the uid's supplementary groups."""
    group_names: frozenset[str] = frozenset()
    """The names of ``gids`` that resolve."""

    def info(self) -> dict[str, Any]:
        """What ``status`` shows of the client."""
        return {
            "uid": self.uid,
            "user": self.user,
            "gid": self.gid,
            "group": self.group,
            "pid": self.pid,
        }


def resolve(uid: int, gid: int, pid: int) -> PeerIdentity:
    """The identity of a peer with these credentials, names resolved best effort."""
    user: str | None
    try:
        user = pwd.getpwuid(uid).pw_name
    except (KeyError, OverflowError):
        user = None
    gids = {gid}
    if user is not None:
        with contextlib.suppress(OSError):
            gids.update(os.getgrouplist(user, gid))
    names: dict[int, str] = {}
    for g in gids:
        try:
            names[g] = grp.getgrgid(g).gr_name
        except (KeyError, OverflowError):
            continue
    return PeerIdentity(
        uid, gid, pid, user, names.get(gid), frozenset(gids), frozenset(names.values())
    )


class _HasSockopt(Protocol):
    def getsockopt(self, level: int, option: int, buflen: int) -> bytes: ...


def peer_identity(sock: _HasSockopt | None) -> PeerIdentity | None:
    """``SO_PEERCRED`` of a connected unix socket, resolved; ``None`` where the platform
    or the socket gives no credentials (then only ``*`` admits the client)."""
    option = getattr(socket, "SO_PEERCRED", None)
    if sock is None or option is None:
        return None
    try:
        pid, uid, gid = _UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, option, _UCRED.size))
    except (OSError, struct.error):
        return None
    if uid < 0 or gid < 0:  # Linux answers -1 for a socket without a peer's credentials
        return None
    return resolve(uid, gid, pid)


# ---- principals and rules ---------------------------------------------------------------


def parse_principal(text: str) -> tuple[str, str | int]:
    """``"user:alice"`` -> ``("user", "alice")``, ``"uid:0"`` -> ``("uid", 0)``, ``"*"`` ->
    ``("*", "*")``; ``ValueError`` saying what is accepted otherwise."""
    if text == "*":
        return ("*", "*")
    kind, sep, value = text.partition(":")
    if not sep or kind not in PRINCIPAL_KINDS or not value:
        raise ValueError(
            f"{text!r} is not a principal: write user:NAME, uid:N, group:NAME, gid:N or * (anyone)"
        )
    if kind in ("uid", "gid"):
        if not value.isdigit():
            raise ValueError(
                f"{text!r}: {kind} takes a number (user:NAME or group:NAME take a name)"
            )
        return (kind, int(value))
    return (kind, value)


@dataclass(frozen=True, slots=True)
class Principals:
    """Who a rule admits for one request."""

    anyone: bool = False
    users: frozenset[str] = frozenset()
    uids: frozenset[int] = frozenset()
    groups: frozenset[str] = frozenset()
    gids: frozenset[int] = frozenset()

    @classmethod
    def parse(cls, texts: Iterable[str]) -> Principals:
        found: dict[str, set[Any]] = {k: set() for k in PRINCIPAL_KINDS}
        anyone = False
        for text in texts:
            kind, value = parse_principal(text)
            if kind == "*":
                anyone = True
            else:
                found[kind].add(value)
        return cls(
            anyone,
            frozenset(found["user"]),
            frozenset(found["uid"]),
            frozenset(found["group"]),
            frozenset(found["gid"]),
        )

    def admits(self, who: PeerIdentity | None) -> bool:
        if self.anyone:
            return True
        if who is None:
            return False
        return (
            who.uid in self.uids
            or (who.user is not None and who.user in self.users)
            or who.gid in self.gids
            or not self.gids.isdisjoint(who.gids)
            or (who.group is not None and who.group in self.groups)
            or not self.groups.isdisjoint(who.group_names)
        )


@dataclass(frozen=True, slots=True)
class Rule:
    """Group-name patterns and who may join and send to the groups they match."""

    patterns: tuple[str, ...]
    join: Principals
    send: Principals

    def matches(self, group: str) -> bool:
        return any(fnmatch.fnmatchcase(group, p) for p in self.patterns)


class _RuleConfig(Protocol):
    """What ``AccessPolicy.from_config`` reads of one configured rule."""

    @property
    def groups(self) -> Sequence[str]: ...

    @property
    def join(self) -> Sequence[str]: ...

    @property
    def send(self) -> Sequence[str]: ...


class _AccessConfig(Protocol):
    @property
    def default(self) -> str: ...

    @property
    def rules(self) -> Sequence[_RuleConfig]: ...


class AccessPolicy:
    """The ordered rules and the default; immutable (a reload builds a new policy)."""

    __slots__ = ("_cache", "default_allows", "open", "rules")

    def __init__(self, rules: Sequence[Rule] = (), *, default_allows: bool = True) -> None:
        self.rules = tuple(rules)
        self.default_allows = default_allows
        self.open = default_allows and not self.rules
        """Every request is allowed (no rule, default allow): the API skips the checks."""
        self._cache: dict[str, Rule | None] = {}

    @classmethod
    def from_config(cls, section: _AccessConfig) -> AccessPolicy:
        rules = [
            Rule(tuple(r.groups), Principals.parse(r.join), Principals.parse(r.send))
            for r in section.rules
        ]
        return cls(rules, default_allows=section.default == "allow")

    def rule_for(self, group: str) -> Rule | None:
        """The first rule matching ``group`` (``None``: the default decides)."""
        cache = self._cache
        try:
            return cache[group]
        except KeyError:
            pass
        found = next((r for r in self.rules if r.matches(group)), None)
        if len(cache) >= CACHE_GROUPS:
            cache.clear()
        cache[group] = found
        return found

    def allows(self, who: PeerIdentity | None, request: Request, group: str) -> bool:
        if self.open:
            return True
        rule = self.rule_for(group)
        if rule is None:
            return self.default_allows
        return (rule.join if request == "join" else rule.send).admits(who)

    def denied(
        self, who: PeerIdentity | None, request: Request, groups: Iterable[str]
    ) -> list[str]:
        """The groups of a request that ``who`` may not ``request`` (empty: allowed)."""
        if self.open:
            return []
        return [g for g in groups if not self.allows(who, request, g)]
