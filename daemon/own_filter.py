"""A socket filter that drops this daemon's own multicasts in the kernel.

Theory of operation. Daemons on one host hear each other because their send sockets
loop multicasts back (``IP_MULTICAST_LOOP``), and so every daemon's receive socket also
gets a copy of what the daemon itself sent. The transport leaves those out by their
source (``own_addresses``), but only after the copy woke the event loop: one wake-up a
heartbeat interval of an idle daemon, more under load, for nothing. A classic BPF
program attached to the receive socket (``SO_ATTACH_FILTER``, Linux) drops them before
they are queued: it compares the datagram's IP source address and UDP source port with
each of the daemon's send sockets and returns 0 (drop) on a match, the whole datagram
otherwise.

The program reads the headers through the network-header offset (``SKF_NET_OFF``): the
source address at 12 (IPv4) or 8 (IPv6) bytes into the IP header, the UDP source port
right after a header without options or extension headers (20 or 40 bytes), which is
what this daemon's own sends carry. A datagram with options or extension headers is
not matched and passes, and the transport's own check still leaves it out: the filter
can only save wake-ups, never drop another daemon's datagram (its source port or
address differs from every one compared). Where the kernel refuses the filter the
transport runs without it, as before.
"""

from __future__ import annotations

import ctypes
import socket
import struct
from collections.abc import Iterable

SO_ATTACH_FILTER = 26  # Linux, asm-generic (x86-64, arm64)
SKF_NET_OFF = -0x100000

_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_LD_H_ABS = 0x28  # BPF_LD | BPF_H | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K
ACCEPT = 0xFFFFFFFF
DROP = 0

Instruction = tuple[int, int, int, int]  # code, jt, jf, k


def _net(offset: int) -> int:
    return (SKF_NET_OFF + offset) & 0xFFFFFFFF


def _checks(host: str, port: int, ipv6: bool) -> list[tuple[int, int, int]]:
    """``(load code, offset, value)`` that all hold for a datagram from ``(host, port)``."""
    if ipv6:
        raw = socket.inet_pton(socket.AF_INET6, host)
        words = struct.unpack("!4I", raw)
        return [(_LD_H_ABS, _net(40), port)] + [
            (_LD_W_ABS, _net(8 + 4 * i), w) for i, w in enumerate(words)]
    (word,) = struct.unpack("!I", socket.inet_aton(host))
    return [(_LD_H_ABS, _net(20), port), (_LD_W_ABS, _net(12), word)]


def program(sources: Iterable[tuple[str, int]], ipv6: bool = False) -> list[Instruction]:
    """The filter: drop a datagram from any of ``sources``, keep every other one."""
    blocks = [_checks(host, port, ipv6) for host, port in sources]
    length = sum(2 * len(b) for b in blocks)
    drop_at = length + 1  # after the accept
    out: list[Instruction] = []
    for checks in blocks:
        start = len(out)
        end = start + 2 * len(checks)
        for j, (load, offset, value) in enumerate(checks):
            out.append((load, 0, 0, offset))
            here = len(out)  # index of the jump
            last = j == len(checks) - 1
            jt = drop_at - here - 1 if last else 0
            jf = end - here - 1
            if jt > 255 or jf > 255:
                raise ValueError("too many sources for one filter")
            out.append((_JEQ_K, jt, jf, value))
    out.append((_RET_K, 0, 0, ACCEPT))
    out.append((_RET_K, 0, 0, DROP))
    return out


def run(prog: list[Instruction], datagram_from: tuple[str, int], ipv6: bool = False) -> int:
    """What ``prog`` returns for a datagram from ``datagram_from`` (the tests' reference
    interpreter of the three instructions the program uses)."""
    host, port = datagram_from
    if ipv6:
        header = bytearray(40)
        header[8:24] = socket.inet_pton(socket.AF_INET6, host)
    else:
        header = bytearray(20)
        header[12:16] = socket.inet_aton(host)
    packet = bytes(header) + struct.pack("!HH", port, 0)
    acc = pc = 0
    while True:
        code, jt, jf, k = prog[pc]
        if code == _RET_K:
            return k
        if code in (_LD_W_ABS, _LD_H_ABS):
            offset = k - (SKF_NET_OFF & 0xFFFFFFFF)
            size = 4 if code == _LD_W_ABS else 2
            acc = int.from_bytes(packet[offset:offset + size], "big")
            pc += 1
        elif code == _JEQ_K:
            pc += 1 + (jt if acc == k else jf)
        else:
            raise ValueError(f"unknown instruction {code:#x}")


def attach(sock: socket.socket, sources: Iterable[tuple[str, int]], ipv6: bool = False) -> bool:
    """Attach the filter of ``sources`` to ``sock``; False where the kernel refuses it
    (the transport's own check then does the work)."""
    prog = program(sources, ipv6)
    if len(prog) <= 2:
        return False
    code = b"".join(struct.pack("HBBI", *ins) for ins in prog)
    buffer = ctypes.create_string_buffer(code, len(code))
    fprog = struct.pack("HL", len(prog), ctypes.addressof(buffer))
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)
    except OSError:
        return False
    return True
