"""Datagram I/O on a transport's socket: batched in the native extension, or the Python
loop that is its reference.

Theory of operation. A transport (``transport.py``, ``unicast.py``) opens, configures
and closes its sockets; what it does per datagram goes through a ``SocketIo`` made for
each socket by ``make_socket_io``:

- ``receive(max)`` drains up to ``max`` datagrams, leaving out those from the sources
  ``set_skip`` named (this daemon's own send sockets: the loopback copies of its
  multicasts), and returns ``(datagrams, bytes, skipped, errno)``; ``errno`` is 0 or the
  error that ended the drain (an ICMP error queued on the socket, say), never raised.
- ``send(datagrams)`` sends each datagram to every destination ``set_destinations``
  named, in that order, datagram-major, and returns ``(copies, bytes, refused)``:
  ``refused`` one errno per copy the kernel refused (the reliable layer repairs them,
  as any loss).

``PythonSocketIo`` is one ``recvfrom`` per datagram (and one more that finds the socket
empty) and one ``sendto`` per copy. ``NativeSocketIo`` is ``amcast_native.DatagramIo``
(``native/src/batch_io.rs``): ``recvmmsg`` and ``sendmmsg``, up to 32 datagrams a call,
one call into the extension per wake-up and per send. Both return the same values for
the same traffic (``tests/daemon/test_socket_io.py`` runs both over loopback).

Which one: the native one where the data path's core is native (``AMCAST_CORE``:
``native``, or ``auto``/unset with the extension built) and ``AMCAST_IO`` is unset,
``auto`` or ``native``; ``AMCAST_IO=pure`` keeps the Python loop on the native core,
and ``AMCAST_IO=native`` without the extension is an ``ImportError``. A destination
that is no IP literal (an IPv6 address with a scope) sends through the Python loop.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from ..protocols import extension
from ..protocols.wire.native import CORE_ENV

IO_ENV = "AMCAST_IO"
CHOICES = ("auto", "pure", "native")
MAX_DATAGRAM = 65535

Address = tuple[str, int]


class SocketIo(Protocol):
    """What a transport does per datagram (module docstring)."""

    name: str

    def set_skip(self, sources: Iterable[Address]) -> None: ...

    def set_destinations(self, destinations: Iterable[Address]) -> None: ...

    def receive(self, max_datagrams: int) -> tuple[list[bytes], int, int, int]: ...

    def send(self, datagrams: Sequence[bytes]) -> tuple[int, int, list[int]]: ...


class PythonSocketIo:
    """One ``recvfrom`` per datagram received, one ``sendto`` per copy sent."""

    name = "pure"

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._skip: set[Address] = set()
        self._destinations: list[Address] = []

    def set_skip(self, sources: Iterable[Address]) -> None:
        self._skip = {(host, port) for host, port in sources}

    def set_destinations(self, destinations: Iterable[Address]) -> None:
        self._destinations = list(destinations)

    def receive(self, max_datagrams: int) -> tuple[list[bytes], int, int, int]:
        got: list[bytes] = []
        nbytes = skipped = error = 0
        skip = self._skip
        recvfrom = self._sock.recvfrom
        for _ in range(max_datagrams):
            try:
                data, addr = recvfrom(MAX_DATAGRAM)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:
                error = exc.errno or -1  # no errno: counted as send_error
                break
            if skip and addr[:2] in skip:  # IPv6 addresses are 4-tuples
                skipped += 1
                continue
            got.append(data)
            nbytes += len(data)
        return got, nbytes, skipped, error

    def send(self, datagrams: Sequence[bytes]) -> tuple[int, int, list[int]]:
        copies = nbytes = 0
        refused: list[int] = []
        sendto = self._sock.sendto
        destinations = self._destinations
        for data in datagrams:
            for dest in destinations:
                try:
                    sendto(data, dest)
                except OSError as exc:
                    refused.append(exc.errno or -1)  # no errno: counted as send_error
                    continue
                copies += 1
                nbytes += len(data)
        return copies, nbytes, refused


class NativeSocketIo:
    """``amcast_native.DatagramIo``: ``recvmmsg`` and ``sendmmsg`` on the socket's
    descriptor (the socket object stays the transport's, and open while this is used)."""

    name = "native"

    def __init__(self, sock: socket.socket, native_class: Any) -> None:
        self._sock = sock  # keeps the descriptor alive
        self._native = native_class(sock.fileno())
        self._fallback: PythonSocketIo | None = None

    def set_skip(self, sources: Iterable[Address]) -> None:
        self._native.set_skip([(host, port) for host, port in sources])

    def set_destinations(self, destinations: Iterable[Address]) -> None:
        wanted = list(destinations)
        try:
            self._native.set_destinations(wanted)
        except ValueError:  # no IP literal: these go through the Python loop
            self._fallback = PythonSocketIo(self._sock)
            self._fallback.set_destinations(wanted)
        else:
            self._fallback = None

    def receive(self, max_datagrams: int) -> tuple[list[bytes], int, int, int]:
        got, nbytes, skipped, error = self._native.receive(max_datagrams)
        return got, nbytes, skipped, error

    def send(self, datagrams: Sequence[bytes]) -> tuple[int, int, list[int]]:
        if self._fallback is not None:
            return self._fallback.send(datagrams)
        try:
            copies, nbytes, refused = self._native.send(datagrams)
        except TypeError:  # not a list of bytes (a bytearray, a memoryview): copy
            copies, nbytes, refused = self._native.send([bytes(d) for d in datagrams])
        return copies, nbytes, refused


def wanted() -> str:
    """``AMCAST_IO``: ``pure``, ``native`` or ``auto`` (also for unset)."""
    value = os.environ.get(IO_ENV, "").strip().lower() or "auto"
    if value not in CHOICES:
        raise ValueError(f"{IO_ENV}={value!r}: expected one of {', '.join(CHOICES)}")
    return value


def native_class(core: str | None = None) -> Any:
    """``amcast_native.DatagramIo`` where the selection (module docstring) picks it, else
    None."""
    value = (os.environ.get(CORE_ENV, "") if core is None else core).strip().lower() or "auto"
    asked = wanted()
    if value == "pure" or asked == "pure":
        return None
    found = getattr(extension.load(), "DatagramIo", None)
    if found is None and asked == "native":
        raise ImportError(f"{IO_ENV}=native but the extension amcast_native is not built "
                          f"with its batched I/O (make rust): {extension.problem()}")
    return found


def make_socket_io(sock: socket.socket, core: str | None = None) -> SocketIo:
    """The I/O of ``sock``: native or the Python loop, as the selection says."""
    found = native_class(core)
    if found is None:
        return PythonSocketIo(sock)
    return NativeSocketIo(sock, found)
