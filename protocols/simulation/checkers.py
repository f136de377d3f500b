"""Safety and liveness checkers over a simulated run of full Nodes.

The properties of atomic multicast (section 1 of the ToTo paper: atomicity, order,
termination) and of the causal layer below it, checked at the application level, from
what was submitted and what each node delivered:

- integrity: a node delivers a message at most once, only messages that were submitted,
  with the submitted bytes and the right sender;
- validity: every submitted message is delivered at every node (no crashes yet);
- agreement: all nodes deliver the same set of messages;
- total order: the ``agreed``/``safe`` sequences of any two nodes are prefix-consistent
  and every message has the same ``position`` everywhere;
- causal order: if m1 was submitted or delivered at a node before it submitted m2, every
  node delivers m1 before m2 (closed transitively). A ``causal`` message may overtake an
  ``agreed``/``safe`` one (the weaker service wins), so those pairs are exempt.

Each checker returns human-readable violations; empty means the property holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

from protocols.events import ServiceLevel


@dataclass(frozen=True, slots=True)
class SentMessage:
    index: int
    sender: int
    payload: bytes
    service: ServiceLevel
    past: int
    """Bit set of message indexes in the causal past at submission (transitively closed)."""


@dataclass(frozen=True, slots=True)
class Delivery:
    sender: int
    payload: bytes
    service: ServiceLevel
    position: int | None
    time: float


def _identify(sent_by_payload: Mapping[bytes, SentMessage], d: Delivery) -> SentMessage | None:
    return sent_by_payload.get(d.payload)


def integrity(sent: Sequence[SentMessage], logs: Mapping[int, Sequence[Delivery]]) -> list[str]:
    by_payload = {m.payload: m for m in sent}
    out = []
    for node, log in logs.items():
        seen: set[int] = set()
        for d in log:
            m = _identify(by_payload, d)
            if m is None:
                out.append(f"node {node} delivered an unknown payload {d.payload[:24]!r}")
            elif m.sender != d.sender or m.service != d.service:
                out.append(f"node {node} delivered message {m.index} with wrong sender/service")
            elif m.index in seen:
                out.append(f"node {node} delivered message {m.index} twice")
            else:
                seen.add(m.index)
    return out


def validity(sent: Sequence[SentMessage], logs: Mapping[int, Sequence[Delivery]]) -> list[str]:
    out = []
    everything = {m.payload for m in sent}
    for node, log in logs.items():
        missing = everything - {d.payload for d in log}
        if missing:
            out.append(f"node {node} never delivered {len(missing)} of {len(everything)} messages")
    return out


def agreement(logs: Mapping[int, Sequence[Delivery]]) -> list[str]:
    sets = {node: {d.payload for d in log} for node, log in logs.items()}
    out = []
    nodes = sorted(sets)
    for a, b in pairwise(nodes):
        if sets[a] != sets[b]:
            out.append(f"nodes {a} and {b} delivered different sets "
                       f"({len(sets[a] - sets[b])} / {len(sets[b] - sets[a])} differ)")
    return out


def total_order(logs: Mapping[int, Sequence[Delivery]]) -> list[str]:
    out = []
    ordered = {
        node: [d for d in log if d.service is not ServiceLevel.CAUSAL] for node, log in logs.items()
    }
    for node, seq in ordered.items():
        for i, d in enumerate(seq):
            if d.position != i:
                out.append(f"node {node}: message at index {i} has position {d.position}")
                break
    nodes = sorted(ordered)
    for i, a in enumerate(nodes):
        for b in nodes[i + 1 :]:
            for pos, (x, y) in enumerate(zip(ordered[a], ordered[b], strict=False)):
                if x.payload != y.payload:
                    out.append(f"nodes {a} and {b} diverge at total-order position {pos}")
                    break
    return out


def causal_order(sent: Sequence[SentMessage], logs: Mapping[int, Sequence[Delivery]]) -> list[str]:
    """Every message is delivered after every message of its causal past, whatever the
    service levels of the two (a ``causal`` message never overtakes an ordered one)."""
    by_payload = {m.payload: m for m in sent}
    out = []
    for node, log in logs.items():
        delivered = 0
        for d in log:
            m = by_payload.get(d.payload)
            if m is None:
                continue
            early = m.past & ~delivered
            if early:
                first = (early & -early).bit_length() - 1
                out.append(f"node {node} delivered message {m.index} before its cause {first}")
            delivered |= 1 << m.index
    return out


def check_all(sent: Sequence[SentMessage], logs: Mapping[int, Sequence[Delivery]],
              *, expect_validity: bool = True) -> dict[str, list[str]]:
    results = {
        "integrity": integrity(sent, logs),
        "agreement": agreement(logs),
        "total_order": total_order(logs),
        "causal_order": causal_order(sent, logs),
    }
    if expect_validity:
        results["validity"] = validity(sent, logs)
    return results
