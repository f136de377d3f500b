"""A userspace UDP relay that puts lossy links between real daemons on one host.

Theory of operation. The kernel of a CI machine often has no ``netem`` qdisc, so loss,
delay, duplication and reordering between real ``amcastd`` processes cannot be had
from ``tc``. Over the unicast transport (``network.transport = "unicast"``) each daemon
sends every datagram to the addresses in its ``network.peers``, and it authenticates
what it receives by the sealed header, not by the source address
(``amcast.daemon.unicast``). So a relay can sit on every directed link: node ``i``'s
``network.peers[j]`` is the relay's port for the link ``i -> j``, and the relay forwards
what arrives there to node ``j``'s own port, after the faults of that link. They are the
simulator's link model (``amcast.protocols.simulation.network``: ``LinkFaults``, applied
as ``SimNetwork`` does), so a real cluster and a simulated one see the same network:

- ``loss``: the datagram is dropped (counted ``lost``);
- ``duplicate``: it arrives twice (counted ``duplicated``);
- each copy after ``delay`` + U(0, ``jitter``); a jitter larger than the gap between two
  datagrams reorders them;
- ``reorder``: a copy is held back an extra U(0, ``reorder_window``), so later ones
  overtake it (counted ``held``);

and, the relay's own, ``cut``: every datagram of a link is dropped until healed (a
partition, one way or both, without namespaces or root; counted ``cut``).

One thread runs the relay with ``selectors`` (it must forward while the caller blocks,
e.g. in ``LocalCluster.start``): it reads every link's socket until it would block, puts
each surviving copy on a heap by due time, and sends the copies that are due. Decisions
come from one ``random.Random(seed)``, so a run is repeatable as far as the daemons'
timing allows. Faults can be changed while it runs (``set_faults``, ``cut``, ``heal``).
It only binds to and sends to the host given (loopback by default); it is for tests and
experiments, never for production traffic.
"""

from __future__ import annotations

import contextlib
import heapq
import random
import selectors
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields

from amcast.protocols.simulation.network import LinkFaults

MAX_DATAGRAM = 65_536
READS_PER_WAKEUP = 64
"""At most this many datagrams read from one link socket per turn, so one busy link
does not hold back the due copies of the others."""
SOCKET_BUFFER_BYTES = 4 << 20


def check_faults(faults: LinkFaults) -> LinkFaults:
    """``faults``, or ``ValueError`` naming what no link can do."""
    for name in ("loss", "duplicate", "reorder"):
        value = getattr(faults, name)
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must be a probability in 0..1, not {value}")
    for name in ("delay", "jitter", "reorder_window"):
        if getattr(faults, name) < 0:
            raise ValueError(f"{name} must not be negative")
    return faults


@dataclass
class LinkCounts:
    """What one directed link did so far."""

    received: int = 0
    forwarded: int = 0  # copies sent on to the destination (duplicates included)
    lost: int = 0
    cut: int = 0
    duplicated: int = 0
    held: int = 0  # held back so later datagrams could overtake
    send_errors: int = 0  # the destination's port refused or the buffer was full: lost too

    def add(self, other: LinkCounts) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


@dataclass(order=True)
class _Copy:
    due: float
    seq: int
    link: tuple[int, int] = field(compare=False)
    data: bytes = field(compare=False)


