"""Sealing helpers for codec tests: a fixed session and wall clock, no replay check.

The codec tests decode the same bytes many times (hypothesis, mutations); the replay
guard would rightly refuse the second time, so they decode with ``decode_unchecked``.
Replay protection has its own tests (``test_sealing.py``).
"""

from __future__ import annotations

from amcast.protocols.wire.auth import Authenticator
from amcast.protocols.wire.codec import Datagram, MembershipDatagram, decode_unchecked
from amcast.protocols.wire.keys import Keyring
from amcast.protocols.wire.limits import WireLimits

WALL_MS = 1_790_000_000_000
SESSION = bytes(range(16))


def authenticator(key: bytes | None, session: bytes = SESSION) -> Authenticator:
    return Authenticator(Keyring.single(key) if key is not None else None, session)


def decode(data: bytes, auth: Authenticator, limits: WireLimits) -> Datagram | MembershipDatagram:
    return decode_unchecked(data, auth, limits)[1]
