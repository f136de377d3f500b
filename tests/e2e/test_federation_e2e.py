"""End-to-end: federated clusters of real amcastd processes on loopback.

Two clusters (``a``, ``b``) of three daemons each, one shared key ring, cross-cluster
traffic over sealed UDP unicast. Clients on several daemons of both clusters send
cross-cluster messages (to ``a`` and ``b``) interleaved with local ones; a listener on
every daemon records what it delivers. Checked: every cross-cluster message reaches
every listener once (no loss, no duplicate), all listeners deliver them in one order
(increasing global timestamps), every member of a cluster delivers its whole sequence
(local and cross-cluster) identically; and a daemon killed with SIGKILL and restarted
joins again and delivers the later messages in the common order; a message to a
cluster that is down is reported ``undelivered`` past its deadline.
"""

from __future__ import annotations

import itertools
import json
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from amcast.analytics.federation import find_cycle
from amcast.protocols.errors import ClientError

from amcast.client import BlockingClient, DeliveredBatch, Undelivered
from amcast.localcluster import free_port
from amcast.localfederation import LocalFederation
from tests.steady import STEADY
from tools.faultrelay import FaultRelay

pytestmark = pytest.mark.processes
GROUP = "g"
Record = tuple[bytes, str, bool]
"""(payload, message id, cross-cluster)."""


@pytest.fixture
def federation() -> Iterator[LocalFederation]:
    path = Path(tempfile.mkdtemp(prefix="amcf-", dir="/tmp"))
    fed = LocalFederation(2, 3, path, protocol={**STEADY}, metrics=False)
    fed.start(timeout=60)
    try:
        yield fed
    finally:
        fed.stop(timeout=10)
        shutil.rmtree(path, ignore_errors=True)


def listen(sock: str, name: str) -> BlockingClient:
    client = BlockingClient(sock, name=name, timeout=60)
    client.join(GROUP)
    return client


def drain(client: BlockingClient, want: int, timeout: float = 90.0) -> list[Record]:
    """Deliveries until ``want`` of them arrived (or the timeout: the caller compares)."""
    got: list[Record] = []
    deadline = time.monotonic() + timeout
    while len(got) < want:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        try:
            event = client.next_event(left)
        except ClientError:
            break
        if isinstance(event, DeliveredBatch):
            got += [(d.payload, d.message_id, bool(d.clusters)) for d in event]
    return got


def globals_of(records: list[Record]) -> list[bytes]:
    return [p for p, _, cross in records if cross]


def test_two_clusters_deliver_cross_cluster_messages_in_one_order(
        federation: LocalFederation) -> None:
    sockets = {(name, i): s for name in federation.names
               for i, s in enumerate(federation.sockets(name))}
    listeners = {key: listen(s, f"listen-{key[0]}{key[1]}") for key, s in sockets.items()}
    senders = {key: BlockingClient(sockets[key], name=f"send-{key[0]}{key[1]}", timeout=20)
               for key in (("a", 0), ("b", 1), ("a", 2))}
    with pytest.raises(ClientError) as refused:
        senders[("a", 0)].send(b"x", GROUP, clusters=["a", "nowhere"])
    assert refused.value.code == "unknown_cluster"
    rounds = 20
    for k in range(rounds):
        for (cluster, node), client in senders.items():
            client.send(f"g-{cluster}{node}-{k}".encode(), GROUP, "agreed",
                        clusters=["a", "b"])
            if k % 2 == 0:  # a local message of the sender's cluster alone
                client.send(f"l-{cluster}{node}-{k}".encode(), GROUP, "agreed")
    for client in senders.values():
        client.sync(20)
    n_global = rounds * len(senders)
    local_per_sender = (rounds + 1) // 2
    expect_local = {"a": 2 * local_per_sender, "b": local_per_sender}
    seen = {key: drain(client, n_global + expect_local[key[0]])
            for key, client in listeners.items()}
    for client in [*listeners.values(), *senders.values()]:
        client.close()

    common = globals_of(seen[("a", 0)])
    assert len(common) == n_global and len(set(common)) == n_global  # none lost or twice
    for key, records in seen.items():
        assert globals_of(records) == common, f"{key} delivered another global order"
        assert len(records) == n_global + expect_local[key[0]], key
        assert len({mid for _, mid, _ in records}) == len(records), key
    for cluster in federation.names:  # one whole sequence per cluster
        first = seen[(cluster, 0)]
        for i in (1, 2):
            assert seen[(cluster, i)] == first, f"{cluster}{i} differs from {cluster}0"
        assert all(p.startswith(b"g-") or p.startswith(f"l-{cluster}".encode())
                   for p, _, _ in first)

    # the delivery logs: a ``global`` record per delivery, in order; merged, no cycle
    federation.stop(timeout=10)
    edges = []
    for name, cluster in federation.members.items():
        for n in cluster.nodes:
            records = [json.loads(line) for line in
                       (n.log_dir / "delivery.jsonl").read_text().splitlines()]
            msgs = [r["msg"] for r in records if r["type"] == "global"]
            assert [r["index"] for r in records if r["type"] == "global"] == list(
                range(n_global)), (name, n.node)
            assert {r["cluster"] for r in records if r["type"] == "global"} == {name}
            edges += list(itertools.pairwise(msgs))
    assert find_cycle(edges) is None


