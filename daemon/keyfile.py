"""The daemon's key file: read the group key ring, refusing a file others could read.

Theory of operation: the key ring (``amcast.protocols.wire.keys``) is what makes a peer
a member, so its file is treated like an ssh private key or corosync's authkey: it must
be a regular file with no permission bits for others and none but read for its group
(``chmod 0400``; 0440 where the daemon reads it through its group, as a Kubernetes
Secret mounted with ``fsGroup`` is), or the daemon does not start
(``ConfigurationError``, one line naming the fix). ``amcast
keygen`` writes such files. The daemon reads it at start and again on SIGHUP (a key
rollover, ``Runner.reload``).
"""

from __future__ import annotations

import os
import stat

from ..protocols.errors import ConfigurationError
from ..protocols.wire.keys import Keyring

MAX_KEY_FILE_BYTES = 64 * 1024


def load_keyring(path: str) -> Keyring:
    """The key ring in ``path``; ``ConfigurationError`` (one line) for a missing,
    unreadable, too open or malformed file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise ConfigurationError(
            f"security.key_file {path} does not exist: make one with `amcast keygen -f {path}` "
            "and copy it to every node (or set protocol.insecure = true for a test)") from None
    except OSError as exc:
        raise ConfigurationError(
            f"security.key_file {path} cannot be read: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ConfigurationError(f"security.key_file {path} is not a regular file")
        if st.st_mode & 0o027:
            raise ConfigurationError(
                f"security.key_file {path} is open to others or writable by its group "
                f"(mode {stat.S_IMODE(st.st_mode):04o}): chmod 0400 {path} (0440 to share "
                "it with the daemon's group)")
        if st.st_size > MAX_KEY_FILE_BYTES:
            raise ConfigurationError(f"security.key_file {path} is too large to be a key file")
        data = os.read(fd, MAX_KEY_FILE_BYTES + 1)
    finally:
        os.close(fd)
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise ConfigurationError(f"security.key_file {path} is not a text key file") from None
    return Keyring.parse(text, source=f"security.key_file {path}")
