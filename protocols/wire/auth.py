"""Datagram authentication: HMAC-SHA256 keyed by the group secret, checked before decoding.

Layout of every datagram: ``version (1 byte) | flags (1 byte) | tag (16 bytes, if flag
AUTHENTICATED) | msgpack body``. The tag covers the two prefix bytes and the body. A node
with a key accepts only tagged datagrams with a valid tag; a node configured
``insecure`` accepts only untagged ones (mixing the two is a configuration error that
shows up as counted drops, not as silent acceptance). Verification uses
``hmac.compare_digest``. This is the wire layer's gate of section 1 (Trans / Transis
assume an authentic group; here the group key is what makes a peer a member).
"""

from __future__ import annotations

import hashlib
import hmac

from amcast.protocols.errors import DecodeError
from amcast.protocols.wire.limits import PREFIX_BYTES, TAG_BYTES, WIRE_VERSION

FLAG_AUTHENTICATED = 0x01


class Authenticator:
    """Seals outgoing bodies and opens incoming datagrams."""

    __slots__ = ("_key",)

    def __init__(self, key: bytes | None) -> None:
        self._key = key

    @property
    def secure(self) -> bool:
        return self._key is not None

    def seal(self, body: bytes) -> bytes:
        if self._key is None:
            return bytes((WIRE_VERSION, 0)) + body
        prefix = bytes((WIRE_VERSION, FLAG_AUTHENTICATED))
        tag = hmac.new(self._key, prefix + body, hashlib.sha256).digest()[:TAG_BYTES]
        return prefix + tag + body

    def open(self, data: bytes) -> memoryview:
        """Return the body of an authentic datagram; raise ``DecodeError`` otherwise."""
        if len(data) < PREFIX_BYTES:
            raise DecodeError("truncated", "shorter than the prefix")
        if data[0] != WIRE_VERSION:
            raise DecodeError("bad_version", f"version {data[0]}")
        flags = data[1]
        if flags & ~FLAG_AUTHENTICATED:
            raise DecodeError("bad_flags", f"flags {flags:#x}")
        view = memoryview(data)
        if self._key is None:
            if flags & FLAG_AUTHENTICATED:
                raise DecodeError("auth_unexpected", "tagged datagram, node is insecure")
            return view[PREFIX_BYTES:]
        if not flags & FLAG_AUTHENTICATED:
            raise DecodeError("auth_missing", "untagged datagram, node has a group key")
        if len(data) < PREFIX_BYTES + TAG_BYTES:
            raise DecodeError("truncated", "shorter than the tag")
        mac = hmac.new(self._key, view[:PREFIX_BYTES], hashlib.sha256)
        mac.update(view[PREFIX_BYTES + TAG_BYTES:])
        tag = view[PREFIX_BYTES : PREFIX_BYTES + TAG_BYTES]
        if not hmac.compare_digest(mac.digest()[:TAG_BYTES], tag):
            raise DecodeError("auth_failed", "bad tag")
        return view[PREFIX_BYTES + TAG_BYTES:]
