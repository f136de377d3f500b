"""Datagram sealing: AES-256-GCM on every datagram, keyed per sender session, replay-proof.

Theory of operation (the wire layer's gate of section 1 of the ToTo paper: the group is
whoever holds the group key; the LAN is not trusted). Layout of a sealed datagram::

    version u8 | flags u8 (SEALED) | key id u16 | newest key id u16 | session 16 bytes
    | counter u64 | sent ms u64 | AES-256-GCM(body) with its 16-byte tag

All big-endian. The 38-byte header is the AEAD's associated data, so every bit of it is
authenticated; the body (header of the protocol message and the payloads) is encrypted.

Nonces never repeat for a key. A node draws a fresh random 16-byte *session* at every
start (``os.urandom`` in the Node, never the seeded protocol RNG) and derives its
sending key for each group key as HKDF-SHA256(group key, salt = session, info =
"amcast/3 datagram"). The GCM nonce is the session's datagram counter (64 bits, from 0,
+1 per datagram, never reset within a session). A (subkey, nonce) pair could repeat only
if two starts drew the same 128-bit session (probability about 2^-128 per pair of
starts) or one process sent 2^64 datagrams; no state on disk is needed, so restoring a
backup or cloning a machine cannot make a node reuse a nonce either.

Receivers derive the same subkey from the session in the header (cached per session
once a datagram of it authenticated). The replay guard (``replay``) checks freshness and
the session's counter window before the tag is checked, and records the datagram after.

A node configured ``insecure`` sends ``version u8 | flags u8 (0) | body`` and accepts
only that; a node with keys accepts only sealed datagrams. Mixing the two is a
configuration error that shows as counted drops (``auth_missing``,
``auth_unexpected``), never as silent acceptance.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from ..errors import DecodeError
from .keys import Keyring
from .limits import PREFIX_BYTES, SEAL_HEADER_BYTES, TAG_BYTES, WIRE_VERSION
from .replay import ReplayGuard, SessionState

FLAG_SEALED = 0x01
SESSION_BYTES = 16
HKDF_INFO = b"amcast/3 datagram"
_HEADER = struct.Struct(">BBHH16sQQ")
assert _HEADER.size == SEAL_HEADER_BYTES
_unpack_header = _HEADER.unpack_from
_pack_header = _HEADER.pack
_COPY_BELOW = 4096
"""Sealed datagrams up to this many bytes are sliced (copied) for AES-GCM, longer ones
are passed as memoryviews: a view costs more than copying a few kilobytes."""
_NONCE_PAD = bytes(4)
_INSECURE_PREFIX = bytes((WIRE_VERSION, 0))
_MAX_CIPHERS = 1024
"""Receive-side subkeys cached (one per peer session and key id)."""


@dataclass(frozen=True, slots=True)
class Sealed:
    """The authenticated header of a sealed datagram (what the replay guard needs)."""

    key_id: int
    newest_key: int
    session: bytes
    counter: int
    sent_ms: int


def derive(key: bytes, session: bytes) -> AESGCM:
    subkey = HKDF(algorithm=hashes.SHA256(), length=32, salt=session, info=HKDF_INFO).derive(key)
    return AESGCM(subkey)


class Authenticator:
    """Seals outgoing bodies and opens incoming datagrams for one node."""

    __slots__ = (
        "_chosen_at_ms",
        "_counter",
        "_keys",
        "_newest",
        "_recv_ciphers",
        "_send_ciphers",
        "guard",
        "last_admitted",
        "send_key_id",
        "session",
    )

    def __init__(self, keys: Keyring | None, session: bytes, *, replay_window_s: float = 30.0,
                 max_sessions: int = 1024) -> None:
        if len(session) != SESSION_BYTES:
            raise ValueError(f"a session is {SESSION_BYTES} bytes")
        self._keys = keys
        self._newest = keys.newest if keys is not None else 0
        """``keys.newest``, advertised in every sealed datagram (a property: kept here)."""
        self.session = session
        self._counter = 0
        self._send_ciphers: dict[int, AESGCM] = {}
        self._recv_ciphers: dict[tuple[int, bytes], AESGCM] = {}
        self.guard = ReplayGuard(replay_window_s, max_sessions)
        self.send_key_id = keys.newest if keys is not None else 0
        self._chosen_at_ms = -(1 << 62)
        self.last_admitted: SessionState | None = None
        """The replay state of the session ``open`` last admitted (``None``: insecure)."""

    @property
    def secure(self) -> bool:
        return self._keys is not None

    @property
    def keys(self) -> Keyring | None:
        return self._keys

    def set_keys(self, keys: Keyring, wall_ms: int) -> None:
        """A reloaded key ring (rollover): new ids are accepted at once; the sending key
        follows the peers' advertisements (``_choose_send_key``)."""
        if self._keys is None:
            raise ValueError("an insecure node cannot take keys without a restart")
        self._keys = keys
        self._newest = keys.newest
        self._send_ciphers.clear()
        self._recv_ciphers.clear()
        self._choose_send_key(wall_ms)

    def _choose_send_key(self, wall_ms: int) -> None:
        keys = self._keys
        assert keys is not None
        bound = keys.newest
        peers = self.guard.newest_of_peers(wall_ms, self.session)
        if peers is not None and peers < bound:
            bound = peers
        chosen = keys.newest_at_most(bound)
        self.send_key_id = chosen if chosen is not None else keys.ids[0]
        self._chosen_at_ms = wall_ms

    def seal(self, body: bytes, wall_ms: int) -> bytes:
        keys = self._keys
        if keys is None:
            return _INSECURE_PREFIX + body
        if wall_ms - self._chosen_at_ms >= 500:
            self._choose_send_key(wall_ms)
            self.guard.maybe_sweep(wall_ms)
        key_id = self.send_key_id
        cipher = self._send_ciphers.get(key_id)
        if cipher is None:
            key = keys.get(key_id)
            assert key is not None
            cipher = self._send_ciphers[key_id] = derive(key, self.session)
        counter = self._counter
        self._counter = counter + 1
        header = _pack_header(WIRE_VERSION, FLAG_SEALED, key_id, self._newest, self.session,
                              counter, wall_ms)
        return header + cipher.encrypt(_NONCE_PAD + header[22:30], body, header)

    def unseal(self, data: bytes) -> tuple[Sealed | None, memoryview | bytes]:
        """Check the tag and decrypt (no replay check): the header and the body.
        ``DecodeError`` if the datagram is not authentic."""
        if len(data) < PREFIX_BYTES:
            raise DecodeError("truncated", "shorter than the prefix")
        if data[0] != WIRE_VERSION:
            raise DecodeError("bad_version", f"version {data[0]}")
        flags = data[1]
        if flags & ~FLAG_SEALED:
            raise DecodeError("bad_flags", f"flags {flags:#x}")
        keys = self._keys
        if keys is None:
            if flags & FLAG_SEALED:
                raise DecodeError("auth_unexpected", "sealed datagram, node is insecure")
            return None, memoryview(data)[PREFIX_BYTES:]
        if not flags & FLAG_SEALED:
            raise DecodeError("auth_missing", "unsealed datagram, node has a group key")
        if len(data) < SEAL_HEADER_BYTES + TAG_BYTES:
            raise DecodeError("truncated", "shorter than the sealed header")
        _, _, key_id, newest, session, counter, sent_ms = _HEADER.unpack_from(data)
        sealed = Sealed(key_id, newest, session, counter, sent_ms)
        return sealed, self._decrypt(key_id, session, data)

    def _decrypt(self, key_id: int, session: bytes, data: bytes) -> bytes:
        slot = (key_id, session)
        cipher = self._recv_ciphers.get(slot)
        fresh = cipher is None
        if cipher is None:
            assert self._keys is not None
            key = self._keys.get(key_id)
            if key is None:
                raise DecodeError("unknown_key", f"key id {key_id}")
            cipher = derive(key, session)
        # a short datagram is cheaper to slice (copy) than to view; a long one, to view
        sealed_body: bytes | memoryview
        header: bytes | memoryview
        if len(data) <= _COPY_BELOW:
            sealed_body, header = data[SEAL_HEADER_BYTES:], data[:SEAL_HEADER_BYTES]
        else:
            view = memoryview(data)
            sealed_body, header = view[SEAL_HEADER_BYTES:], view[:SEAL_HEADER_BYTES]
        try:
            body = cipher.decrypt(_NONCE_PAD + data[22:30], sealed_body, header)
        except InvalidTag:
            raise DecodeError("auth_failed", "bad tag") from None
        if fresh:  # cached only once authentic: forgeries cannot fill the cache
            if len(self._recv_ciphers) >= _MAX_CIPHERS:
                self._recv_ciphers.clear()
            self._recv_ciphers[slot] = cipher
        return body

    def admit(self, sealed: Sealed | None, wall_ms: int) -> SessionState | None:
        """The replay check of an authentic datagram; ``DecodeError`` if stale or seen."""
        if sealed is None:
            return None
        guard = self.guard
        guard.check(sealed.session, sealed.counter, sealed.sent_ms, wall_ms)
        if sealed.session == self.session:
            # a copy of our own datagram (the daemon skips its loopback echoes by source
            # address, so this one came from elsewhere: a replay or a reflection)
            raise DecodeError("replayed", "own session")
        return guard.admit(sealed.session, sealed.counter, sealed.sent_ms, wall_ms,
                           sealed.key_id, sealed.newest_key)

    def open(self, data: bytes, wall_ms: int) -> memoryview | bytes:
        """The body of an authentic, fresh, first-seen datagram; ``DecodeError`` otherwise.
        The replay checks run before the decryption (cheap refusals), the record after."""
        if (self._keys is None or len(data) < SEAL_HEADER_BYTES + TAG_BYTES
                or data[0] != WIRE_VERSION or data[1] != FLAG_SEALED):
            sealed, body = self.unseal(data)  # insecure, or a refusal with its reason
            self.last_admitted = self.admit(sealed, wall_ms)
            return body
        _, _, key_id, newest, session, counter, sent_ms = _unpack_header(data)
        guard = self.guard
        guard.check(session, counter, sent_ms, wall_ms)
        if session == self.session:
            raise DecodeError("replayed", "own session")
        body = self._decrypt(key_id, session, data)  # no ``Sealed``: not needed here
        self.last_admitted = guard.admit(session, counter, sent_ms, wall_ms, key_id, newest)
        return body
