"""Redundant links (as knet offers): two transports at once, every datagram sent on both.

Theory of operation: ``network.redundant`` names a second interface (and, over unicast,
the members' addresses on it). ``RedundantTransport`` opens one transport per link with
the same contract (``MulticastTransport`` or ``UnicastTransport``), sends each datagram
on both and hands what either receives to the engine. The second copy of a datagram is
dropped by the layer that already drops duplicates: the replay guard of the sealed wire
(``amcast_drops_total{reason="replayed"}`` counts them, about one per datagram while
both links work), or the reliable layer's duplicate check on an insecure cluster. So a
cut, flapping or lossy link costs nothing but its copies: the other one carries the
traffic, no view changes, nothing stalls (``tests/deploy/test_netns_redundant.py``).

Over multicast both receive sockets are bound to the group's port; each is set to get
only the groups it joined itself on its own interface (``IP_MULTICAST_ALL`` off), and
both skip datagrams sent from either of this daemon's two send sockets (loopback
copies). Per-link counters (``links``) show which link is down.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable

from .config import NetworkSection
from .transport import MulticastTransport
from .unicast import UnicastTransport

Link = MulticastTransport | UnicastTransport


class RedundantTransport:
    """Two links, one engine (module docstring)."""

    def __init__(self, links: list[Link]) -> None:
        self.links = links
        own = {link.own_address for link in links}
        for link in links:
            if isinstance(link, MulticastTransport):
                link.own_addresses = own
                link.receive_only_joined()
        self.own_address = links[0].own_address
        self.io = links[0].io
        """``socket_io``'s implementation on the links (the same on both)."""
        self.on_send_error: Callable[[str, str], None] | None = None

    @property
    def rcvbuf(self) -> int:
        return min(link.rcvbuf for link in self.links)

    @property
    def on_send_error(self) -> Callable[[str, str], None] | None:
        return self._on_send_error

    @on_send_error.setter
    def on_send_error(self, callback: Callable[[str, str], None] | None) -> None:
        self._on_send_error = callback
        for link in getattr(self, "links", []):
            link.on_send_error = callback

    @property
    def send_errors(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for i, link in enumerate(self.links):
            for reason, n in link.send_errors.items():
                total[f"link{i}_{reason}"] += n
        return total

    @property
    def datagrams_sent(self) -> int:
        return sum(link.datagrams_sent for link in self.links)

    @property
    def bytes_sent(self) -> int:
        return sum(link.bytes_sent for link in self.links)

    @property
    def datagrams_received(self) -> int:
        return sum(link.datagrams_received for link in self.links)

    @property
    def bytes_received(self) -> int:
        return sum(link.bytes_received for link in self.links)

    def link_status(self) -> list[dict[str, object]]:
        """Per link: its interface and counters (which one is down?)."""
        return [{"interface": link.net.interface, "port": link.net.port,
                 "datagrams_sent": link.datagrams_sent,
                 "datagrams_received": link.datagrams_received,
                 "send_errors": dict(link.send_errors)} for link in self.links]

    def set_peers(self, peers: dict[int, str]) -> None:
        """A reload of the first link's peers (unicast)."""
        first = self.links[0]
        if isinstance(first, UnicastTransport):
            first.set_peers(peers)

    def start(
        self, loop: asyncio.AbstractEventLoop, on_datagrams: Callable[[list[bytes]], None]
    ) -> None:
        for link in self.links:
            link.start(loop, on_datagrams)

    def send(self, datagrams: list[bytes]) -> None:
        for link in self.links:
            link.send(datagrams)

    def close(self) -> None:
        for link in self.links:
            link.close()


def open_links(net: NetworkSection, second: NetworkSection, node_id: int,
               on_resolve_error: Callable[[int, str], None] | None = None
               ) -> RedundantTransport:
    links: list[Link] = []
    try:
        for section in (net, second):
            if section.transport == "unicast":
                links.append(UnicastTransport(section, node_id,
                                              on_resolve_error=on_resolve_error))
            else:
                links.append(MulticastTransport(section))
    except BaseException:
        for link in links:
            link.close()
        raise
    return RedundantTransport(links)
