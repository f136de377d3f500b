"""Who may scrape the metrics endpoint: its TLS context and its basic-auth users.

Theory of operation: ``load_access(section)`` runs once at start-up (and in ``amcastd
--check``) and turns the ``[metrics]`` TLS and users-file keys into a ``MetricsAccess``:
an ``ssl.SSLContext`` (server side; with ``tls_client_ca_file`` it requires a client
certificate signed by that CA: mutual TLS) and a ``BasicAuth``. Every problem is a
``ConfigurationError`` of one line naming the key: a file that is missing or
unreadable, a certificate and key that do not load or do not match, a users file that
is not the ``basic_auth_users: {name: bcrypt hash}`` mapping of Prometheus'
``web.config.yml``, and a users file or private key that others may access or its group
may write (as ``security.key_file``: ``chmod 600``, or 640 for the daemon's group).

``BasicAuth`` checks ``Authorization: Basic`` credentials. bcrypt is slow on purpose
(tens of ms at cost 10), so the check is split: ``cached`` is the fast path for the
event loop (a keyed BLAKE2b digest of the last password that verified for the user,
compared in constant time: a scrape every 15 s costs one bcrypt check, not one per
scrape); ``verify`` runs bcrypt (constant-time comparison inside ``checkpw``; unknown
users are checked against a dummy hash so that the time does not tell which names
exist) and is meant for a worker thread (bcrypt releases the GIL). The cache holds one
digest per configured user, so it is bounded by the users file.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import hmac
import os
import secrets
import ssl
import stat
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ..protocols.errors import ConfigurationError

MAX_USERS_FILE_BYTES = 1 << 20
"""A users file larger than this is refused (it is read whole before parsing)."""
USERS_KEY = "basic_auth_users"
BCRYPT_PREFIXES = (b"$2a$", b"$2b$", b"$2y$")
MAX_CREDENTIAL_BYTES = 1024
"""Longer ``Authorization`` values are refused without decoding."""


@dataclasses.dataclass(frozen=True)
class Credentials:
    user: str
    password: bytes


def parse_basic(header: bytes | None) -> Credentials | None:
    """``Basic base64(user:password)`` as ``Credentials``; None when absent or malformed."""
    if header is None or len(header) > MAX_CREDENTIAL_BYTES:
        return None
    scheme, _, token = header.strip().partition(b" ")
    if scheme.lower() != b"basic":
        return None
    try:
        raw = base64.b64decode(token.strip(), validate=True)
        user, sep, password = raw.partition(b":")
        if not sep:
            return None
        return Credentials(user.decode("utf-8"), password)
    except (binascii.Error, UnicodeDecodeError):
        return None


class BasicAuth:
    """The users of the users file and their bcrypt hashes."""

    def __init__(self, users: Mapping[str, bytes]) -> None:
        import bcrypt  # only with basic auth configured (no import cost otherwise)

        self.users = MappingProxyType(dict(users))
        self._key = secrets.token_bytes(32)
        self._verified: dict[str, bytes] = {}
        cost = max(int(h[4:6]) for h in self.users.values()) if self.users else 10
        self._dummy = bcrypt.hashpw(b"amcast: no such user", bcrypt.gensalt(cost))
        """Checked for unknown users: as slow as the slowest real hash."""

    def _digest(self, creds: Credentials) -> bytes:
        return hashlib.blake2b(creds.user.encode() + b"\0" + creds.password, key=self._key).digest()

    def cached(self, creds: Credentials) -> bool:
        """True when these credentials verified before (no bcrypt; for the event loop)."""
        known = self._verified.get(creds.user)
        return known is not None and hmac.compare_digest(known, self._digest(creds))

    def verify(self, creds: Credentials) -> bool:
        """bcrypt check (slow: call it from a worker thread); remembers a success."""
        import bcrypt

        hashed = self.users.get(creds.user)
        try:  # bcrypt refuses passwords over 72 bytes (ValueError): a failed check
            ok = bcrypt.checkpw(creds.password, hashed if hashed is not None else self._dummy)
        except ValueError:
            bcrypt.checkpw(b"", self._dummy)  # the same time as a wrong password
            return False
        if ok and hashed is not None:
            self._verified[creds.user] = self._digest(creds)
            return True
        return False


@dataclasses.dataclass(frozen=True)
class MetricsAccess:
    """What ``load_access`` made of the ``[metrics]`` section (both optional)."""

    tls: ssl.SSLContext | None = None
    auth: BasicAuth | None = None


def _readable(path: str, key: str) -> os.stat_result:
    try:
        st = os.stat(path)
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise ConfigurationError(f"metrics.{key} {path!r}: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ConfigurationError(f"metrics.{key} {path!r}: not a regular file")
    return st


def _private(path: str, key: str) -> None:
    """Readable by us; no permission for others, none but read for the group (0600, or
    0640 where the daemon reads it through its group, as ``security.key_file``)."""
    mode = stat.S_IMODE(_readable(path, key).st_mode)
    if mode & 0o027:
        raise ConfigurationError(
            f"metrics.{key} {path!r} is open to others or writable by its group (mode "
            f"{mode:04o}): chmod 600 {path} (640 to share it with the daemon's group)"
        )


def load_users(path: str) -> dict[str, bytes]:
    """The ``basic_auth_users`` mapping of a ``web.config.yml``-style users file."""
    import yaml  # only with basic auth configured

    _private(path, "basic_auth_users_file")
    where = f"metrics.basic_auth_users_file {path!r}"
    data = Path(path).read_bytes()
    if len(data) > MAX_USERS_FILE_BYTES:
        raise ConfigurationError(f"{where}: larger than {MAX_USERS_FILE_BYTES} bytes")
    try:
        doc: Any = yaml.safe_load(data)
    except yaml.YAMLError as exc:
        problem = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigurationError(f"{where}: not valid YAML ({problem})") from None
    if not isinstance(doc, dict) or set(doc) != {USERS_KEY}:
        keys = sorted(map(str, doc)) if isinstance(doc, dict) else type(doc).__name__
        raise ConfigurationError(
            f"{where}: must hold exactly one mapping, {USERS_KEY}: {{name: bcrypt hash}} "
            f"(found {keys}; TLS is set with metrics.tls_cert_file and metrics.tls_key_file)"
        )
    users = doc[USERS_KEY]
    if not isinstance(users, dict) or not users:
        raise ConfigurationError(f"{where}: {USERS_KEY} must map at least one name to a hash")
    out: dict[str, bytes] = {}
    for name, hashed in users.items():
        if not isinstance(name, str) or not name or ":" in name:
            raise ConfigurationError(
                f"{where}: user {name!r}: a name is a non-empty string without ':'"
            )
        raw = hashed.encode() if isinstance(hashed, str) else b""
        if not raw.startswith(BCRYPT_PREFIXES) or len(raw) != 60 or not raw[4:6].isdigit():
            raise ConfigurationError(
                f"{where}: user {name!r}: not a bcrypt hash ($2y$/$2b$, "
                "60 characters; e.g. htpasswd -nBC 10 NAME)"
            )
        out[name] = raw
    return out


def load_tls(cert: str, key: str, client_ca: str) -> ssl.SSLContext:
    """A server-side context (TLS 1.2 or later); with ``client_ca``, mutual TLS."""
    _readable(cert, "tls_cert_file")
    _private(key, "tls_key_file")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(cert, key)
    except ssl.SSLError as exc:
        raise ConfigurationError(
            f"metrics.tls_cert_file {cert!r} / metrics.tls_key_file {key!r}: do not load as a "
            f"PEM certificate and its private key ({exc.reason or exc})"
        ) from None
    if client_ca:
        _readable(client_ca, "tls_client_ca_file")
        try:
            ctx.load_verify_locations(cafile=client_ca)
        except ssl.SSLError as exc:
            raise ConfigurationError(
                f"metrics.tls_client_ca_file {client_ca!r}: not PEM CA "
                f"certificates ({exc.reason or exc})"
            ) from None
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def load_access(section: Any) -> MetricsAccess:
    """TLS and basic auth of a ``MetricsSection``; ``ConfigurationError`` when unusable."""
    tls = None
    if section.tls_cert_file:
        tls = load_tls(section.tls_cert_file, section.tls_key_file, section.tls_client_ca_file)
    auth = None
    if section.basic_auth_users_file:
        auth = BasicAuth(load_users(section.basic_auth_users_file))
    return MetricsAccess(tls, auth)
