"""Fuzz target ``datagram``: the datagram codec and a real ``Node`` reacting to its output.

Theory of operation: the input is a short *conversation* heard by node 1 of the group
{1, 2, 3}: a flags byte, then records ``step:u8 | length:u16be | body``. ``body`` is
what follows authentication (the msgpack datagram of ``amcast.protocols.wire.codec``
and, for membership datagrams, ``amcast.protocols.wire.membership``); the harness seals
it as an insecure peer would, so the fuzzer spends its time past the authenticator
(``wire.auth`` is not a target here). Flag bit 0 starts the node already installed in
view 1 of {1, 2, 3} (data plane first), else it starts joining (membership first).

For each record the clock moves ``step`` milliseconds, due timers run, then:

- ``Node.peek`` decodes the datagram with the node's key and limits: it may raise only
  ``DecodeError``; a decoded datagram must survive ``encode`` then ``decode`` unchanged
  (the encoders cut membership ``detail`` texts to 200 bytes; longer ones are compared
  only up to that);
- ``Node.receive_datagram`` takes it (a defect is a counted drop, never an exception),
  and everything the node then emits (state, datagrams, events) is pulled; every
  datagram it sends must decode with its own key: nonsense in must not make it send
  nonsense out.
"""

from __future__ import annotations

import dataclasses
import random
import struct

from amcast.protocols.errors import DecodeError
from amcast.protocols.node import Node
from amcast.protocols.node_config import NodeConfig
from amcast.protocols.vocabulary import ServiceLevel
from amcast.protocols.wire.auth import Authenticator
from amcast.protocols.wire.codec import Datagram, MembershipDatagram, encode
from amcast.protocols.wire.membership import Refuse, Reject, ViewRecord

INSTRUMENT = ("amcast",)
MAX_LEN = 16384
TIMEOUT_S = 10
MEMBERS = (1, 2, 3)
ME = 1
FLAG_IN_VIEW = 0x01
RECORD = struct.Struct(">BH")
CONFIG = NodeConfig(insecure=True)
AUTH = Authenticator(None, bytes(16))  # insecure: fuzzing starts after the seal
DETAIL_CUT = 200
"""``encode_message`` sends at most this many bytes of a reject/refuse detail."""


def new_node(in_view: bool) -> Node:
    view = ViewRecord.agreed(MEMBERS) if in_view else None
    return Node(
        CONFIG, node_id=ME, members=MEMBERS, rng=random.Random(0), now=0.0, initial_view=view
    )


def records(data: bytes) -> list[tuple[int, bytes]]:
    """``(step ms, body)`` records after the flags byte (the last one may be cut short)."""
    out = []
    pos = 1
    while pos + RECORD.size <= len(data):
        step, length = RECORD.unpack_from(data, pos)
        pos += RECORD.size
        out.append((step, data[pos : pos + length]))
        pos += length
    return out


def pack(flags: int, conversation: list[tuple[int, bytes]]) -> bytes:
    """The inverse of ``records``: an input from a flags byte and ``(step, body)`` pairs."""
    return bytes((flags,)) + b"".join(
        RECORD.pack(step, len(body)) + body for step, body in conversation
    )


def _comparable(dg: Datagram | MembershipDatagram) -> Datagram | MembershipDatagram:
    if isinstance(dg, MembershipDatagram) and isinstance(dg.message, Reject | Refuse):
        detail = dg.message.detail.encode("ascii")[:DETAIL_CUT].decode("ascii")
        return dataclasses.replace(dg, message=dataclasses.replace(dg.message, detail=detail))
    return dg


def _check_roundtrip(node: Node, dg: Datagram | MembershipDatagram) -> None:
    again = node.peek(encode(dg, AUTH, 0))
    if _comparable(again) != _comparable(dg):
        raise AssertionError(f"decode(encode(x)) != x:\n{dg!r}\n{again!r}")


def _drain(node: Node) -> None:
    node.state_to_persist()
    for raw in node.datagrams_to_send():
        try:
            node.peek(raw)
        except DecodeError as exc:
            raise AssertionError(f"the node sent a datagram it cannot decode: {exc}") from exc
    node.events()


def test_one_input(data: bytes) -> None:
    if not data:
        return
    node = new_node(bool(data[0] & FLAG_IN_VIEW))
    now = 0.0
    for step, body in records(data):
        now += step / 1000
        due = node.next_timer()
        if due is not None and due <= now:
            node.handle_timer(now)
        sealed = AUTH.seal(body, 0)
        try:
            dg = node.peek(sealed)
        except DecodeError:
            node.receive_datagram(sealed, now)  # the counted-drop path
        else:
            _check_roundtrip(node, dg)
            node.receive_datagram(sealed, now, decoded=(None, body, dg))
        _drain(node)


# ----------------------------------------------------------------------------- seeds


def _conversation(in_view: bool, steps: int, seed: int) -> list[tuple[int, bytes]]:
    """What node 1 hears from nodes 2 and 3 while the three run over a perfect network
    (nodes 2 and 3 submitting small, large and safe messages when in a view)."""
    start = ViewRecord.agreed(MEMBERS) if in_view else None
    nodes = {
        n: Node(
            CONFIG,
            node_id=n,
            members=MEMBERS,
            rng=random.Random(seed * 10 + n),
            now=0.0,
            initial_view=start,
        )
        for n in MEMBERS
    }
    heard: list[tuple[int, bytes]] = []
    now, last = 0.0, 0.0
    for step in range(steps):
        now = round(now + 0.005, 6)
        if in_view and step % 5 == 0 and step < steps // 2:
            nodes[2].submit(bytes([step % 256]) * (1 + step % 40), now)
            service = ServiceLevel.SAFE if step % 3 else ServiceLevel.CAUSAL
            nodes[3].submit(b"y" * (3000 if step == 20 else 2), now, service=service)
        for node in nodes.values():
            due = node.next_timer()
            if due is not None and due <= now:
                node.handle_timer(now)
        for sender, node in nodes.items():
            node.state_to_persist()
            for raw in node.datagrams_to_send():
                for receiver, other in nodes.items():
                    if receiver == sender:
                        continue
                    other.receive_datagram(raw, now)
                    if receiver == ME:
                        heard.append((min(255, round((now - last) * 1000)), raw[2:]))
                        last = now
            node.events()
    return heard


def seeds() -> list[bytes]:
    """Whole and partial conversations, and single datagrams of every kind heard."""
    out: list[bytes] = []
    for in_view in (True, False):
        flags = FLAG_IN_VIEW if in_view else 0
        for seed in range(2):
            talk = _conversation(in_view, 160, seed)
            out.append(pack(flags, talk))
            out.extend(pack(flags, talk[i : i + 8]) for i in range(0, len(talk), 40))
            kinds: dict[tuple[int, int], bytes] = {}
            for _, body in talk:
                if len(body) > 4:
                    kinds.setdefault((body[1], body[4]), body)
            out.extend(pack(flags, [(1, body)]) for body in kinds.values())
    return list(dict.fromkeys(out))
