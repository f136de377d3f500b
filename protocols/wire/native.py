"""One behaviour, two implementations: the native data path or the Python reference.

Theory of operation. The per-datagram wire work (sealing, opening, the replay guard,
decoding and encoding the data-plane datagram of section 1 of the ToTo paper) has a native
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
else Python. A Node may be given its own core instead (the simulator mixes them). It
decodes through ``make_decoder``; it seals, opens and guards against replays through
``make_sealer``, natively only where ``AMCAST_SEAL=native`` asks for it on a native core
(``NativeSealer``: the extension's authenticator behind the Python one's surface; off by
default, docs/native.md).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial
from types import ModuleType
from typing import Any

from .. import extension
from ..vocabulary import SERVICE_BY_CODE
from . import membership
from .auth import Authenticator, Sealed
from .codec import (
    KINDS,
    AnyDatagram,
    Datagram,
    Fragment,
    Kind,
    MembershipDatagram,
    SwapDatagram,
    Vertex,
    encode_body,
    encode_membership_body,
    encode_swap_body,
)
from .codec import decode_body as pure_decode_body
from .keys import Keyring
from .limits import WireLimits
from .replay import ReplayGuard, SessionState

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
SEAL_ENV = "AMCAST_SEAL"
CORES = ("auto", "pure", "native")
SEAL_BY_DEFAULT = True
"""Whether a node on the native core also seals, opens and guards against replays
natively when ``AMCAST_SEAL`` does not say (docs/native.md, *Sealing at the Node*: with
the batched socket I/O, a tenth less CPU per message at light load and when idle)."""


def requested_core(core: str | None = None) -> str:
    """``core`` if given, else ``AMCAST_CORE`` as given (``auto`` when unset);
    ``ValueError`` for another value."""
    value = (os.environ.get(CORE_ENV, "") if core is None else core).strip().lower() or "auto"
    if value not in CORES:
        raise ValueError(f"{CORE_ENV}={value!r}: expected one of {', '.join(CORES)}")
    return value


def native_module() -> ModuleType | None:
    """The extension module if it is built for this package's interface
    (``protocols.extension``), whatever ``AMCAST_CORE`` says."""
    return extension.load()


def selected(core: str | None = None) -> ModuleType | None:
    """The extension module when it is the selected core (``core``, else
    ``AMCAST_CORE``), ``None`` for Python."""
    core = requested_core(core)
    if core == "pure":
        return None
    module = native_module()
    if module is None and core == "native":
        why = extension.problem() or "the extension amcast_native is not built (make rust)"
        raise ImportError(f"{CORE_ENV}=native but {why}")
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


def make_decoder(limits: WireLimits, core: str | None = None) -> Decode:
    """A decoder of the selected core: called with an authentic body it returns what
    ``codec.decode_body(body, limits)`` returns and raises the same ``DecodeError``
    (reason and detail). An extension built before its ``Decoder`` took these arguments
    (a stale ``make rust``) counts as absent: Python under ``auto``, ``ImportError``
    under ``native``. ``core``: ``pure``, ``native`` or ``auto`` (``None``:
    ``AMCAST_CORE``)."""
    module = selected(core)
    if module is not None:
        try:
            return native_decoder(module, limits)
        except (AttributeError, TypeError) as exc:  # a build older than this module
            if requested_core(core) == "native":
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


def decoder_name(decode: Decode) -> str:
    """``native`` or ``pure``: the core of a decoder ``make_decoder`` made."""
    return "pure" if isinstance(decode, partial) else "native"


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


# ----------------------------------------------------------------------------- sealing


def seal_core(core: str | None = None, seal: str | None = None) -> str:
    """``native`` or ``pure``: the core that seals, opens and guards against replays for a
    node of decoding core ``core``. ``seal`` (else ``AMCAST_SEAL``; ``pure``, ``native``,
    ``auto`` or unset) may turn it on or off; unset, a native core seals natively only if
    ``SEAL_BY_DEFAULT``. Never native where the decoding core is not."""
    value = (os.environ.get(SEAL_ENV, "") if seal is None else seal).strip().lower() or "auto"
    if value not in CORES:
        raise ValueError(f"{SEAL_ENV}={value!r}: expected one of {', '.join(CORES)}")
    if value == "pure" or (value == "auto" and not SEAL_BY_DEFAULT):
        return "pure"
    module = selected(core)
    if module is None or not hasattr(module.Authenticator, "open_session"):
        if value == "native" and requested_core(core) == "native":
            raise ImportError(f"{SEAL_ENV}=native but the extension amcast_native is older "
                              "than amcast (make rust)")
        return "pure"
    return "native"


def make_sealer(keys: Keyring | None, session: bytes, *, replay_window_s: float,
                max_sessions: int, core: str | None = None,
                seal: str | None = None) -> Authenticator | NativeSealer:
    """The Node's sealer: ``auth.Authenticator``, or ``NativeSealer`` where ``seal_core``
    says ``native``."""
    if seal_core(core, seal) == "native":
        module = selected(core)
        assert module is not None
        return NativeSealer(module, keys, session, replay_window_s=replay_window_s,
                            max_sessions=max_sessions)
    return Authenticator(keys, session, replay_window_s=replay_window_s,
                         max_sessions=max_sessions)


def encode_plain(dg: AnyDatagram) -> bytes:
    """The body of ``dg``, unsealed (what ``codec.encode`` seals)."""
    if type(dg) is Datagram:
        return encode_body(dg)
    if isinstance(dg, MembershipDatagram):
        return encode_membership_body(dg)
    if isinstance(dg, SwapDatagram):
        return encode_swap_body(dg)
    return encode_body(dg)


Encode = Callable[[AnyDatagram], bytes]
"""``encode_plain``: a datagram in, its unsealed body out."""


def make_encoder(core: str | None = None) -> Encode:
    """An encoder of the selected core: called with a datagram it returns what
    ``encode_plain(dg)`` returns (the same bytes) and raises what it raises. The native
    one writes the data-plane ``Datagram`` itself and hands anything else (membership,
    swap, a field of an unusual type) to ``encode_plain``. ``core``: as ``make_decoder``."""
    module = selected(core)
    if module is None:
        return encode_plain
    return native_encoder(module)


def native_encoder(module: ModuleType) -> Encode:
    """The extension's ``Encoder``, falling back to ``encode_plain``."""
    encoder: Encode = module.Encoder(
        [KINDS[code] for code in range(Kind.MEMBERSHIP)],
        [SERVICE_BY_CODE[code] for code in range(3)],
        Vertex, Datagram, Fragment, encode_plain)
    return encoder