class FaultRelay:
    """Relays for every directed link between ``len(targets)`` nodes.

    ``targets[j]``: the UDP port node ``j`` listens on (``host``). ``peers_of(i)`` is
    what node ``i``'s ``network.peers`` must say. Use as a context manager, or
    ``start()`` and ``stop()``."""

    def __init__(self, targets: list[int], faults: LinkFaults | None = None, *,
                 seed: int = 1, host: str = "127.0.0.1") -> None:
        default = check_faults(faults or LinkFaults())
        self.host = host
        self.targets = list(targets)
        self._rng = random.Random(seed)
        self._faults: dict[tuple[int, int], LinkFaults] = {}
        self._cut: set[tuple[int, int]] = set()
        self._counts: dict[tuple[int, int], LinkCounts] = {}
        self._socks: dict[tuple[int, int], socket.socket] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._barriers: list[threading.Event] = []
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        try:
            for link in self.links():
                sock = socket.socket(family, socket.SOCK_DGRAM)
                self._socks[link] = sock
                sock.setblocking(False)
                for opt in (socket.SO_RCVBUF, socket.SO_SNDBUF):
                    sock.setsockopt(socket.SOL_SOCKET, opt, SOCKET_BUFFER_BYTES)
                sock.bind((host, 0))
                self._faults[link] = default
                self._counts[link] = LinkCounts()
        except OSError:
            self._close_sockets()
            raise

    # ---- set-up ----------------------------------------------------------------------
    def links(self) -> Iterator[tuple[int, int]]:
        n = len(self.targets)
        return ((i, j) for i in range(n) for j in range(n) if i != j)

    def port(self, src: int, dst: int) -> int:
        return int(self._socks[(src, dst)].getsockname()[1])

    def peers_of(self, src: int) -> dict[str, str]:
        """Node ``src``'s ``network.peers``: the relay's port of each of its links."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return {str(dst): f"{host}:{self.port(src, dst)}"
                for dst in range(len(self.targets)) if dst != src}

    def set_faults(self, faults: LinkFaults, links: Iterable[tuple[int, int]] | None = None
                   ) -> None:
        """Give ``links`` (default: every link) these faults from now on."""
        check_faults(faults)
        with self._lock:
            for link in self.links() if links is None else links:
                self._faults[link] = faults

    def faults(self, src: int, dst: int) -> LinkFaults:
        return self._faults[(src, dst)]

    def is_cut(self, src: int, dst: int) -> bool:
        return (src, dst) in self._cut

    def cut(self, sources: Iterable[int], destinations: Iterable[int]) -> None:
        """Drop everything ``sources`` send to ``destinations`` (one way) until healed;
        the links keep their faults for when they are healed."""
        dsts = list(destinations)
        with self._lock:
            self._cut.update((s, d) for s in sources for d in dsts if s != d)

    def heal(self) -> None:
        """Undo every ``cut``."""
        with self._lock:
            self._cut.clear()

    def counts(self, links: Iterable[tuple[int, int]] | None = None) -> LinkCounts:
        """The sum of the counts of ``links`` (default: every link)."""
        total = LinkCounts()
        with self._lock:
            for link in self.links() if links is None else links:
                total.add(self._counts[link])
        return total

    # ---- running ---------------------------------------------------------------------
    def start(self) -> FaultRelay:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="fault-relay", daemon=True)
            self._thread.start()
        return self

    def drained(self, timeout: float = 5.0) -> bool:
        """Wait until the relay has read (and decided the fate of) every datagram sent
        to it before this call; ``False`` if it did not within ``timeout``. On one host
        a datagram is in its receiver's queue once ``sendto`` returns, so a fault changed
        after this applies to later datagrams only."""
        barrier = threading.Event()
        with self._lock:
            self._barriers.append(barrier)
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        return barrier.wait(timeout)

    def stop(self) -> LinkCounts:
        """Stop relaying (copies still on the heap are dropped) and close the sockets;
        the counts of every link together."""
        self._stopping.set()
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None
        self._close_sockets()
        return self.counts()

    def __enter__(self) -> FaultRelay:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _close_sockets(self) -> None:
        for sock in [*self._socks.values(), self._wake_r, self._wake_w]:
            sock.close()

    def _run(self) -> None:
        sel = selectors.DefaultSelector()
        for link, sock in self._socks.items():
            sel.register(sock, selectors.EVENT_READ, link)
        sel.register(self._wake_r, selectors.EVENT_READ, None)
        heap: list[_Copy] = []
        seq = 0
        try:
            while not self._stopping.is_set():
                timeout = max(0.0, heap[0].due - time.monotonic()) if heap else None
                for key, _ in sel.select(timeout):
                    if key.data is None:
                        with contextlib.suppress(OSError):
                            self._wake_r.recv(64)
                        seq = self._drain_for_barriers(heap, seq)
                        continue
                    for copy in self._read(key.data, key.fileobj)[0]:  # type: ignore[arg-type]
                        copy.seq = seq
                        seq += 1
                        heapq.heappush(heap, copy)
                now = time.monotonic()
                while heap and heap[0].due <= now:
                    self._send(heapq.heappop(heap))
        finally:
            sel.close()

    def _drain_for_barriers(self, heap: list[_Copy], seq: int) -> int:
        """Read every link socket empty, then release the waiters of ``drained``."""
        with self._lock:
            barriers, self._barriers = self._barriers, []
        if not barriers:
            return seq
        for link, sock in self._socks.items():
            empty = False
            while not empty:
                copies, empty = self._read(link, sock)
                for copy in copies:
                    copy.seq = seq
                    seq += 1
                    heapq.heappush(heap, copy)
        for barrier in barriers:
            barrier.set()
        return seq

    def _read(self, link: tuple[int, int], sock: socket.socket) -> tuple[list[_Copy], bool]:
        """Up to ``READS_PER_WAKEUP`` datagrams of ``link``, faults applied: the copies to
        send, and whether the socket was read empty."""
        out: list[_Copy] = []
        for _ in range(READS_PER_WAKEUP):
            try:
                data = sock.recv(MAX_DATAGRAM)
            except (BlockingIOError, InterruptedError):
                return out, True
            except OSError:
                continue  # an ICMP error queued on the socket: nothing was read
            now = time.monotonic()
            with self._lock:
                f = self._faults[link]
                c = self._counts[link]
                c.received += 1
                if link in self._cut:
                    c.cut += 1
                    continue
                rng = self._rng
                if f.loss and rng.random() < f.loss:  # as SimNetwork.multicast does
                    c.lost += 1
                    continue
                copies = 2 if f.duplicate and rng.random() < f.duplicate else 1
                c.duplicated += copies - 1
                for _ in range(copies):
                    due = now + f.delay + rng.uniform(0.0, f.jitter)
                    if f.reorder and rng.random() < f.reorder:
                        c.held += 1
                        due += rng.uniform(0.0, f.reorder_window)
                    out.append(_Copy(due, 0, link, data))
        return out, False

    def _send(self, copy: _Copy) -> None:
        try:
            self._socks[copy.link].sendto(copy.data, (self.host, self.targets[copy.link[1]]))
            sent = True
        except OSError:  # the destination is down (refused) or the buffer is full: lost
            sent = False
        with self._lock:
            c = self._counts[copy.link]
            if sent:
                c.forwarded += 1
            else:
                c.send_errors += 1
