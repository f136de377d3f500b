"""The membership state file: what ``Node.state_to_persist`` hands out, kept durably.

Theory of operation: the sans-IO Node produces a small record (incarnation, ballots,
the latest view it knows) whenever it changes; the daemon must have it on disk before
it sends the datagrams of the same step (a promise or a vote that was sent must not be
forgotten by a restart: that is what keeps view ids unique and view agreements safe
across crashes, ``amcast.protocols.membership.durable``). ``StateFile.write`` writes a
temporary file in the same directory, fsyncs it, renames it over the old one and fsyncs
the directory: a crash leaves the old record or the new one, never a torn file. Mode
0600. Changes happen only at view changes, so the cost is a few fsyncs per view change.
A write that fails (``OSError``: no space, a read-only or failing disk) leaves the old
record and removes its partial copy; the daemon then sends nothing until the record is
on disk (``amcast.daemon.runner``).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from ..protocols.errors import ConfigurationError
from ..protocols.membership.durable import DurableState


class StateFile:
    def __init__(self, directory: str, node_id: int) -> None:
        self.directory = Path(directory)
        self.path = self.directory / f"node-{node_id}.state"
        self.node_id = node_id

    def load(self) -> DurableState | None:
        """The previous incarnation's record (``None``: first start here)."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ConfigurationError(f"cannot read the state file {self.path}: {exc}") from None
        return DurableState.decode(data, self.node_id)

    def prepare(self) -> None:
        """Create the directory (owner-only) and check it is writable."""
        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigurationError(
                f"node.state_dir {self.directory} cannot be created: {exc.strerror}"
            ) from None
        if not os.access(self.directory, os.W_OK):
            raise ConfigurationError(f"node.state_dir {self.directory} is not writable")

    def write(self, data: bytes) -> None:
        """Replace the record durably, or raise ``OSError`` and leave the old one (a full
        or read-only disk: the daemon then sends nothing until a write succeeds)."""
        tmp = self.path.with_suffix(".tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                view = memoryview(data)
                while view:  # a short write (a disk filling up) must not pass as whole
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)  # the partial copy only takes space the retry needs
            raise
        os.replace(tmp, self.path)
        dfd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
