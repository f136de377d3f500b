"""One engine, two implementations: the native ToTo engine or the Python reference.

``amcast_native.TotalOrderEngine`` (``native/src/ordering``, built by ``make rust``) is
a drop-in for ``engine.TotalOrderEngine``: constructed with the members and an
``OrderingConfig``, the same ``insert`` and ``close`` returning this package's own
``MessageDelivered`` and ``DeliveryRule``, the same ``ProtocolViolation`` reasons and
details, the same counters (``pending``, ``pending_payloads``, ``ntail``, ``phi``, ...).
The Python engine stays the reference: ``tests/native/test_native_engine.py`` feeds both
the same random causal DAGs and requires the same deliveries and errors.

The core is chosen as the data path's is (``amcast.protocols.wire.native``, which this
layer does not import): ``core`` if given (the Node's), else ``AMCAST_CORE``; ``pure``
the Python engine; ``native`` the extension (an ``ImportError`` if it is not built);
unset or ``auto`` the extension when it imports, else Python. A group larger than the
native engine's masks (``ENGINE_MAX_MEMBERS``, 128) gets the Python engine on any core.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from .. import extension
from .config import OrderingConfig
from .engine import TotalOrderEngine

CORE_ENV = "AMCAST_CORE"
CORES = ("auto", "pure", "native")


def _native_class() -> Any:
    """``amcast_native.TotalOrderEngine`` if the extension is built for this package
    (``protocols.extension``) with it, else None."""
    return getattr(extension.load(), "TotalOrderEngine", None)


def max_members() -> int:
    """The most members the native engine orders (0: it is not built)."""
    return int(getattr(extension.load(), "ENGINE_MAX_MEMBERS", 0))


def engine_class(core: str | None = None, n: int = 1) -> Any:
    """The engine class of the selected core for a group of ``n`` members."""
    value = (os.environ.get(CORE_ENV, "") if core is None else core).strip().lower() or "auto"
    if value not in CORES:
        raise ValueError(f"{CORE_ENV}={value!r}: expected one of {', '.join(CORES)}")
    if value == "pure":
        return TotalOrderEngine
    native = _native_class()
    if native is None:
        if value == "native":
            why = extension.problem() or "the extension amcast_native is built without its engine"
            raise ImportError(f"{CORE_ENV}=native but {why} (make rust)")
        return TotalOrderEngine
    if n > max_members():
        return TotalOrderEngine
    return native


def make_engine(members: Sequence[int], config: OrderingConfig | None = None,
                core: str | None = None) -> TotalOrderEngine:
    """A ToTo engine of the selected core (typed as the reference: the native one has
    its surface)."""
    engine: TotalOrderEngine = engine_class(core, len(members))(members, config)
    return engine


def engine_core(engine: object) -> str:
    """``native`` or ``pure``: the core of an engine ``make_engine`` made."""
    return "pure" if isinstance(engine, TotalOrderEngine) else "native"


def engine_core_for(core: str | None, n: int) -> str:
    """``native`` or ``pure``: the core ``make_engine`` picks for ``n`` members."""
    return "pure" if engine_class(core, n) is TotalOrderEngine else "native"
