"""One member's federation layer: Skeen's timestamps over ordered clusters (sans-IO).

Theory of operation (seed 003, Scalable Atomic Multicast, section 5.2: Skeen's
algorithm with one "process" per destination; docs/multigroup.md, "In the daemon: the
federation layer"). Each cluster is a replicated state machine: its members apply the
federation records its own total order delivers (safe service), in order, to a
``state.ClusterState``, so they all compute the same clock, keys and deliveries at the
same point of the order, and a member's crash loses nothing the others do not hold.
What a member does *besides* that (send datagrams, retransmit, remember who to
acknowledge) is its own and is rebuilt from the state when needed.

1. ``multicast``: m gets the id ``(cluster, node, seq)``; the sender sends ``DgSubmit``
   to one member of every other destination cluster (another member on each
   retransmission, until that cluster acknowledges holding the Submit) and, if its own
   cluster is in Dst(m), orders ``RecSubmit`` itself.
2. A member that receives ``DgSubmit`` orders ``RecSubmit`` in its cluster (safe). The
   first ``RecSubmit`` of m the order delivers gives it ``lts = ++clock``; one member of
   the cluster, *designated* by m's sequence number in the view, sends
   ``DgTimestamp(m, own cluster, lts)`` at once to one member of each other cluster of
   Dst(m) (the one m's Submit went to first); every member holds the same timestamp
   (replicated state) and the others are backups: each sends it only after
   ``retransmit_s``, first to that same member (which ignores a copy of a record it has
   in flight), then to the next ones, until that cluster acknowledges that its order
   holds the timestamp. A crashed designated member costs ``retransmit_s``, not the
   message; one cluster orders one timestamp record per other cluster, not one per
   member of it.
3. A member that receives ``DgTimestamp`` orders ``RecTimestamp``; when its record is
   ordered it acknowledges to every member of the timestamp's cluster (the backups stop
   before they send), and again once the Submit is ordered if it was not yet. When its
   order holds m's Submit and every destination's timestamp, m's key is
   ``(max lts, id)``, final.
4. The order delivers the pending message with the smallest key while it is final.

A datagram may be a batch (``wire.DgBatch``, what ``batching.batch_sends`` made of one
round's outputs for one member): ``on_remote`` takes its datagrams one by one, as if
each came alone.

Acknowledgements (``DgAck``) say what the acknowledging cluster's order holds of m: the
Submit, the clusters whose timestamps it holds, whether m is delivered. A member sends
one when its order holds what a datagram asked for (at once if it held it already, or
when the record it injected is delivered). A cluster whose ack says it lacks m's Submit
gets the Submit from the members of a cluster that holds it: a sender that crashes
after reaching one destination does not leave the others waiting forever.

Why the merged delivered-before relation stays acyclic. Every cluster delivers global
messages in increasing ``(gts, id)`` order (Skeen: when m is delivered with final key
k, every later first Submit gets a larger lts, since the clock is at least gts(m), and
every pending message's key is at least its own lts, a lower bound of its final key).
A local message (Dst = the own cluster only) is delivered by the same total order at
its own position, the same for every member of the cluster: all members of a cluster
deliver one sequence. An edge of the merged relation through local messages joins two
global messages of the same cluster's sequence in that sequence's order, which is
``(gts, id)`` order; so a cycle would need ``(gts, id)`` to decrease somewhere: none
exists. Local messages never wait: they are not federation records.

Joiners. A member that joins a running cluster (``joining=True``) has no state: it
orders ``RecStateRequest(node, nonce)`` and keeps every record after it; one member
with state (chosen by the nonce in the view) answers with ``RecState``, the state at
the request's position in the order. The joiner installs it and applies the records it
kept, then runs like the others. It asks again after ``snapshot_retry_s``.

Outcomes of own multicasts. The member keeps an own multicast m (and sends it again)
until every other destination cluster has acknowledged holding its Submit and, when
the own cluster is in Dst(m), the own order has delivered it: m is then *committed*,
every destination's order holds its timestamp, and every destination delivers it once
the destinations' timestamps reach each other (nothing can stop that but a cluster
that never answers again). A multicast not committed ``deadline_s`` after it was made
is reported once (``Undelivered``, outcome ``unknown``) and still sent: a destination
that holds the Submit gave it a timestamp, which is irrevocable, so the member can
never say "not delivered", only that it does not know; and since every destination
needs every other one's timestamp, m is delivered by all of its destinations or by
none, never by a part. A daemon whose member missed part of its cluster's order makes
a new member, which ``adopt``s the old one's own multicasts (so they are neither lost
nor reported twice).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass

from ..errors import BackpressureError, DecodeError
from .config import FederationConfig
from .outputs import (
    Deliver,
    DroppedRemote,
    FedId,
    InFlight,
    OrderLocally,
    Output,
    SendRemote,
    Stalled,
    Undelivered,
)
from .state import ClusterState
from .wire import (
    MAX_GROUP_BYTES,
    DgAck,
    DgBatch,
    DgSubmit,
    DgTimestamp,
    RecState,
    RecStateRequest,
    RecSubmit,
    RecTimestamp,
    decode_datagram,
    decode_record,
    encode_datagram,
    encode_record,
)

MAX_BACKOFF = 8
"""A retransmission interval doubles up to this many times ``retransmit_s``."""
REINJECT_AFTER = 2.0
"""A record injected for a remote datagram is injected again, on a later copy of the
datagram, once it is this many ``retransmit_s`` old and still not ordered."""
HEARD_WITHIN = 4 * MAX_BACKOFF
"""Retransmissions go to the members of a cluster heard from within this many
``retransmit_s`` (to all of them in turn when none was): a crashed member stops
getting every other try."""
MAX_BUFFERED = 100_000
"""Records a joiner keeps while it waits for its state; past it, it asks again."""


@dataclass(slots=True)
class _Own:
    """An own multicast not yet acknowledged by every destination."""

    dst: tuple[str, ...]
    group: str
    payload: bytes
    waiting: set[str]
    """Other destination clusters that have not acknowledged holding the Submit."""
    own_pending: bool
    """The own cluster is in Dst(m) and its order has not delivered the Submit yet."""
    since: float
    attempt: int = 0
    next_t: float = 0.0
    reported: bool = False
    """``Undelivered`` was reported for it (once, at ``since + deadline_s``)."""


@dataclass(slots=True)
class _Stamp:
    """The own cluster's timestamp of m, until every other destination holds it."""

    dst: tuple[str, ...]
    group: str
    payload: bytes
    lts: int
    waiting: dict[str, bool]
    """Cluster -> whether its ack said it lacks m's Submit (then it gets it from us)."""
    since: float = 0.0
    attempt: int = 0
    next_t: float = 0.0
    backup: bool = False
    """Another member is designated to send it: this one sends only once it is late,
    to the same member of each cluster first (whose order it is in flight in)."""


