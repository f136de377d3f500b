"""Group membership of the lightweight groups: who (node, client) is in which group.

Theory of operation. Group tables are *agreed*: every daemon applies the same changes
at the same place of the total order, so every daemon has the same table there.

- A client's ``join``/``leave`` becomes a control envelope (``socket_protocol``:
  ``encode_join``/``encode_leave``; ``encode_gone`` when it disconnects) that its daemon
  multicasts ``agreed``, tagged with the view it was submitted in. Every daemon applies
  it where it is delivered (``GroupTable.apply``), *if* that is in the same view: a
  control that slipped into a later view is ignored everywhere, the sender's snapshot of
  that view covers it. The client's daemon changes the client's routing there too, so
  its own join/leave notices bracket exactly the group messages it receives, and answers
  the request (``groups`` frame) then: one ordering round.
- At a view change, the entries of daemons that left, were excluded or joined (a
  restarted daemon joins again) are removed at position 0 of the new view, before
  anything delivered in it (cause ``view``). A daemon that joins a view forgets its
  table and is *incomplete*: it sends no notice until it has every member's snapshot.
- Every daemon multicasts a snapshot of its own clients at the start of every view
  (``encode_snapshot``, in parts when large): it replaces the sender's entries where it
  is delivered (cause ``snapshot``). A daemon that joined the view routes its clients as
  they are at the view's start (they receive the group's messages from position 0); the
  others learn of them from the snapshot. Requests made while the daemon is in no
  primary view send nothing: the next snapshot carries them and answers them.

``Groups`` is the daemon's side of it (requests, routing, notices, replies), pure: it
writes through an ``Output`` (submit a control envelope, send a frame to a client) and
the routing index ``ApiServer.members_of`` it is given. Without agreed membership (a
test's fake engine) a request takes effect at once, as if delivered.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from .. import socket_protocol as sp

Member = tuple[int, int, str]
"""(node, client, name)."""
CAUSES = ("join", "leave", "disconnect", "view", "snapshot")


@dataclass(frozen=True, slots=True)
class Change:
    """The net change of one group by one operation."""

    group: str
    joined: tuple[Member, ...]
    left: tuple[Member, ...]
    cause: str


@dataclass(slots=True)
class Applied:
    """What applying one control did: its changes, whether it was ignored (``stale``:
    delivered in another view than its own) and whether the table became complete."""

    changes: list[Change] = field(default_factory=list)
    stale: bool = False
    completed: bool = False


class GroupTable:
    """The agreed table: group -> {(node, client): name}; identical at every daemon at
    the same place of the total order (once ``complete``)."""

    def __init__(self) -> None:
        self._groups: dict[str, dict[tuple[int, int], str]] = {}
        self._of: dict[tuple[int, int], set[str]] = {}
        self.view = 0
        self.complete = True
        self.awaiting: set[int] = set()
        """Members whose snapshot of ``view`` was not delivered yet."""

    # ---- reading ---------------------------------------------------------------------
    def members(self, group: str) -> list[Member]:
        return sorted((n, c, name) for (n, c), name in self._groups.get(group, {}).items())

    def groups_of(self, node: int, client: int) -> set[str]:
        return set(self._of.get((node, client), ()))

    def groups(self) -> list[str]:
        return sorted(self._groups)

    def entries(self) -> int:
        return sum(len(m) for m in self._groups.values())

    # ---- changing --------------------------------------------------------------------
    def _set(self, node: int, client: int, name: str, groups: Iterable[str],
             acc: dict[str, tuple[set[Member], set[Member]]]) -> None:
        key = (node, client)
        have = self._of.get(key, set())
        want = set(groups)
        for g in want - have:
            self._groups.setdefault(g, {})[key] = name
            joined, left = acc.setdefault(g, (set(), set()))
            if (node, client, name) in left:
                left.discard((node, client, name))
            else:
                joined.add((node, client, name))
        for g in have - want:
            members = self._groups[g]
            old = members.pop(key)
            if not members:
                del self._groups[g]
            joined, left = acc.setdefault(g, (set(), set()))
            if (node, client, old) in joined:
                joined.discard((node, client, old))
            else:
                left.add((node, client, old))
        if want:
            self._of[key] = want
        else:
            self._of.pop(key, None)

    def _name(self, node: int, client: int) -> str:
        for g in self._of.get((node, client), ()):
            return self._groups[g][(node, client)]
        return ""

    @staticmethod
    def _changes(acc: dict[str, tuple[set[Member], set[Member]]], cause: str) -> list[Change]:
        return [Change(g, tuple(sorted(j)), tuple(sorted(lft)), cause)
                for g, (j, lft) in sorted(acc.items()) if j or lft]

    def view_change(self, view: int, members: Iterable[int], departed: Iterable[int],
                    joining: bool) -> list[Change]:
        """A new view: ``joining`` (this daemon joined it) forgets everything and waits
        for every member's snapshot; otherwise the entries of ``departed`` daemons and of
        daemons not in ``members`` go (cause ``view``)."""
        self.view = view
        keep = set(members)
        self.awaiting = set(keep)
        if joining:
            self._groups.clear()
            self._of.clear()
            self.complete = False
            return []
        gone = set(departed)
        acc: dict[str, tuple[set[Member], set[Member]]] = {}
        for node, client in [k for k in self._of if k[0] in gone or k[0] not in keep]:
            self._set(node, client, "", (), acc)
        return self._changes(acc, "view")

    def apply(self, sender: int, control: sp.Control, view: int) -> Applied:
        """Apply ``sender``'s control delivered in ``view``."""
        out = Applied()
        if control.view != view or view != self.view:
            out.stale = True
            return out
        acc: dict[str, tuple[set[Member], set[Member]]] = {}
        kind = control.kind
        if kind == "join":
            have = self.groups_of(sender, control.client)
            self._set(sender, control.client, control.name, have | set(control.groups), acc)
            cause = "join"
        elif kind == "leave":
            have = self.groups_of(sender, control.client)
            name = self._name(sender, control.client)
            self._set(sender, control.client, name, have - set(control.groups), acc)
            cause = "leave"
        elif kind == "gone":
            self._set(sender, control.client, "", (), acc)
            cause = "disconnect"
        else:
            cause = "snapshot"
            listed = {e.client for e in control.entries}
            if control.part == 0:
                for node, client in [k for k in self._of if k[0] == sender]:
                    if client not in listed:
                        self._set(node, client, "", (), acc)
            for e in control.entries:
                if control.part == 0:
                    self._set(sender, e.client, e.name, e.groups, acc)
                else:
                    have = self.groups_of(sender, e.client)
                    self._set(sender, e.client, e.name, have | set(e.groups), acc)
            if control.final and sender in self.awaiting:
                self.awaiting.discard(sender)
                if not self.awaiting and not self.complete:
                    self.complete = out.completed = True
        out.changes = self._changes(acc, cause)
        return out


