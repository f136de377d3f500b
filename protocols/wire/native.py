"""One behaviour, two implementations: the native data path or the Python reference.

Theory of operation. The per-datagram wire work (sealing, opening, the replay guard) has
a native implementation in Rust (``native/``, the extension module ``amcast_native``,
built by ``make rust``) and the Python one of ``auth`` and ``replay``, which stays the
reference: the differential tests (``tests/native``) and the ``native_sealed`` fuzz
target feed both the same datagrams and require the same decisions, reasons and bodies.

``AMCAST_CORE`` selects: ``pure`` the Python modules; ``native`` the extension (an
``ImportError`` if it is not built); unset or ``auto`` the extension when it imports,
else Python. The engine's call sites do not use this module yet: it is the switch they
will go through (docs/native.md).
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any

from .auth import Authenticator
from .keys import Keyring
from .replay import ReplayGuard

CORE_ENV = "AMCAST_CORE"
CORES = ("auto", "pure", "native")


def requested_core() -> str:
    """``AMCAST_CORE`` as given (``auto`` when unset); ``ValueError`` for another value."""
    value = os.environ.get(CORE_ENV, "").strip().lower() or "auto"
    if value not in CORES:
        raise ValueError(f"{CORE_ENV}={value!r}: expected one of {', '.join(CORES)}")
    return value


def native_module() -> ModuleType | None:
    """The extension module if it is built, whatever ``AMCAST_CORE`` says."""
    try:
        import amcast_native
    except ImportError:
        return None
    return amcast_native


def selected() -> ModuleType | None:
    """The extension module when it is the selected core, ``None`` for Python."""
    core = requested_core()
    if core == "pure":
        return None
    module = native_module()
    if module is None and core == "native":
        raise ImportError(f"{CORE_ENV}=native but the extension amcast_native is not built "
                          "(make rust)")
    return module


def core_name() -> str:
    """``native`` or ``pure``: what ``make_authenticator`` and ``make_replay_guard`` use."""
    return "pure" if selected() is None else "native"


def make_authenticator(keys: Keyring | None, session: bytes, *, replay_window_s: float = 30.0,
                       max_sessions: int = 1024) -> Any:
    """An authenticator of the selected core: ``seal(body, wall_ms)`` and ``open(data,
    wall_ms)`` behave alike (same bytes, same ``DecodeError`` reasons and details)."""
    module = selected()
    if module is None:
        return Authenticator(keys, session, replay_window_s=replay_window_s,
                             max_sessions=max_sessions)
    return module.Authenticator(keys.keys if keys is not None else None, session,
                                replay_window_s=replay_window_s, max_sessions=max_sessions)


def make_replay_guard(window_s: float, max_sessions: int) -> Any:
    """A replay guard of the selected core (``check``, ``admit``, ``sweep`` alike; the
    native ``admit`` returns the state as a tuple, ``ReplayGuard.state``)."""
    module = selected()
    if module is None:
        return ReplayGuard(window_s, max_sessions)
    return module.ReplayGuard(window_s, max_sessions)