class FederationMember:
    def __init__(self, config: FederationConfig, node_id: str, *, joining: bool = False,
                 first_seq: int = 1) -> None:
        """``joining``: this member enters a running cluster and gets the federation
        state from the others (the members of a cluster's first view start empty).
        ``first_seq``: the sequence number of this member's first multicast; a restarted
        daemon must start above its previous life's (a wall-clock reading in
        microseconds will do)."""
        if node_id not in config.clusters[config.cluster]:
            raise ValueError(f"node {node_id!r} is not a member of cluster {config.cluster!r}")
        self.config = config
        self.cluster = config.cluster
        self.node = node_id
        self.state: ClusterState | None = None if joining else self._empty()
        self.view: tuple[str, ...] = tuple(sorted(config.clusters[config.cluster]))
        self.next_seq = first_seq
        self.last_id: FedId | None = None
        """The id ``multicast`` gave its message."""
        self.counters: Counter[str] = Counter()
        """Refused datagrams and records by reason, duplicates ignored, retransmissions."""
        self._own: dict[FedId, _Own] = {}
        self._stamps: dict[FedId, _Stamp] = {}
        self._reply_to: dict[tuple[FedId, int, str], tuple[float, set[tuple[str, str]]]] = {}
        """``(m, kind, cluster)`` of a record injected for other clusters -> since when,
        and who to acknowledge once the order delivers it."""
        self._injected: dict[tuple[FedId, int, str], float] = {}
        self._seen: dict[FedId, float] = {}
        """Pending messages of the state -> when this member learnt of them (insertion
        order is time order)."""
        self._stall_next: dict[FedId, float] = {}
        self._nonce: int | None = None
        self._asked_at = 0.0
        self._buffer: list[bytes] | None = None
        self._nonces = 0
        self._first_seq = first_seq
        self._heard: dict[str, float] = {}
        """Member of another cluster -> when a well-formed datagram last came from it."""
        self._now = 0.0

    def _empty(self) -> ClusterState:
        return ClusterState(self.cluster, self.config.horizon, self.config.max_in_flight)

    # ------------------------------------------------------------------ client side

    def multicast(self, now: float, group: str, payload: bytes,
                  clusters: Collection[str]) -> list[Output]:
        """A client's global message to ``clusters``; its id is ``last_id`` after."""
        self._now = max(self._now, now)
        dst = tuple(sorted(set(clusters)))
        unknown = [c for c in dst if c not in self.config.clusters]
        if unknown or not dst:
            raise ValueError(f"unknown destination cluster(s) {unknown or '(none)'}")
        if dst == (self.cluster,):
            raise ValueError("a message to the own cluster only is a local message: "
                             "order it locally")
        if len(payload) > self.config.max_payload:
            raise ValueError(f"payload of {len(payload)} bytes > {self.config.max_payload}")
        if len(group.encode()) > MAX_GROUP_BYTES:
            raise ValueError(f"group name longer than {MAX_GROUP_BYTES} bytes")
        if len(self._own) >= self.config.max_in_flight:
            raise BackpressureError(f"{len(self._own)} global messages in flight")
        m = (self.cluster, self.node, self.next_seq)
        self.next_seq += 1
        self.last_id = m
        own = self.cluster in dst
        entry = _Own(dst, group, payload, {c for c in dst if c != self.cluster}, own, now,
                     next_t=now + self.config.retransmit_s)
        self._own[m] = entry
        return self._send_own(m, entry)

    def _send_own(self, m: FedId, e: _Own) -> list[Output]:
        out: list[Output] = []
        if e.waiting:
            data = encode_datagram(DgSubmit(m, e.dst, e.group, e.payload))
            for c in sorted(e.waiting):
                out.append(SendRemote(c, self._target(c, m[2] + e.attempt), data))
        if e.own_pending:
            out.append(OrderLocally(encode_record(RecSubmit(m, e.dst, e.group, e.payload))))
        return out

    # ------------------------------------------------------------------ own order

    def on_ordered(self, now: float, record: bytes) -> list[Output]:
        """A federation record the own cluster's order delivered (safe), in order."""
        self._now = max(self._now, now)
        try:
            rec = decode_record(record, self.config.max_payload)
        except DecodeError as exc:
            self.counters[f"bad_record_{exc.reason}"] += 1
            return []
        if not self._known(rec):
            self.counters["bad_record_unknown_cluster"] += 1
            return []
        if self.state is None:
            return self._joiner_record(now, rec, record)
        return self._apply(now, rec)

    def _known(self, rec: object) -> bool:
        """Whether every cluster and origin a record or datagram names is configured
        (the same answer at every member: they share the configuration)."""
        clusters = self.config.clusters
        m = getattr(rec, "msg_id", None)
        if m is not None and m[1] not in clusters.get(m[0], ()):
            return False
        dst = getattr(rec, "dst", ())
        cluster = getattr(rec, "cluster", None)
        return all(c in clusters for c in dst) and (cluster is None or cluster in clusters)

    def _apply(self, now: float, rec: object) -> list[Output]:
        st = self.state
        assert st is not None
        out: list[Output] = []
        if isinstance(rec, RecSubmit):
            m = rec.msg_id
            own = self._own.get(m)
            if own is not None and own.own_pending:
                own.own_pending = False
                self._forget_own_if_done(m, own)
            self._injected.pop((m, 0, self.cluster), None)
            lts, delivered = st.apply_submit(m, rec.dst, rec.group, rec.payload)
            if lts is None:
                self.counters["ignored_submit"] += 1
            else:
                self._seen.setdefault(m, now)
                others = {c: False for c in rec.dst if c != self.cluster}
                if others:
                    backup = self._designated(m) != self.node
                    stamp = _Stamp(rec.dst, rec.group, rec.payload, lts, others, now,
                                   next_t=now + self.config.retransmit_s, backup=backup)
                    self._stamps[m] = stamp
                    if not backup:
                        out += self._send_stamp(m, stamp)
            out += self._acks(m, (m, 0, self.cluster))
            out += self._delivered(delivered)
        elif isinstance(rec, RecTimestamp):
            m = rec.msg_id
            self._injected.pop((m, 1, rec.cluster), None)
            delivered = st.apply_timestamp(m, rec.cluster, rec.lts)
            out += self._acks(m, (m, 1, rec.cluster))
            out += self._delivered(delivered)
        elif isinstance(rec, RecStateRequest) and rec.node != self.node:
            holders = [n for n in self.view if n != rec.node]
            if holders and holders[rec.nonce % len(holders)] == self.node:
                self.counters["snapshots_sent"] += 1
                out.append(OrderLocally(encode_record(
                    RecState(rec.node, rec.nonce, st.encode()))))
        return out  # a RecState for someone else: nothing to do with state in hand

    def _delivered(self, delivered: list[Deliver]) -> list[Output]:
        for d in delivered:
            self._seen.pop(d.msg_id, None)
            self._stall_next.pop(d.msg_id, None)
        return list(delivered)

    def _acks(self, m: FedId, key: tuple[FedId, int, str]) -> list[Output]:
        """Ack who asked for the record just ordered; a timestamp's ack goes to every
        member of its cluster, whose backups then need not send it."""
        entry = self._reply_to.pop(key, None)
        if entry is None:
            return []
        targets = set(entry[1])
        if key[1] == 1:
            targets.update((key[2], n) for n in self.config.clusters[key[2]])
            assert self.state is not None
            submit, _, done = self.state.holds(m)
            later = (m, 0, self.cluster)
            if not (submit or done) and (later in self._reply_to or len(
                    self._reply_to) < 2 * self.config.max_in_flight):
                # they hear "no Submit here": tell them again once the Submit is ordered
                self._reply_to.setdefault(later, (self._now, set()))[1].update(targets)
        data = self._ack(m)
        return [SendRemote(c, n, data) for c, n in sorted(targets)]

    def _designated(self, m: FedId) -> str:
        """The member of the own cluster (as this member's view has it) that sends the
        cluster's timestamp of m to the other destinations at once; the others are its
        backups. Views that differ for a moment give two senders or none (then the
        backups send once late): either costs time or a duplicate record, never safety."""
        return self.view[m[2] % len(self.view)] if self.view else self.node

    def _ack(self, m: FedId) -> bytes:
        assert self.state is not None
        submit, clusters, done = self.state.holds(m)
        return encode_datagram(DgAck(m, submit, clusters, done))

    def _send_stamp(self, m: FedId, s: _Stamp) -> list[Output]:
        first = m[2] + s.attempt - (1 if s.backup else 0)
        ts = encode_datagram(DgTimestamp(m, s.dst, self.cluster, s.lts))
        sub: bytes | None = None
        out: list[Output] = []
        for c, need_submit in sorted(s.waiting.items()):
            target = self._target(c, first)
            if need_submit:
                sub = sub or encode_datagram(DgSubmit(m, s.dst, s.group, s.payload))
                out.append(SendRemote(c, target, sub))
            out.append(SendRemote(c, target, ts))
        return out

    # ------------------------------------------------------------------ joiner

    def _joiner_record(self, now: float, rec: object, raw: bytes) -> list[Output]:
        if isinstance(rec, RecStateRequest) and rec.node == self.node and rec.nonce == self._nonce:
            self._buffer = []
            return []
        if isinstance(rec, RecState) and rec.node == self.node and rec.nonce == self._nonce:
            if self._buffer is None:
                return []
            try:
                state = ClusterState.decode(rec.state, self.cluster, self.config.horizon,
                                            self.config.max_in_flight, self.config.clusters)
            except DecodeError as exc:
                self.counters[f"bad_state_{exc.reason}"] += 1
                self._nonce = None  # ask again at the next tick
                return []
            buffered, self._buffer = self._buffer, None
            out = self._install(now, state)
            for data in buffered:  # what the cluster did since the request, silently
                for o in self._apply(now, decode_record(data, self.config.max_payload)):
                    if isinstance(o, Deliver):
                        self.counters["skipped_while_joining"] += 1
                    elif not isinstance(o, OrderLocally):
                        out.append(o)
            out += self._install_stamps(now)
            return out
        if self._buffer is not None:
            if len(self._buffer) >= MAX_BUFFERED:
                self._buffer, self._nonce = None, None
                self.counters["joiner_buffer_full"] += 1
            else:
                self._buffer.append(raw)
        return []

    def _install(self, now: float, state: ClusterState) -> list[Output]:
        self.state = state
        self._nonce = None
        self.counters["snapshots_installed"] += 1
        return []

    def _install_stamps(self, now: float) -> list[Output]:
        """Resume the retransmissions of a member that took a snapshot: the timestamps of
        every pending message go to the other destinations again (their acks stop it)."""
        assert self.state is not None
        out: list[Output] = []
        for m, p in self.state.pending.items():
            if m in self._stamps:
                continue
            self._seen.setdefault(m, now)
            others = {c: False for c in p.dst if c != self.cluster}
            if others:
                stamp = _Stamp(p.dst, p.group, p.payload, p.ts[self.cluster], others, now,
                               next_t=now + self.config.retransmit_s)
                self._stamps[m] = stamp
                out += self._send_stamp(m, stamp)
        return out

    def snapshot(self) -> bytes:
        """The replicated state (as of the last record applied), for ``restore``."""
        if self.state is None:
            raise ValueError("this member has no federation state yet")
        return self.state.encode()

    @classmethod
    def restore(cls, config: FederationConfig, node_id: str, snapshot: bytes, now: float,
                *, first_seq: int = 1) -> tuple[FederationMember, list[Output]]:
        """A member holding ``snapshot`` (raises ``DecodeError`` on bad bytes), and the
        datagrams that resume its retransmissions."""
        member = cls(config, node_id, joining=True, first_seq=first_seq)
        state = ClusterState.decode(snapshot, config.cluster, config.horizon,
                                    config.max_in_flight, config.clusters)
        member._install(now, state)
        return member, member._install_stamps(now)

    # ------------------------------------------------------------------ other clusters

    def on_remote(self, now: float, src_cluster: str, src_node: str,
                  datagram: bytes) -> list[Output]:
        """A datagram from a member of another cluster; bad bytes give ``DroppedRemote``."""
        self._now = max(self._now, now)
        members = self.config.clusters.get(src_cluster)
        if members is None or src_node not in members or src_cluster == self.cluster:
            return self._drop("unknown_sender")
        try:
            dg = decode_datagram(datagram, self.config.max_payload)
        except DecodeError as exc:
            return self._drop(exc.reason)
        self._heard[src_node] = now
        if isinstance(dg, DgBatch):  # its datagrams one by one, as if they came alone
            out: list[Output] = []
            for item in dg.items:
                out += self._on_datagram(now, src_cluster, src_node, item)
            return out
        return self._on_datagram(now, src_cluster, src_node, dg)

    def _on_datagram(self, now: float, src_cluster: str, src_node: str,
                     dg: DgSubmit | DgTimestamp | DgAck) -> list[Output]:
        if isinstance(dg, DgAck):
            self._on_ack(src_cluster, dg)
            return []
        m = dg.msg_id
        if not self._known(dg):
            return self._drop("bad_origin")
        if self.cluster not in dg.dst:
            return self._drop("not_addressed")
        if isinstance(dg, DgSubmit):
            if src_cluster not in dg.dst and (src_cluster, src_node) != (m[0], m[1]):
                return self._drop("not_addressed")
            return self._request(now, src_cluster, src_node, m, 0, self.cluster,
                                 RecSubmit(m, dg.dst, dg.group, dg.payload))
        if dg.cluster != src_cluster:
            return self._drop("bad_origin")
        return self._request(now, src_cluster, src_node, m, 1, dg.cluster,
                             RecTimestamp(m, dg.cluster, dg.lts))

    def _target(self, cluster: str, k: int) -> str:
        """The member of ``cluster`` for the k-th try: the k-th of those heard from
        lately (any datagram), or of all members when none was."""
        members = self.config.clusters[cluster]
        lately = self._now - HEARD_WITHIN * self.config.retransmit_s
        heard = [n for n in members if self._heard.get(n, -1.0) >= lately]
        pool = heard or members
        return pool[k % len(pool)]

    def _drop(self, reason: str) -> list[Output]:
        self.counters[f"dropped_{reason}"] += 1
        return [DroppedRemote(reason)]

    def _request(self, now: float, src_cluster: str, src_node: str, m: FedId, kind: int,
                 cluster: str, rec: RecSubmit | RecTimestamp) -> list[Output]:
        """Ack at once what the order holds; otherwise order it and ack when it is."""
        st = self.state
        if st is not None:
            submit, clusters, done = st.holds(m)
            if done or (submit if kind == 0 else cluster in clusters):
                return [SendRemote(src_cluster, src_node, self._ack(m))]
            entry = self._reply_to.get((m, kind, cluster))
            if entry is None and len(self._reply_to) < 2 * self.config.max_in_flight:
                entry = self._reply_to[(m, kind, cluster)] = (now, set())
            if entry is not None and len(entry[1]) < 2 * len(self.config.clusters):
                entry[1].add((src_cluster, src_node))
        key = (m, kind, cluster)
        last = self._injected.get(key)
        if last is not None and now - last < REINJECT_AFTER * self.config.retransmit_s:
            return []
        if last is None and len(self._injected) >= 2 * self.config.max_in_flight:
            return self._drop("full")
        self._injected[key] = now
        return [OrderLocally(encode_record(rec))]

    def _on_ack(self, h: str, ack: DgAck) -> None:
        m = ack.msg_id
        own = self._own.get(m)
        if own is not None and (ack.submit or ack.done):
            own.waiting.discard(h)
            self._forget_own_if_done(m, own)
        stamp = self._stamps.get(m)
        if stamp is not None and h in stamp.waiting:
            if ack.done or (ack.submit and self.cluster in ack.clusters):
                del stamp.waiting[h]
                if not stamp.waiting:
                    del self._stamps[m]
            elif not ack.submit:
                stamp.waiting[h] = True

    def owns(self, m: FedId) -> bool:
        """Whether own multicast m is not committed yet (module docstring, Outcomes)."""
        return m in self._own

    def adopt(self, old: FederationMember, now: float) -> None:
        """Take over the own multicasts ``old`` (this daemon's previous member, dropped
        after an order gap) had not committed: they are sent again from here, their
        own Submit ordered again where the old member had not seen it ordered (a copy
        the cluster holds already is ignored), and each is reported at most once."""
        self._now = max(self._now, now)
        self.next_seq = max(self.next_seq, old.next_seq)
        for m, e in old._own.items():
            if m not in self._own:
                self._own[m] = _Own(e.dst, e.group, e.payload, set(e.waiting),
                                    e.own_pending, e.since, next_t=now,
                                    reported=e.reported)
                if m in old._stall_next:
                    self._stall_next[m] = old._stall_next[m]

    def _forget_own_if_done(self, m: FedId, own: _Own) -> None:
        if not own.waiting and not own.own_pending:
            del self._own[m]
            if m not in self._seen:
                self._stall_next.pop(m, None)

    # ------------------------------------------------------------------ time, views

    def _backoff(self, attempt: int) -> float:
        return self.config.retransmit_s * min(2 ** max(attempt - 1, 0), MAX_BACKOFF)

    def tick(self, now: float) -> list[Output]:
        """Retransmissions that are due, stall reports, a joiner's (repeated) request."""
        self._now = max(self._now, now)
        out: list[Output] = []
        deadline = self.config.deadline_s
        for m, own in self._own.items():
            if own.next_t <= now:
                own.attempt += 1
                own.next_t = now + self._backoff(own.attempt)
                self.counters["retransmit_submit"] += 1
                out += self._send_own(m, own)
            if not own.reported and now - own.since >= deadline:
                own.reported = True
                self.counters["undelivered_deadline"] += 1
                waiting = set(own.waiting) | ({self.cluster} if own.own_pending else set())
                out.append(Undelivered(m, "deadline", tuple(sorted(waiting)),
                                       now - own.since))
        for m, stamp in self._stamps.items():
            if stamp.next_t <= now:
                stamp.attempt += 1
                stamp.next_t = now + self._backoff(stamp.attempt)
                self.counters["retransmit_timestamp"] += 1
                out += self._send_stamp(m, stamp)
        out += self._stalls(now)
        if self.state is None and (self._nonce is None
                                   or now - self._asked_at >= self.config.snapshot_retry_s):
            out += self._ask(now)
        horizon = 4 * MAX_BACKOFF * self.config.retransmit_s
        for key in [k for k, t in self._injected.items() if now - t > horizon]:
            del self._injected[key]
        for key in [k for k, (t, _) in self._reply_to.items() if now - t > horizon]:
            del self._reply_to[key]  # its record was lost: the next copy asks again
        return out

    def _stalls(self, now: float) -> list[Output]:
        after = self.config.stall_after_s
        out: list[Output] = []
        for m, since in self._seen.items():
            if now - since < after:
                break
            if self._stall_next.get(m, 0.0) <= now:
                self._stall_next[m] = now + after
                assert self.state is not None
                out.append(Stalled(m, self.state.missing(m), now - since))
        for m, own in self._own.items():
            if (now - own.since >= after and m not in self._seen
                    and self._stall_next.get(m, 0.0) <= now):
                self._stall_next[m] = now + after
                out.append(Stalled(m, tuple(sorted(own.waiting)), now - own.since))
        return out

    def _ask(self, now: float) -> list[Output]:
        self._nonces += 1
        self._nonce = (self._first_seq % 2**52) * 1024 + self._nonces % 1024
        self._asked_at = now
        self._buffer = None
        self.counters["snapshot_requests"] += 1
        return [OrderLocally(encode_record(RecStateRequest(self.node, self._nonce)))]

    def on_view(self, now: float, members: Collection[str]) -> list[Output]:
        """The own cluster's new view (its member ids); a joiner asks for the state."""
        self._now = max(self._now, now)
        self.view = tuple(sorted(members))
        if self.state is None and self._nonce is None:
            return self._ask(now)
        return []

    # ------------------------------------------------------------------ status

    def in_flight(self) -> list[InFlight]:
        """Messages this member knows and has not finished with, oldest first."""
        out: dict[FedId, InFlight] = {}
        now = self._now
        st = self.state
        for m, since in self._seen.items():
            p = st.pending.get(m) if st is not None else None
            if p is not None:
                out[m] = InFlight(m, p.dst, now - since, st.missing(m) if st else ())
        for m, own in self._own.items():
            prev = out.get(m)
            waiting = set(own.waiting) | set(prev.waiting_for if prev else ())
            out[m] = InFlight(m, own.dst, now - own.since, tuple(sorted(waiting)))
        for m, stamp in self._stamps.items():
            if m not in out:
                out[m] = InFlight(m, stamp.dst, now - stamp.since,
                                  tuple(sorted(stamp.waiting)))
        return sorted(out.values(), key=lambda f: -f.age_s)

    def next_deadline(self) -> float | None:
        """When ``tick`` has something to do next (None: nothing pending)."""
        times = [o.next_t for o in self._own.values()]
        times += [o.since + self.config.deadline_s for o in self._own.values()
                  if not o.reported]
        times += [s.next_t for s in self._stamps.values()]
        if self._seen:
            m, since = next(iter(self._seen.items()))
            times.append(max(since + self.config.stall_after_s, self._stall_next.get(m, 0.0)))
        if self.state is None:
            times.append(self._asked_at + self.config.snapshot_retry_s)
        return min(times) if times else None
