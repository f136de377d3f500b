"""One reliable layer, two implementations: the native one or the Python reference.

``amcast_native.ReliableLayer`` (``native/src/reliable``, built by ``make rust``) is a
drop-in for ``layer.ReliableLayer``: constructed with the same arguments, the same
``receive``/``new_vertex``/``handle_timer``/``take_datagrams``/view-change methods
returning the same vertices and this package's own ``Datagram``s, the same
``next_timer``, the same counters (it bumps the node's ``ReliableCounters``), the same
drops (through ``drop``, same reasons and details); it draws from the node's rng and
calls the shared ``Lateness`` and ``PeerLimiter`` as the Python layer does, in the same
order, so a simulation stays seed-identical. ``releaser`` and ``acks`` are views with
the attributes the session, the membership layer and the node read. The Python layer
stays the reference: ``tests/native/test_native_reliable.py`` drives both with the same
traces and requires the same results.

The layer follows the core: ``make_layer`` builds the native one where the core is
native (the Node's ``core``, else ``AMCAST_CORE``: ``native``, or ``auto`` with the
extension built) and ``AMCAST_RELIABLE`` is unset, ``auto`` or ``native``;
``AMCAST_RELIABLE=pure`` keeps the Python layer on the native core (and ``native`` on a
native core without it is an ``ImportError``). A member outside the view or member ids
beyond 64 bits get the Python layer on any core.
"""

from __future__ import annotations

import os
import random
from typing import Any

from .. import extension
from .config import ReliableConfig
from .layer import Drop, ReliableCounters, ReliableLayer
from .ratelimit import PeerLimiter
from .repair import Lateness

CORE_ENV = "AMCAST_CORE"
"""The data path's core (``amcast.protocols.ordering.native``, ``wire.native``)."""
CORES = ("auto", "pure", "native")
RELIABLE_ENV = "AMCAST_RELIABLE"
CHOICES = ("auto", "pure", "native")

_INT64 = range(-(2**63), 2**63)


def _native_class() -> Any:
    """``amcast_native.ReliableLayer`` if the extension is built for this package
    (``protocols.extension``) with it, else None."""
    return getattr(extension.load(), "ReliableLayer", None)


def wanted() -> str:
    """``AMCAST_RELIABLE``: ``pure``, ``native``, or ``auto`` (also for unset: the layer
    follows the core)."""
    value = os.environ.get(RELIABLE_ENV, "").strip().lower() or "auto"
    if value not in CHOICES:
        raise ValueError(f"{RELIABLE_ENV}={value!r}: expected one of {', '.join(CHOICES)}")
    return value


def layer_class(core: str | None = None, node_id: int = 0,
                members: tuple[int, ...] | None = None) -> Any:
    """The layer class for a member ``node_id`` of ``members`` on ``core``."""
    value = (os.environ.get(CORE_ENV, "") if core is None else core).strip().lower() or "auto"
    if value not in CORES:
        raise ValueError(f"{CORE_ENV}={value!r}: expected one of {', '.join(CORES)}")
    asked = wanted()
    if value == "pure" or asked == "pure":
        return ReliableLayer
    native = _native_class()
    if native is None:
        if value == "native" and asked == "native":
            raise ImportError(f"{RELIABLE_ENV}=native on the native core but the extension "
                              "amcast_native is not built with its reliable layer (make rust)")
        return ReliableLayer
    if members is not None and (node_id not in members or len(set(members)) != len(members)
                                or not all(m in _INT64 for m in members)):
        return ReliableLayer
    return native


def make_layer(view_id: int, node_id: int, members: tuple[int, ...], *,
               config: ReliableConfig, rng: random.Random, now: float, drop: Drop,
               counters: ReliableCounters, limiter: PeerLimiter | None = None,
               lateness: Lateness | None = None, core: str | None = None) -> ReliableLayer:
    """A reliable layer of the selected core (typed as the reference: the native one has
    its surface)."""
    layer: ReliableLayer = layer_class(core, node_id, members)(
        view_id, node_id, members, config=config, rng=rng, now=now, drop=drop,
        counters=counters, limiter=limiter, lateness=lateness)
    return layer


def layer_core(layer: object) -> str:
    """``native`` or ``pure``: the core of a layer ``make_layer`` made."""
    return "pure" if isinstance(layer, ReliableLayer) else "native"


def layer_core_for(core: str | None) -> str:
    """``native`` or ``pure``: the core ``make_layer`` picks for a member of its view."""
    return "pure" if layer_class(core) is ReliableLayer else "native"
