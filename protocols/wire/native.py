"""One behaviour, two implementations: the native data path or the Python reference.

Theory of operation. The per-datagram wire work (sealing, opening, the replay guard,
decoding the data-plane datagram of section 1 of the ToTo paper) has a native
implementation in Rust (``native/``, the extension module ``amcast_native``, built by
``make rust``) and the Python one of ``auth``, ``replay`` and ``codec``, which stays the
reference: the differential tests (``tests/native``) and the ``native_sealed`` and
``native_decode`` fuzz targets feed both the same bytes and require the same decisions,
reasons and details, bodies and datagrams.

The native decoder knows the kinds DATA, ACK_ONLY, NACK, REPAIR, HEARTBEAT and
MEMBERSHIP (with every message of ``membership``); a body of another kind (one added to
``codec`` since) goes to ``codec.decode_body``, so a new kind works on either core before
the native side learns it.

``AMCAST_CORE`` selects: ``pure`` the Python modules; ``native`` the extension (an
``ImportError`` if it is not built); unset or ``auto`` the extension when it imports,
else Python. Of the engine's call sites, the Node decodes through ``make_decoder``; the
authenticator and the replay guard are not switched there yet (docs/native.md).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial
from types import ModuleType
from typing import Any

from ..vocabulary import SERVICE_BY_CODE
from . import membership
from .auth import Authenticator
from .codec import KINDS, AnyDatagram, Datagram, Fragment, Kind, MembershipDatagram, Vertex
from .codec import decode_body as pure_decode_body
from .keys import Keyring
from .limits import WireLimits
from .replay import ReplayGuard

Decode = Callable[[bytes | memoryview], AnyDatagram]
"""``codec.decode_body`` with its limits bound: an authentic body in, a datagram out."""

NATIVE_KINDS = 6
"""The native decoder knows the kind codes below this one (DATA to MEMBERSHIP)."""

MEMBERSHIP_CLASSES = [
    membership.Ballot, membership.Member, membership.ViewRecord, membership.Proposal,
    membership.Settings, membership.HeldVertex, membership.Availability, membership.Join,
    membership.Prepare, membership.Promise, membership.Reject, membership.Accept,
    membership.Accepted, membership.Install, membership.Refuse, MembershipDatagram,
]
"""What the native decoder builds a MEMBERSHIP datagram of (with their constructors), in
the order it expects."""

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


def make_decoder(limits: WireLimits) -> Decode:
    """A decoder of the selected core: called with an authentic body it returns what
    ``codec.decode_body(body, limits)`` returns and raises the same ``DecodeError``
    (reason and detail). An extension built before its ``Decoder`` took these arguments
    (a stale ``make rust``) counts as absent: Python under ``auto``, ``ImportError``
    under ``native``."""
    module = selected()
    if module is not None:
        try:
            return native_decoder(module, limits)
        except (AttributeError, TypeError) as exc:  # a build older than this module
            if requested_core() == "native":
                raise ImportError(f"{CORE_ENV}=native but the extension amcast_native is "
                                  f"older than amcast (make rust): {exc}") from exc
    return partial(pure_decode_body, limits=limits)


_decoders: dict[int, tuple[WireLimits, Decode]] = {}
"""The decoder of each ``WireLimits`` by ``id`` (a node keeps one); the entry holds its
limits, which stay alive, so an id is not reused while its entry is here."""


def decode_body(body: bytes | memoryview, limits: WireLimits) -> AnyDatagram:
    """``codec.decode_body`` by the selected core: the Node's call site. The core is chosen
    when a ``WireLimits`` first decodes (``AMCAST_CORE`` is not read per datagram)."""
    entry = _decoders.get(id(limits))
    if entry is None or entry[0] is not limits:
        if len(_decoders) >= 64:
            _decoders.clear()
        entry = _decoders[id(limits)] = (limits, make_decoder(limits))
    return entry[1](body)


def decoder_core(limits: WireLimits) -> str:
    """``native`` or ``pure``: the core ``decode_body`` decodes with for ``limits`` (what
    ``amcastd`` reports as its decoder: ``Node.core``)."""
    entry = _decoders.get(id(limits))
    if entry is None or entry[0] is not limits:
        if len(_decoders) >= 64:
            _decoders.clear()
        entry = _decoders[id(limits)] = (limits, make_decoder(limits))
    return "pure" if isinstance(entry[1], partial) else "native"


def _slot_setters() -> tuple[Any, list[Any], list[Any]] | None:
    """``object.__new__`` and the slot descriptors' ``__set__`` of ``Vertex`` and
    ``Datagram`` (what ``codec._new_vertex`` stores through); ``None`` where the classes
    refuse ``object.__new__`` (the mypyc build): the native decoder calls the
    constructors then."""
    try:
        object.__new__(Vertex)
    except TypeError:
        return None
    fields = (tuple(Vertex.__dataclass_fields__),  # type: ignore[attr-defined]
              tuple(Datagram.__dataclass_fields__))  # type: ignore[attr-defined]
    return (object.__new__, [getattr(Vertex, name).__set__ for name in fields[0]],
            [getattr(Datagram, name).__set__ for name in fields[1]])


def native_decoder(module: ModuleType, limits: WireLimits) -> Decode:
    """The extension's ``Decoder`` of ``limits``, falling back to ``codec.decode_body``
    for the kinds it does not know."""
    decoder: Decode = module.Decoder(
        (limits.max_datagram_bytes, limits.max_array_len, limits.max_members,
         limits.max_nack_ranges, limits.max_vertices, limits.max_items,
         limits.max_message_size, limits.max_held_report),
        [KINDS[code] for code in range(Kind.MEMBERSHIP)],
        [SERVICE_BY_CODE[code] for code in range(3)],
        Vertex, Datagram, Fragment, partial(pure_decode_body, limits=limits), _slot_setters(),
        MEMBERSHIP_CLASSES)
    return decoder
