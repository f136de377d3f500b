"""Key files for the CLI: make, rotate and retire the group key ring (``amcast keygen``).

Theory of operation: the ring's text format and rules are ``amcast.protocols.wire.keys``.
A key file is written whole to a temporary file (mode 0400) in the same folder and
renamed over the old one, so a daemon reloading on SIGHUP reads either the old ring or
the new one, never half of one, and the file is never open to anyone but its owner.
Keys come from ``secrets.token_bytes`` (the OS's CSPRNG).
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from .protocols.errors import ConfigurationError
from .protocols.wire.keys import KEY_BYTES, Keyring

DEFAULT_KEY_FILE = "/etc/amcast/authkey"


def new_keyring() -> Keyring:
    return Keyring.single(secrets.token_bytes(KEY_BYTES))


def read_keyring(path: Path) -> Keyring:
    """The ring in ``path`` (``ConfigurationError``: missing, unreadable, malformed)."""
    try:
        text = path.read_text(encoding="ascii")
    except FileNotFoundError:
        raise ConfigurationError(f"{path} does not exist (make it: amcast keygen -f {path})") \
            from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigurationError(f"{path} cannot be read: {exc}") from None
    return Keyring.parse(text, source=str(path))


def write_keyring(path: Path, keys: Keyring, owner_gid: int | None = None) -> None:
    """Replace ``path`` atomically with ``keys``, mode 0400."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o400)
    try:
        os.fchmod(fd, stat.S_IRUSR)
        if owner_gid is not None:
            os.fchown(fd, -1, owner_gid)
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(keys.format())
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with_tmp = Path(tmp)
        if with_tmp.exists():
            with_tmp.unlink()
        raise


def create(path: Path, force: bool = False) -> Keyring:
    if path.exists() and not force:
        raise ConfigurationError(
            f"{path} exists: --rotate adds a key to it, --force replaces it (every node then "
            "needs the new file before it can talk to the others)")
    keys = new_keyring()
    write_keyring(path, keys)
    return keys


def rotate(path: Path) -> Keyring:
    keys = read_keyring(path).rotated(secrets.token_bytes(KEY_BYTES))
    write_keyring(path, keys)
    return keys


def retire(path: Path) -> Keyring:
    keys = read_keyring(path).retired()
    write_keyring(path, keys)
    return keys
