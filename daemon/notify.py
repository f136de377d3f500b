"""systemd ``Type=notify`` support, written by hand (the protocol is one datagram).

Theory of operation: when systemd (or any supervisor, e.g. ``amcast cluster`` and the
tests) sets ``NOTIFY_SOCKET``, the daemon sends ``READY=1`` once it serves,
``STOPPING=1`` when it begins to shut down, ``STATUS=...`` lines, and ``WATCHDOG=1``
every half ``WATCHDOG_USEC`` when the watchdog is enabled (``systemd.watchdog`` in the
config and ``WATCHDOG_USEC`` set, ``WATCHDOG_PID`` absent or ours). A ``NOTIFY_SOCKET``
starting with ``@`` is a Linux abstract socket. Without ``NOTIFY_SOCKET`` every call is a
no-op. Send failures never stop the daemon.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping


class Notifier:
    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        path = env.get("NOTIFY_SOCKET", "")
        self._address: str | None = None
        if path:
            self._address = "\0" + path[1:] if path.startswith("@") else path
        self._sock: socket.socket | None = None
        self.watchdog_interval_s: float | None = None
        usec = env.get("WATCHDOG_USEC")
        pid = env.get("WATCHDOG_PID")
        if usec and (not pid or pid == str(os.getpid())):
            try:
                self.watchdog_interval_s = int(usec) / 2e6
            except ValueError:
                self.watchdog_interval_s = None

    @property
    def enabled(self) -> bool:
        return self._address is not None

    def send(self, *lines: str) -> bool:
        if self._address is None:
            return False
        try:
            if self._sock is None:
                self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            self._sock.sendto("\n".join(lines).encode(), self._address)
        except OSError:
            return False
        return True

    def ready(self, status: str = "") -> bool:
        extra = [f"STATUS={status}"] if status else []
        return self.send("READY=1", f"MAINPID={os.getpid()}", *extra)

    def stopping(self) -> bool:
        return self.send("STOPPING=1")

    def watchdog(self) -> bool:
        return self.send("WATCHDOG=1")

    def status(self, text: str) -> bool:
        return self.send(f"STATUS={text}", f"MAINPID={os.getpid()}")

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
