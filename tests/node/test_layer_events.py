"""Each layer keeps the events it raises; the Node hands them out in the order raised.

The view session raises deliveries, the membership layer view changes, the Node drops,
backpressure and messages in doubt (``docs/architecture.md``, *The layer contracts*).
Whoever reads ``Node.events`` must see one sequence in the order things happened: a
view's flush deliveries before the ``ViewInstalled`` of the view after it, and no event
twice or lost."""

from __future__ import annotations

import pytest
from amcast.protocols.events import BatchDelivered, Event, ViewInstalled
from amcast.protocols.node import Node
from amcast.protocols.simulation.cluster import Cluster, Workload
from amcast.protocols.simulation.faults import Fault


def _out_of_order(stream: list[Event]) -> list[str]:
    """Deliveries of a view after the node installed a later one."""
    installed = 0
    bad = []
    for ev in stream:
        if type(ev) is ViewInstalled:
            installed = max(installed, ev.view)
        elif type(ev) is BatchDelivered and ev.view < installed:
            bad.append(f"delivery of view {ev.view} after view {installed} was installed")
    return bad


def test_the_checker_sees_a_delivery_after_the_next_view() -> None:
    late = BatchDelivered(1, 1, (b"x",), 1, 0, None, None, None, None, None, 0.0, 5)
    view = ViewInstalled(7, (0, 1), True, (), (), (), 5, 1.0)
    assert _out_of_order([late, view]) == []
    assert _out_of_order([view, late])


@pytest.mark.parametrize("seed", [3, 17, 42])
def test_flush_deliveries_come_before_the_next_view(seed: int,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    streams: dict[int, list[Event]] = {}
    events = Node.events

    def recorded(self: Node) -> list[Event]:
        out = events(self)
        streams.setdefault(id(self), []).extend(out)
        return out

    monkeypatch.setattr(Node, "events", recorded)
    cluster = Cluster(4, seed=seed)
    cluster.schedule(Fault(0.6, "crash", (3,)))
    cluster.run(Workload(messages_per_node=30, interval=0.03), max_time=6.0, settle=1.0)
    survivors = [cluster.nodes[i] for i in range(3)]
    for node in survivors:
        stream = streams[id(node)]
        assert sum(type(ev) is ViewInstalled for ev in stream) >= 1  # the view without 3
        assert _out_of_order(stream) == []
        # nothing is left behind in a layer below
        assert node.membership.take_events() == []
        assert node.membership.session is not None and node.membership.session.events == []
    # every survivor delivered the same messages, each once
    delivered = [[(ev.sender, ev.seq) for ev in streams[id(n)] if type(ev) is BatchDelivered]
                 for n in survivors]
    assert all(len(d) == len(set(d)) for d in delivered)
    assert delivered[0] and delivered[0] == delivered[1] == delivered[2]
