"""A simulated multicast network with seeded fault injection (JGroups DISCARD / DUPL /
DELAY / SHUFFLE as one layer).

Section 1 of the ToTo paper assumes "an unreliable broadcast domain": datagrams may be
lost, duplicated, delayed and reordered, independently per receiver. ``SimNetwork``
turns one multicast into per-receiver arrivals: each receiver loses it with probability
``loss``, gets two copies with probability ``duplicate``, and each copy arrives after
``delay + U(0, jitter)``, plus ``U(0, reorder_window)`` with probability ``reorder``.
Links can be overridden per direction (asymmetric links), and one slow node has every
delay of its links multiplied by ``slow_factor``. Randomness is one seeded
``random.Random``; the network keeps no clock of its own.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class LinkFaults:
    loss: float = 0.0
    duplicate: float = 0.0
    reorder: float = 0.0
    delay: float = 0.0005
    """Base one-way delay, seconds."""
    jitter: float = 0.0002
    reorder_window: float = 0.003
    """Extra delay of a reordered copy, uniform in [0, reorder_window] seconds."""


@dataclass(frozen=True, slots=True)
class NetworkConfig:
    default: LinkFaults = field(default_factory=LinkFaults)
    links: Mapping[tuple[int, int], LinkFaults] = field(default_factory=dict)
    """Overrides per direction ``(source, destination)``: asymmetric links."""
    slow_node: int | None = None
    slow_factor: float = 10.0


@dataclass(slots=True)
class NetworkStats:
    multicasts: int = 0
    copies_delivered: int = 0
    lost: int = 0
    duplicated: int = 0
    reordered: int = 0


class SimNetwork:
    def __init__(self, config: NetworkConfig, members: Sequence[int], rng: random.Random) -> None:
        self.config = config
        self.members = tuple(members)
        self.rng = rng
        self.stats = NetworkStats()

    def faults(self, src: int, dst: int) -> LinkFaults:
        return self.config.links.get((src, dst), self.config.default)

    def multicast(
        self, src: int, data: bytes, now: float
    ) -> tuple[list[tuple[float, int]], list[int]]:
        """Arrivals ``(time, destination)`` of one multicast datagram, and who lost it."""
        rng, stats, cfg = self.rng, self.stats, self.config
        stats.multicasts += 1
        arrivals: list[tuple[float, int]] = []
        lost: list[int] = []
        for dst in self.members:
            if dst == src:
                continue
            f = self.faults(src, dst)
            if f.loss and rng.random() < f.loss:
                stats.lost += 1
                lost.append(dst)
                continue
            copies = 2 if f.duplicate and rng.random() < f.duplicate else 1
            stats.duplicated += copies - 1
            for _ in range(copies):
                delay = f.delay + rng.uniform(0.0, f.jitter)
                if f.reorder and rng.random() < f.reorder:
                    delay += rng.uniform(0.0, f.reorder_window)
                    stats.reordered += 1
                if cfg.slow_node is not None and cfg.slow_node in (src, dst):
                    delay *= cfg.slow_factor
                arrivals.append((now + delay, dst))
                stats.copies_delivered += 1
        return arrivals, lost
