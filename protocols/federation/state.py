"""The replicated federation state of one cluster: a function of its order alone.

Every member applies the same federation records in the same order (its cluster's
total order, safe service), so every member holds the same ``ClusterState`` after the
same prefix of the order: the clock, the pending messages with their keys, the
timestamps that came before their Submit, and the remembered delivered ids. Nothing
here reads the time, the view or which member runs it; ``apply_submit`` and
``apply_timestamp`` return the deliveries the record caused, in order.

Skeen's rule (seed 003, section 5.2, one "process" per cluster): the first Submit of m
gets ``lts = ++clock``; once the timestamps of every cluster of Dst(m) are held, m's key
is ``(gts, id)`` with ``gts = max lts`` (final) and the clock rises to gts; the smallest
key is delivered while it is final (a pending key is a lower bound of its final key).

Duplicates. A Submit of an id that is pending or remembered as delivered is ignored.
Delivered ids are remembered for the last ``horizon`` deliveries; an id pushed out of
that window raises its origin node's *floor* to its sequence number, and a Submit at or
below its origin's floor is ignored as a late duplicate. A message whose Submit reaches
a cluster's order more than ``horizon`` deliveries after a later message of the same
origin was delivered there would be taken for such a duplicate: the horizon must exceed
the deliveries of the longest stall (the default, 65 536, is minutes of heavy load).

``encode`` and ``decode`` carry the state to a joiner (``RecState``).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

import msgpack

from ..errors import DecodeError
from ..wire.fields import read_int, read_list
from .outputs import Deliver, FedId
from .wire import MAX_SEQ, read_clusters, read_group, read_id, read_name

STATE_VERSION = 1


@dataclass(slots=True)
class Pending:
    """A message this cluster's order holds and has not delivered."""

    dst: tuple[str, ...]
    group: str
    payload: bytes
    ts: dict[str, int]
    """Cluster -> its local timestamp of the message, as far as the order holds them."""
    final: bool = False

    def key_ts(self) -> int:
        return max(self.ts.values())