def test_a_killed_daemon_restarts_and_follows_the_common_order(
        federation: LocalFederation) -> None:
    a, b = federation.members["a"], federation.members["b"]
    sender = BlockingClient(a.sockets[0], name="sender", timeout=60)
    watch = {("a", 1): listen(a.sockets[1], "wa1"), ("b", 0): listen(b.sockets[0], "wb0")}

    def burst(tag: str, count: int) -> list[bytes]:
        sent = [f"{tag}-{k}".encode() for k in range(count)]
        for payload in sent:
            sender.send(payload, GROUP, "agreed", clusters=["a", "b"])
        sender.sync(60)
        return sent

    before = burst("before", 10)
    b.kill(2)
    b.wait_exit(2, 10)
    during = burst("during", 10)  # b goes on with two of three members
    b.restart(2, timeout=60, wait_view=3)
    rejoined = listen(b.sockets[2], "wb2")
    after = burst("after", 10)
    total = len(before) + len(during) + len(after)
    seen = {key: globals_of(drain(client, total)) for key, client in watch.items()}
    tail = globals_of(drain(rejoined, len(after)))
    for client in [sender, rejoined, *watch.values()]:
        client.close()

    assert seen[("a", 1)] == seen[("b", 0)]
    assert sorted(seen[("a", 1)]) == sorted(before + during + after)
    # the restarted daemon delivers what comes after it joined, in the common order
    assert set(after) <= set(tail)
    common = seen[("b", 0)]
    assert tail == common[common.index(tail[0]):][:len(tail)]


def wait_view(client: BlockingClient, members: list[int], timeout: float = 40.0) -> None:
    """Until ``client``'s daemon reports a primary view of exactly ``members``."""
    deadline = time.monotonic() + timeout
    while True:
        view = client.view
        if view is not None and view.primary and sorted(view.members) == members:
            return
        left = deadline - time.monotonic()
        assert left > 0, f"no primary view of {members}: {client.view}"
        try:
            client.next_event(left)  # views arrive as events; deliveries are not kept
        except ClientError:
            continue


def test_a_partition_inside_one_cluster_while_cross_cluster_traffic_flows() -> None:
    """Cluster b runs on UDP unicast through a fault relay; b2 is cut off from b0 and b1
    while a client of a sends to a and b, then the cut heals. b0 and b1 (the primary
    component) and a deliver everything in one order; b2 rejoins with an order gap,
    takes the federation state again and delivers what follows in that order."""
    path = Path(tempfile.mkdtemp(prefix="amcp-", dir="/tmp"))
    ports = [free_port() for _ in range(3)]
    relay = FaultRelay(ports)
    fed = LocalFederation(2, 3, path, protocol={"suspect_timeout": 2.0}, metrics=False,
                          options={"b": {"transport": "unicast", "unicast_ports": ports,
                                         "peers": [relay.peers_of(i) for i in range(3)]}})
    try:
        with relay:
            fed.start(timeout=60)
            a, b = fed.members["a"], fed.members["b"]
            sender = BlockingClient(a.sockets[0], name="sender", timeout=60)
            watch = {"a1": listen(a.sockets[1], "wa1"), "b0": listen(b.sockets[0], "wb0")}
            views = BlockingClient(b.sockets[1], name="views", timeout=20)

            def burst(tag: str, count: int) -> list[bytes]:
                sent = [f"{tag}-{k}".encode() for k in range(count)]
                for payload in sent:
                    sender.send(payload, GROUP, "agreed", clusters=["a", "b"])
                sender.sync(60)
                return sent

            before = burst("before", 10)
            relay.cut([2], [0, 1])
            relay.cut([0, 1], [2])
            wait_view(views, [0, 1])
            during = burst("during", 10)
            relay.heal()
            wait_view(views, [0, 1, 2])
            rejoined = listen(b.sockets[2], "wb2")
            after = burst("after", 10)
            total = len(before) + len(during) + len(after)
            seen = {key: globals_of(drain(client, total)) for key, client in watch.items()}
            tail = globals_of(drain(rejoined, len(after)))
            status = rejoined.status()
            for client in [sender, views, rejoined, *watch.values()]:
                client.close()
    finally:
        fed.stop(timeout=10)
        shutil.rmtree(path, ignore_errors=True)
    assert seen["a1"] == seen["b0"]
    assert sorted(seen["a1"]) == sorted(before + during + after)
    assert set(after) <= set(tail)
    common = seen["b0"]
    assert tail == common[common.index(tail[0]):][:len(tail)]
    assert status["federation"]["rejoins"] == 1


def test_a_message_to_a_cluster_that_is_down_is_reported_past_its_deadline() -> None:
    """Cluster b stops; a client of a sends to a and b: past ``federation.deadline_s``
    its daemon reports the messages ``undelivered`` (reason ``deadline``, outcome
    ``unknown``, waiting for b), once, and goes on with them; a's local traffic flows."""
    path = Path(tempfile.mkdtemp(prefix="amcd-", dir="/tmp"))
    fed = LocalFederation(2, 1, path, protocol={**STEADY}, metrics=False,
                          extra={"federation": {"deadline_s": 2.0}})
    try:
        fed.start(timeout=60)
        fed.members["b"].stop(timeout=10)
        sender = BlockingClient(fed.members["a"].sockets[0], name="sender", timeout=60)
        first = sender.send(b"g0", GROUP, clusters=["a", "b"])
        sender.send(b"g1", GROUP, clusters=["a", "b"])
        sender.sync(30)
        event = sender.next_event(30)
        local = sender.send(b"local", GROUP)
        sender.sync(30)
        status = sender.status()
        sender.close()
    finally:
        fed.stop(timeout=10)
        shutil.rmtree(path, ignore_errors=True)
    assert isinstance(event, Undelivered), event
    assert event.messages == range(first, first + 2)
    assert (event.reason, event.outcome, event.clusters) == ("deadline", "unknown", ("b",))
    assert local == first + 2
    assert status["federation"]["reported_undelivered"] == 2
    assert status["federation"]["in_flight"] == 2  # still sent
