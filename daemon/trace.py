"""Latency trace: when each data-plane datagram left and reached this daemon.

``logs.trace = true`` (off by default: it decodes every datagram a second time) makes
the daemon append a line to ``trace.ndjson`` in its log directory (owner-only, rotated
like the delivery log) for each client send frame it accepts and each datagram carrying
vertices that it sends or receives. ``amcast bench cluster --trace`` joins the files of
all daemons with their delivery logs to time each stage of one message
(``bench.trace_stages``): client frame in, vertex made, datagram sent,
received at each member, each member's vote (its first vertex after the receipt: a
vertex follows everything its maker released, so it is a vote for the message, ToTo
section 3), the votes back at the sender, ordered, and the client hop out.

Records are JSON arrays; times are the daemon's clock (``time.monotonic()`` plus the
offset to the wall clock taken at its start, the clock of ``delivery.jsonl``):

- ``["c", ts, client, messages]``: a client's send frame was accepted;
- ``["s", ts, kind, [[origin, seq], ...]]``: a datagram this daemon sent (``ts`` taken
  just before the send call), with the vertices it carries;
- ``["r", ts, kind, sender, [[origin, seq], ...]]``: one it received, ``ts`` when the
  daemon woke up for it (the time the engine is handed), before it is processed.

A datagram that does not authenticate or decode is not traced (the engine counts it; the
trace never raises on one); membership datagrams and heartbeats carry no vertex and are
not traced.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from ..protocols.wire.codec import KIND_NAMES, Datagram
from .logs import RotatingJsonl

Peek = Callable[[bytes], object]


class DatagramTrace:
    """Appends the records above; ``peek`` decodes one datagram with the node's keys
    (``Node.peek``: no replay check, so a traced copy is not consumed)."""

    def __init__(self, directory: str | Path, *, rotate_bytes: int, keep: int,
                 peek: Peek) -> None:
        self._file = RotatingJsonl(Path(directory) / "trace.ndjson", rotate_bytes, keep)
        self._peek = peek

    def client_frame(self, ts: float, client: int, messages: int) -> None:
        self._file.write(f'["c",{ts!r},{client},{messages}]\n')

    def sent(self, ts: float, datagrams: Iterable[bytes]) -> None:
        for data in datagrams:
            dg = self._vertices_of(data)
            if dg is not None:
                self._file.write(f'["s",{ts!r},"{KIND_NAMES[dg.kind]}",{_ids(dg)}]\n')

    def received(self, ts: float, datagrams: Iterable[bytes]) -> None:
        for data in datagrams:
            dg = self._vertices_of(data)
            if dg is not None:
                self._file.write(
                    f'["r",{ts!r},"{KIND_NAMES[dg.kind]}",{dg.sender},{_ids(dg)}]\n'
                )

    def _vertices_of(self, data: bytes) -> Datagram | None:
        try:
            dg = self._peek(data)
        except Exception:  # a diagnostic must never cost the engine a datagram
            return None  # (DecodeError for anything malformed: the engine counts it)
        if type(dg) is not Datagram or not dg.vertices:
            return None
        return dg

    @property
    def failures(self) -> int:
        """Trace writes the disk refused (``RotatingJsonl``)."""
        return self._file.failures

    @property
    def errors(self) -> list[str]:
        return [] if self._file.error is None else [self._file.error]

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def _ids(dg: Datagram) -> str:
    return "[" + ",".join(f"[{v.origin},{v.seq}]" for v in dg.vertices) + "]"