def encoder_name(encode: Encode) -> str:
    """``native`` or ``pure``: the core of an encoder ``make_encoder`` made."""
    return "pure" if encode is encode_plain else "native"


def _blank_state(wall_ms: int) -> SessionState:
    return SessionState(0, 0, 0, wall_ms, 0, 0)


class NativeGuard:
    """What the Node reads of ``auth.Authenticator.guard`` (its status queries), from the
    native replay guard: ``sessions``, refreshed at each read, and ``evicted``."""

    __slots__ = ("_sealer",)

    def __init__(self, sealer: NativeSealer) -> None:
        self._sealer = sealer

    @property
    def sessions(self) -> dict[bytes, SessionState]:
        return self._sealer.refreshed()

    @property
    def evicted(self) -> int:
        return int(self._sealer.inner.evicted)


class NativeSealer:
    """``amcast_native.Authenticator`` behind the surface of ``auth.Authenticator`` that the
    Node uses: ``seal``, ``open`` with ``last_admitted``, ``unseal`` and ``admit`` (the
    simulator's decode-once), ``set_keys``, ``secure``, ``keys``, ``send_key_id``,
    ``session`` and ``guard``.

    The replay state lives in the extension; the Node binds each session to the node id
    it speaks for (``SessionState.sender``) and compares sessions by identity, so this
    keeps one ``SessionState`` per session for it, a new one exactly when the native
    guard created the session's state (``open_session`` and ``admit`` say so), as the
    Python guard hands out a new object then. Of its fields only ``sender`` and
    ``last_heard_ms`` are kept current per datagram; ``guard.sessions`` refreshes the
    rest from the extension (status queries: clock offsets, key status)."""

    __slots__ = ("_keys", "_max", "_states", "guard", "inner", "last_admitted", "seal",
                 "session")

    def __init__(self, module: ModuleType, keys: Keyring | None, session: bytes, *,
                 replay_window_s: float, max_sessions: int) -> None:
        self.inner = module.Authenticator(keys.keys if keys is not None else None, session,
                                          replay_window_s=replay_window_s,
                                          max_sessions=max_sessions)
        self._keys = keys
        self._max = max_sessions
        self.session = session
        self.seal: Callable[[bytes, int], bytes] = self.inner.seal
        self._states: dict[bytes, SessionState] = {}
        self.guard = NativeGuard(self)
        self.last_admitted: SessionState | None = None

    @property
    def secure(self) -> bool:
        return self._keys is not None

    @property
    def keys(self) -> Keyring | None:
        return self._keys

    @property
    def send_key_id(self) -> int:
        return int(self.inner.send_key_id)

    def set_keys(self, keys: Keyring, wall_ms: int) -> None:
        if self._keys is None:
            raise ValueError("an insecure node cannot take keys without a restart")
        self.inner.set_keys(keys.keys, wall_ms)
        self._keys = keys

    def _state(self, session: bytes, created: bool, wall_ms: int) -> SessionState:
        states = self._states
        state = None if created else states.get(session)
        if state is None:
            if len(states) >= 2 * self._max:
                states = self.refreshed()  # forget the sessions the native guard dropped
            state = states[session] = _blank_state(wall_ms)
        else:
            state.last_heard_ms = wall_ms
        return state

    def open(self, data: bytes, wall_ms: int) -> bytes:
        """``Authenticator.open``: the body of an authentic, fresh, first-seen datagram;
        ``DecodeError`` (same reason and detail) otherwise."""
        body, session, created = self.inner.open_session(data, wall_ms)
        self.last_admitted = None if session is None else self._state(session, created, wall_ms)
        return body  # type: ignore[no-any-return]

    def unseal(self, data: bytes) -> tuple[Sealed | None, bytes]:
        """``Authenticator.unseal``: the header and the body, no replay check."""
        header, body = self.inner.unseal(data)
        return (None if header is None else Sealed(*header)), body

    def admit(self, sealed: Sealed | None, wall_ms: int) -> SessionState | None:
        """``Authenticator.admit``: the replay check of a datagram ``unseal`` opened."""
        if sealed is None:
            return None
        created = self.inner.admit(sealed.key_id, sealed.newest_key, sealed.session,
                                   sealed.counter, sealed.sent_ms, wall_ms)
        return self._state(sealed.session, created, wall_ms)

    def refreshed(self) -> dict[bytes, SessionState]:
        """Every session the native guard holds, its ``SessionState`` refreshed from it
        (those it dropped are forgotten here)."""
        states = self._states
        out: dict[bytes, SessionState] = {}
        for session, values in self.inner.session_states():
            st = states.get(session)
            if st is None:
                st = _blank_state(0)
            (st.highest, bitmap, st.last_sent_ms, st.last_heard_ms, st.key_id, st.newest_key,
             st.offset_ms, st.offset_prev_ms, st.offset_since_ms) = values
            st.bitmap = int.from_bytes(bitmap, "little")
            out[session] = st
        self._states = out
        return out
