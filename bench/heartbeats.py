"""What an idle member's heartbeat costs the Node that receives it (``amcast bench node``).

An idle member repeats the same heartbeat every interval, sealed afresh each time; the
receiver compares its body with the sender's last one (``amcast.protocols.repeats``) and,
when the view's session applied it already, takes it as a sign of life alone
(``MembershipLayer.renew``). Measured: wall-clock microseconds per datagram of
``receive_datagram`` plus ``events`` at a Node of a 3-member view, for the same heartbeat
repeated (the renewal path) and for heartbeats whose bodies differ (the full path: each
reports one more vertex known, so each is decoded and applied). Both include the AES-GCM
opening and the replay check, which every datagram pays.
"""

from __future__ import annotations

import random
import time

from amcast.protocols.node import Node
from amcast.protocols.node_config import NodeConfig
from amcast.protocols.wire.auth import Authenticator
from amcast.protocols.wire.codec import Datagram, Kind, encode
from amcast.protocols.wire.keys import Keyring
from amcast.protocols.wire.membership import ViewRecord

KEY = b"benchmark-group-key!"
WALL = 100.0
MEMBERS = [0, 1, 2]


def _node() -> Node:
    node = Node(NodeConfig(group_key=KEY), node_id=0, members=MEMBERS, rng=random.Random(1),
                now=0.0, initial_view=ViewRecord.agreed(MEMBERS))
    node.wall_offset = WALL
    return node


def _heartbeat(reported: int) -> Datagram:
    """Node 1's heartbeat in view 1, reporting ``reported`` vertices of node 2 known."""
    return Datagram(Kind.HEARTBEAT, 1, 1, 0, (), (), ((0, 0), (1, 0), (2, reported)))


def _per_datagram(count: int, *, repeated: bool) -> tuple[float, int]:
    node = _node()
    peer = Authenticator(Keyring.single(KEY), bytes(16))
    step = 1e-5
    data = [encode(_heartbeat(0 if repeated else i), peer, int((0.1 + i * step + WALL) * 1000))
            for i in range(count + 1)]
    node.receive_datagram(data[0], 0.1)
    node.datagrams_to_send()
    node.events()
    renewed = 0
    started = time.perf_counter()
    for i in range(1, count + 1):
        renewed += node.receive_datagram(data[i], 0.1 + i * step)
        node.events()
    return (time.perf_counter() - started) / count * 1e6, renewed


def heartbeat_costs(count: int = 5000, rounds: int = 3) -> dict[str, float]:
    """Best of ``rounds`` runs of ``count`` datagrams each, per path."""
    repeat = min(_per_datagram(count, repeated=True)[0] for _ in range(rounds))
    full = min(_per_datagram(count, repeated=False)[0] for _ in range(rounds))
    renewed = _per_datagram(min(count, 200), repeated=True)[1]
    return {"repeated heartbeat µs (renewal only)": repeat,
            "changing heartbeat µs (full path)": full,
            "repeats taken as renewals (of 200)": float(renewed)}