class Output(Protocol):
    """Where ``Groups`` writes."""

    def submit_control(self, envelope: bytes) -> None: ...

    def to_client(self, client: int, frame: dict[str, Any]) -> None: ...


@dataclass(slots=True)
class Request:
    req: int
    ref: Any
    kind: str
    groups: tuple[str, ...]
    watch: bool
    at: float = 0.0
    answered: bool = False


@dataclass(slots=True)
class LocalClient:
    name: str
    wanted: set[str] = field(default_factory=set)
    """The groups it asked for (requests applied or not)."""
    joined: set[str] = field(default_factory=set)
    """The groups it receives (routing)."""
    watching: set[str] = field(default_factory=set)
    next_req: int = 0
    pending: deque[Request] = field(default_factory=deque)


def member_list(members: Iterable[Member]) -> list[list[Any]]:
    return [[n, c, name] for n, c, name in members]


class Groups:
    """This daemon's side of group membership (see the module docstring)."""

    def __init__(self, node_id: int, routing: dict[str, set[int]], out: Output, *,
                 agreed: bool, part_bytes: int = 32768) -> None:
        self.node_id = node_id
        self.routing = routing
        self.out = out
        self.agreed = agreed
        self.part_bytes = part_bytes
        self.table = GroupTable()
        if agreed:
            self.table.complete = False  # until the first view's snapshots
        self.clients: dict[int, LocalClient] = {}
        self.primary = not agreed
        self.view = 0
        self.applied = 0
        self.stale = 0
        self._noticed: set[tuple[int, str]] = set()

    # ---- local clients -------------------------------------------------------------
    def client(self, cid: int, name: str = "") -> LocalClient:
        c = self.clients.get(cid)
        if c is None:
            c = self.clients[cid] = LocalClient(name[: sp.MAX_NAME_CHARS])
        return c

    def wanted(self, cid: int) -> set[str]:
        c = self.clients.get(cid)
        return set() if c is None else c.wanted

    def joined(self, cid: int) -> set[str]:
        c = self.clients.get(cid)
        return set() if c is None else c.joined

    def request(self, cid: int, name: str, kind: str, groups: list[str], ref: Any,
                watch: bool, *, view: int = 0, position: int | None = 0,
                now: float = 0.0) -> None:
        """A ``join``/``leave`` of local client ``cid``; the reply comes when it takes
        effect (at once without agreed membership), or from ``expire``."""
        if not self.agreed:
            self.view = self.table.view = view
        c = self.client(cid, name)
        if kind == "join":
            c.wanted |= set(groups)
            if watch:
                c.watching |= set(groups)
        else:
            c.wanted -= set(groups)
        c.next_req += 1
        req = c.next_req
        c.pending.append(Request(req, ref, kind, tuple(groups), watch, now))
        if kind == "join":
            envelope = sp.encode_join(self.view, cid, req, c.name, list(groups))
        else:
            envelope = sp.encode_leave(self.view, cid, req, list(groups))
        if not self.agreed:
            self.table.view = self.view = view
            control = sp.decode_control(envelope)
            assert control is not None
            self._apply(self.node_id, control, view, position)
        elif self.primary:
            self.out.submit_control(envelope)
        # else: the next view's snapshot carries it

    def disconnect(self, cid: int, *, view: int = 0, position: int | None = 0) -> None:
        if not self.agreed:
            self.view = self.table.view = view
        c = self.clients.pop(cid, None)
        if c is None:
            return
        for g in c.joined:
            self._route(cid, g, False)
        if not c.wanted and not c.joined and not self.table.groups_of(self.node_id, cid):
            return
        envelope = sp.encode_gone(self.view, cid)
        if not self.agreed:
            control = sp.decode_control(envelope)
            assert control is not None
            self._apply(self.node_id, control, view, position)
        elif self.primary:
            self.out.submit_control(envelope)

    def _route(self, cid: int, group: str, on: bool) -> None:
        members = self.routing.get(group)
        if on:
            if members is None:
                self.routing[group] = {cid}
            else:
                members.add(cid)
        elif members is not None:
            members.discard(cid)
            if not members:
                del self.routing[group]

    def _set_joined(self, cid: int, groups: Iterable[str]) -> None:
        c = self.clients.get(cid)
        if c is None:
            return
        want = set(groups)
        for g in c.joined - want:
            self._route(cid, g, False)
        for g in want - c.joined:
            self._route(cid, g, True)
        c.joined = want

    # ---- views ---------------------------------------------------------------------
    def view_installed(self, view: int, members: Iterable[int], joined: Iterable[int],
                       left: Iterable[int], excluded: Iterable[int]) -> None:
        if not self.agreed:  # a fake engine's views: joins stay instant
            self.view = self.table.view = view
            return
        members = list(members)
        joined = set(joined)
        joining = self.node_id in joined or self.view == 0
        self.view = view
        self.primary = True
        changes = self.table.view_change(view, members, joined | set(left) | set(excluded),
                                         joining)
        if joining:  # our clients are members from the start of the view
            for cid, c in self.clients.items():
                self._set_joined(cid, c.wanted)
        self._notify(changes, view, 0)
        for part in self.snapshot(view):
            self.out.submit_control(part)

    def quorum_lost(self) -> None:
        self.primary = False

    def snapshot(self, view: int) -> list[bytes]:
        """This daemon's clients as control envelopes (parts of at most ``part_bytes``)."""
        entries = [sp.SnapEntry(cid, c.next_req, c.name, tuple(sorted(c.wanted)))
                   for cid, c in sorted(self.clients.items()) if c.wanted or c.pending]
        parts: list[list[sp.SnapEntry]] = [[]]
        size = 0
        for e in entries:
            cost = 32 + len(e.name.encode()) + sum(len(g.encode()) + 5 for g in e.groups)
            if parts[-1] and size + cost > self.part_bytes:
                parts.append([])
                size = 0
            parts[-1].append(e)
            size += cost
        return [sp.encode_snapshot(view, i, i == len(parts) - 1, p)
                for i, p in enumerate(parts)]

    # ---- deliveries ----------------------------------------------------------------
    def delivered(self, sender: int, control: sp.Control, view: int,
                  position: int | None) -> None:
        """A control envelope delivered in ``view`` before message ``position``."""
        self._apply(sender, control, view, position)

    def _apply(self, sender: int, control: sp.Control, view: int,
               position: int | None) -> None:
        res = self.table.apply(sender, control, view)
        if res.stale:
            self.stale += 1
            return
        self.applied += 1
        mine = sender == self.node_id
        resolved: list[tuple[int, int]] = []  # (client, last request answered)
        if mine:
            if control.kind == "join" or control.kind == "leave":
                self._set_joined(control.client,
                                 self.table.groups_of(self.node_id, control.client))
                resolved.append((control.client, control.req))
            elif control.kind == "snap":
                for e in control.entries:
                    self._set_joined(e.client, e.groups)
                    resolved.append((e.client, e.req))
        self._noticed.clear()
        self._notify(res.changes, view, position)
        if res.completed:
            self._full_lists(view, position)
        for cid, req in resolved:
            self._resolve(cid, req, control.kind, view, position)

    def _frame(self, group: str, joined: Iterable[Member], left: Iterable[Member],
               cause: str, view: int, position: int | None) -> dict[str, Any]:
        return {"t": "members", "group": group,
                "members": member_list(self.table.members(group)),
                "joined": member_list(joined), "left": member_list(left), "cause": cause,
                "view": view, "position": position}

    def _notify(self, changes: list[Change], view: int, position: int | None) -> None:
        if not self.table.complete:
            return
        for ch in changes:
            g = ch.group
            to = {cid for cid in self.routing.get(g, ())
                  if g in self.clients[cid].watching}
            to |= {m[1] for m in ch.left if m[0] == self.node_id and m[1] in self.clients
                   and g in self.clients[m[1]].watching}
            if not to:
                continue
            frame = self._frame(g, ch.joined, ch.left, ch.cause, view, position)
            for cid in sorted(to):
                self.out.to_client(cid, frame)
                self._noticed.add((cid, g))

    def _full_lists(self, view: int, position: int | None) -> None:
        """The table just became complete: every watcher gets its groups' lists."""
        for cid, c in sorted(self.clients.items()):
            for g in sorted(c.watching & c.joined):
                if (cid, g) not in self._noticed:
                    self.out.to_client(cid, self._frame(g, (), (), "snapshot", view, position))
                    self._noticed.add((cid, g))

    def _resolve(self, cid: int, req: int, kind: str, view: int,
                 position: int | None) -> None:
        c = self.clients.get(cid)
        if c is None:
            return
        cause = "snapshot" if kind == "snap" else kind
        while c.pending and c.pending[0].req <= req:
            r = c.pending.popleft()
            if r.kind == "join" and r.watch and self.table.complete:
                for g in r.groups:  # already a member: no change, but it asked for the list
                    if g in c.joined and (cid, g) not in self._noticed:
                        self.out.to_client(cid, self._frame(g, (), (), cause, view, position))
                        self._noticed.add((cid, g))
            if r.kind == "leave":
                c.watching -= set(r.groups) - c.wanted
            if not r.answered:
                self._reply(cid, c, r, pending=False)

    def _reply(self, cid: int, c: LocalClient, r: Request, *, pending: bool) -> None:
        reply: dict[str, Any] = {"t": "groups", "groups": sorted(c.joined)}
        if pending:
            reply["pending"] = True
        if r.ref is not None:
            reply["id"] = r.ref
        r.answered = True
        self.out.to_client(cid, reply)

    def expire(self, now: float, after_s: float) -> None:
        """Answer requests waiting for ``after_s`` (the daemon cannot order: stalled, or
        in no primary view) with ``"pending": true``; they still take effect when
        ordered (or with the next snapshot), without another reply."""
        for cid, c in self.clients.items():
            for r in c.pending:
                if not r.answered and now - r.at >= after_s:
                    self._reply(cid, c, r, pending=True)

    # ---- status --------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        t = self.table
        return {
            "agreed": self.agreed, "complete": t.complete, "view": t.view,
            "groups": len(t.groups()), "members": t.entries(),
            "awaiting_snapshots": sorted(t.awaiting) if not t.complete else [],
            "pending_requests": sum(len(c.pending) for c in self.clients.values()),
            "watchers": sum(1 for c in self.clients.values() if c.watching),
            "controls_applied": self.applied, "controls_stale": self.stale,
        }