@dataclass(slots=True)
class ClusterState:
    cluster: str
    horizon: int
    max_pending: int
    clock: int = 0
    pending: dict[FedId, Pending] = field(default_factory=dict)
    early: dict[FedId, dict[str, int]] = field(default_factory=dict)
    """Timestamps whose message's Submit the order does not hold yet."""
    done: deque[FedId] = field(default_factory=deque)
    done_set: set[FedId] = field(default_factory=set)
    floors: dict[tuple[str, str], int] = field(default_factory=dict)
    heap: list[tuple[int, FedId]] = field(default_factory=list)
    """``(ts, id)`` of every pending message, current or stale (lazy deletion)."""
    ignored: int = 0
    """Records ignored as duplicates or over the bounds (the same at every member)."""

    # ------------------------------------------------------------------ queries

    def is_done(self, m: FedId) -> bool:
        return m in self.done_set or m[2] <= self.floors.get((m[0], m[1]), -1)

    def holds(self, m: FedId) -> tuple[bool, tuple[str, ...], bool]:
        """``(holds the Submit, clusters whose timestamp it holds, delivered)``."""
        if self.is_done(m):
            return True, (), True
        p = self.pending.get(m)
        if p is not None:
            return True, tuple(sorted(p.ts)), False
        return False, tuple(sorted(self.early.get(m, {}))), False

    def missing(self, m: FedId) -> tuple[str, ...]:
        """The clusters whose timestamps m waits for; for a final m, those of the
        message with the smallest key, which it waits behind."""
        p = self.pending.get(m)
        if p is None:
            return ()
        if p.final:
            head = self.head()
            q = self.pending.get(head) if head is not None else None
            if q is None or q.final:
                return ()
            return tuple(c for c in q.dst if c not in q.ts)
        return tuple(c for c in p.dst if c not in p.ts)

    def head(self) -> FedId | None:
        """The pending message with the smallest key (dropping stale heap entries)."""
        heap = self.heap
        while heap:
            ts, m = heap[0]
            p = self.pending.get(m)
            if p is None or (p.final and ts != p.key_ts()):
                heapq.heappop(heap)
                continue
            return m
        return None

    # ------------------------------------------------------------------ records

    def apply_submit(self, m: FedId, dst: tuple[str, ...], group: str,
                     payload: bytes) -> tuple[int | None, list[Deliver]]:
        """The first Submit of m: ``(its lts, deliveries)``; ``(None, [])`` if ignored."""
        if (m in self.pending or self.is_done(m) or self.cluster not in dst
                or len(self.pending) >= self.max_pending):
            self.ignored += 1
            return None, []
        self.clock += 1
        ts = {c: t for c, t in self.early.pop(m, {}).items() if c in dst}
        ts[self.cluster] = self.clock
        p = Pending(dst, group, payload, ts)
        self.pending[m] = p
        lts = self.clock
        self._maybe_final(m, p)
        heapq.heappush(self.heap, (p.key_ts() if p.final else lts, m))
        return lts, self._deliver()

    def apply_timestamp(self, m: FedId, cluster: str, lts: int) -> list[Deliver]:
        if cluster == self.cluster or self.is_done(m):
            self.ignored += 1
            return []
        p = self.pending.get(m)
        if p is None:
            got = self.early.get(m)
            if got is None and len(self.early) >= self.max_pending:
                self.ignored += 1
                return []
            self.early.setdefault(m, {}).setdefault(cluster, lts)
            return []
        if cluster in p.ts or cluster not in p.dst:
            self.ignored += 1
            return []
        p.ts[cluster] = lts
        if self._maybe_final(m, p):
            heapq.heappush(self.heap, (p.key_ts(), m))
            return self._deliver()
        return []

    def _maybe_final(self, m: FedId, p: Pending) -> bool:
        if p.final or len(p.ts) < len(p.dst):
            return False
        p.final = True
        self.clock = max(self.clock, p.key_ts())
        return True

    def _deliver(self) -> list[Deliver]:
        out: list[Deliver] = []
        heap = self.heap
        while (m := self.head()) is not None:
            ts = heap[0][0]
            p = self.pending[m]
            if not p.final:
                break
            heapq.heappop(heap)
            del self.pending[m]
            self._remember(m)
            out.append(Deliver(m, p.group, p.payload, p.dst, ts))
        return out

    def _remember(self, m: FedId) -> None:
        self.done.append(m)
        self.done_set.add(m)
        while len(self.done) > self.horizon:
            old = self.done.popleft()
            self.done_set.discard(old)
            origin = (old[0], old[1])
            self.floors[origin] = max(self.floors.get(origin, -1), old[2])

    # ------------------------------------------------------------------ snapshot

    def encode(self) -> bytes:
        def ident(m: FedId) -> list[Any]:
            return [m[0].encode(), m[1].encode(), m[2]]

        def tsmap(ts: dict[str, int]) -> list[Any]:
            return [[c.encode(), t] for c, t in sorted(ts.items())]

        body = [
            STATE_VERSION, self.clock, self.ignored,
            [[ident(m), [c.encode() for c in p.dst], p.group.encode(), p.payload,
              tsmap(p.ts)] for m, p in self.pending.items()],
            [[ident(m), tsmap(ts)] for m, ts in self.early.items()],
            [ident(m) for m in self.done],
            [[c.encode(), n.encode(), s] for (c, n), s in sorted(self.floors.items())],
        ]
        return msgpack.packb(body, use_bin_type=True)

    @classmethod
    def decode(cls, data: bytes, cluster: str, horizon: int, max_pending: int,
               clusters: Collection[str] = ()) -> ClusterState:
        """The state ``encode`` wrote; ``DecodeError`` for anything else, including a
        state that names a cluster outside ``clusters`` (when given) or a pending message
        without the own cluster's timestamp."""
        known = set(clusters) | {cluster}

        def check(names: Iterable[str]) -> None:
            if clusters and not known.issuperset(names):
                raise DecodeError("bad_field", "state names an unknown cluster")
        try:
            obj = msgpack.unpackb(data, use_list=True, raw=True, strict_map_key=True,
                                  max_str_len=0, max_map_len=0, max_ext_len=0)
        except Exception as exc:  # msgpack raises several unrelated types
            raise DecodeError("malformed", type(exc).__name__) from None
        items = read_list(obj, "state", max_len=7)
        if len(items) != 7 or items[0] != STATE_VERSION:
            raise DecodeError("version", "not a version 1 federation state")
        st = cls(cluster, horizon, max_pending)
        st.clock = read_int(items[1], 0, MAX_SEQ, "clock")
        st.ignored = read_int(items[2], 0, MAX_SEQ, "ignored")

        def tsmap(v: Any) -> dict[str, int]:
            out: dict[str, int] = {}
            for pair in read_list(v, "timestamps"):
                pair = read_list(pair, "timestamp", max_len=2)
                if len(pair) != 2:
                    raise DecodeError("bad_field", "timestamp")
                out[read_name(pair[0], "cluster")] = read_int(pair[1], 1, MAX_SEQ, "lts")
            return out

        for e in read_list(items[3], "pending"):
            e = read_list(e, "pending entry", max_len=5)
            if len(e) != 5 or type(e[3]) is not bytes:
                raise DecodeError("bad_field", "pending entry")
            m = read_id(e[0])
            p = Pending(read_clusters(e[1], "dst", non_empty=True), read_group(e[2]), e[3],
                        tsmap(e[4]))
            check(p.dst)
            if cluster not in p.dst or cluster not in p.ts or not set(p.ts) <= set(p.dst):
                raise DecodeError("bad_field", "pending entry's timestamps")
            p.final = len(p.ts) == len(p.dst)
            st.pending[m] = p
            st.heap.append((p.key_ts() if p.final else p.ts.get(cluster, 0), m))
        heapq.heapify(st.heap)
        for e in read_list(items[4], "early"):
            e = read_list(e, "early entry", max_len=2)
            if len(e) != 2:
                raise DecodeError("bad_field", "early entry")
            st.early[read_id(e[0])] = ts = tsmap(e[1])
            check(ts)
        for e in read_list(items[5], "done"):
            m = read_id(e)
            st.done.append(m)
            st.done_set.add(m)
        for e in read_list(items[6], "floors"):
            e = read_list(e, "floor", max_len=3)
            if len(e) != 3:
                raise DecodeError("bad_field", "floor")
            st.floors[(read_name(e[0], "cluster"), read_name(e[1], "node"))] = read_int(
                e[2], 0, MAX_SEQ, "floor")
        return st
