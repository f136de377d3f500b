"""The transport factory: the transport a configuration names, opened.

``amcast.daemon.transport`` holds the datagram-socket base and IP multicast;
``amcast.daemon.unicast`` and ``amcast.daemon.redundant`` build on it. The choice among
them lives here, above all three, so that the base module never imports the modules
that import it.
"""

from __future__ import annotations

from collections.abc import Callable

from .config import NetworkSection
from .redundant import RedundantTransport, open_links
from .transport import MulticastTransport
from .unicast import UnicastTransport

AnyTransport = MulticastTransport | UnicastTransport | RedundantTransport
"""What the daemon sends and receives through: one contract, three implementations."""


def open_transport(net: NetworkSection, node_id: int,
                   on_resolve_error: Callable[[int, str], None] | None = None
                   ) -> AnyTransport:
    """The transport ``network.transport`` names (``unicast``: ``amcast.daemon.unicast``),
    on two links with ``network.redundant`` (``amcast.daemon.redundant``)."""
    second = net.second_link()
    if second is not None:
        return open_links(net, second, node_id, on_resolve_error)
    if net.transport == "unicast":
        return UnicastTransport(net, node_id, on_resolve_error=on_resolve_error)
    return MulticastTransport(net)
