"""Where one message's time goes, stage by stage, from the daemons' latency traces.

``amcast bench cluster --trace`` runs its latency window with ``logs.trace`` on
(``amcast.daemon.trace``); this module joins every daemon's ``trace.ndjson`` with the
sender's ``delivery.jsonl``. For each data vertex of the sender, made after the warm-up
and ordered at the sender:

1. ``frame -> vertex``: the first client send frame accepted since the sender's previous
   data vertex was made, to this vertex being made (submit, batching, the window);
2. ``vertex -> sent``: made to the send call (encode, seal, the rest of the pump);
3. ``sent -> received``: to the decisive voter's wake-up for it (``sendto``, the kernel's
   loopback delivery, the wake-up, and any work the voter was busy with; the daemons'
   clocks agree to a few microseconds, so a very short stage can read slightly negative);
4. ``received -> vote sent``: to the voter's first own vertex sent after that receipt
   (its vote, ToTo section 3: a vertex follows all its maker had released): decode,
   causal release, the engine, the ack timer, the ack-only vertex, its send;
5. ``vote sent -> received``: back at the sender;
6. ``vote received -> ordered``: the sender processes it, the engine orders the vertex.

The decisive voter is the one whose vote reached the sender last before the vertex was
ordered (ToTo needs more than phi votes: the earlier ones were waiting for it). Stages 1
to 6 add up, message by message, to the sender's daemon-in to ordered; the client's own
latency minus that is the two client hops (frame to the daemon, delivery back).
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

STAGES = ["frame -> vertex", "vertex -> sent", "sent -> received", "received -> vote sent",
          "vote sent -> received", "vote received -> ordered"]


def _lines(path: Path) -> Iterator[Any]:
    if not path.exists():
        return
    with path.open() as f:
        for line in f:
            try:
                yield json.loads(line)
            except ValueError:
                continue  # a line cut short by the daemon's stop


def _first_after(times: list[float], t: float) -> float | None:
    """The first of the sorted ``times`` at or after ``t``."""
    k = bisect.bisect_left(times, t)
    return times[k] if k < len(times) else None


def message_stages(log_dirs: Sequence[Path], *, sender: int, skip_s: float
                   ) -> list[dict[str, float]]:
    """Per data vertex of ``sender``: seconds spent in each of ``STAGES``, the voter that
    decided (``voter``) and the total (``total``)."""
    frames: list[float] = []
    sent_at: dict[int, float] = {}  # sender's seq -> its datagram's send time
    votes_back: dict[tuple[int, int], float] = {}  # (voter, seq) -> received at the sender
    received: dict[int, dict[int, float]] = {}  # voter -> sender's seq -> received there
    own_sent: dict[int, tuple[list[float], list[int]]] = {}  # voter -> its vertices' sends
    for node, directory in enumerate(log_dirs):
        times: list[float] = []
        seqs: list[int] = []
        got: dict[int, float] = {}
        for rec in _lines(Path(directory) / "trace.ndjson"):
            kind = rec[0]
            if kind == "c" and node == sender:
                frames.append(rec[1])
            elif kind == "s":
                for origin, seq in rec[3]:
                    if origin != node:
                        continue  # a repair of another's vertex
                    if node == sender:
                        sent_at.setdefault(seq, rec[1])
                    else:
                        times.append(rec[1])
                        seqs.append(seq)
            elif kind == "r":
                for origin, seq in rec[4]:
                    if node == sender and origin != sender:
                        votes_back.setdefault((origin, seq), rec[1])
                    elif node != sender and origin == sender:
                        got.setdefault(seq, rec[1])
        if node != sender:
            received[node] = got
            own_sent[node] = (times, seqs)
    frames.sort()
    made: dict[int, tuple[float, float]] = {}  # seq -> (made, ordered) at the sender
    for rec in _lines(Path(log_dirs[sender]) / "delivery.jsonl"):
        if (isinstance(rec, dict) and rec.get("type") == "delivery"
                and rec.get("sender") == sender and rec.get("position") is not None):
            made.setdefault(int(rec["seq"]), (float(rec["send_ts"]), float(rec["ts"])))
    if not made:
        return []
    start = min(t for t, _ in made.values()) + skip_s
    out: list[dict[str, float]] = []
    previous_made: float | None = None
    for seq in sorted(made):
        vertex_at, ordered = made[seq]
        last_made, previous_made = previous_made, vertex_at
        if vertex_at < start or last_made is None or seq not in sent_at:
            continue
        frame = _first_after(frames, last_made)
        if frame is None or frame > vertex_at:
            continue  # no frame of its own (a vertex of the window's backlog)
        decisive: tuple[float, int, float, float] | None = None
        for voter, got in received.items():
            t_recv = got.get(seq)
            if t_recv is None:
                continue
            times, seqs = own_sent[voter]
            k = bisect.bisect_right(times, t_recv)
            if k == len(times):
                continue
            back = votes_back.get((voter, seqs[k]))
            if back is None or back > ordered:
                continue
            if decisive is None or back > decisive[0]:
                decisive = (back, voter, t_recv, times[k])
        if decisive is None:
            continue
        back, voter, t_recv, vote_sent = decisive
        points = [frame, vertex_at, sent_at[seq], t_recv, vote_sent, back, ordered]
        row = {name: points[i + 1] - points[i] for i, name in enumerate(STAGES)}
        row["voter"] = voter
        row["total"] = ordered - frame
        out.append(row)
    return out

