"""``python -m tools.floodattack``: send a flood of attack datagrams to a group (loopback).

The attacker of ``amcast bench flood`` and of the flood tests, a process of its own so
that it competes for the CPU as a real one would. An attack tool: not installed with
amcast, run from a source checkout (its root, or ``python tools/floodattack.py``). It
multicasts ``--count`` datagrams to ``--group:--port`` on 127.0.0.1 (TTL 0: they never
leave the host), as fast as it can or at most ``--rate`` per second, and prints one JSON
line: datagrams and bytes sent, seconds, and what the datagrams were. Every choice is
drawn from ``--seed`` (not the sealing session: a fresh random one per run, as a node
draws one per start).

Kinds:

- ``garbage``: random bytes of random length (1 to 1,400), some with a valid-looking
  version/flags prefix.
- ``forged``: well-formed datagrams of every data-plane kind, sealed with a key that is
  not the group's: nacks asking for every vertex of every member
  (ranges ``1 .. 2**62``), data, heartbeats. The receivers' authentication drops them.
- ``replay``: join the group for ``--capture-s`` seconds (or until ``--count`` datagrams),
  record genuine traffic, then send it again, in a loop, byte for byte.
- ``insider``: nacks sealed with the real group key (``--key-file``), of view ``--view``,
  claiming to come from each member in turn: what a member holding the key could do. It
  also listens to the group (decoding with the key) to learn each member's latest
  sequence number, and asks for each member's last 256 vertices, the ones most likely
  not yet stable (still held for retransmission); nacks of vertices never sent or
  already acknowledged by the claimed sender would be refused. Only the receivers' rate
  limits stand in the way.
- ``insider-member``: the same nacks, all claiming to come from one member (the first of
  ``--members``): a member holding the key (compromised, or buggy) that nacks, under its
  own id, the latest 256 vertices of every other member, whatever it received. The
  receivers' flow control judges one member's loss signals against the others', so
  this is the attack that per-member bounds are about; ``insider`` spreads the same
  nacks over every member's id, which a shared group key cannot tell apart.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import struct
import sys
import time
from pathlib import Path
from typing import Any

from amcast.protocols.vocabulary import ServiceLevel
from amcast.protocols.wire.auth import SESSION_BYTES, Authenticator
from amcast.protocols.wire.codec import Datagram, Kind, Vertex, encode
from amcast.protocols.wire.keys import Keyring
from amcast.protocols.wire.limits import MAX_SEQ, WIRE_VERSION

from amcast.keygen import read_keyring

KINDS = ("garbage", "forged", "replay", "insider", "insider-member")
INSIDERS = ("insider", "insider-member")
WRONG_KEY = b"not-the-group-key-0123456789abcdef"


def wall_ms() -> int:
    """The sender's wall clock in ms, as sealing wants it (replay protection)."""
    return int(time.time() * 1000)


def authenticator(keys: Keyring | None) -> Authenticator:
    """A sealing context of this attacker's own (a fresh session, its own counter). The
    session is random, not drawn from ``--seed``: like a node's, a new one each start, or
    a second attack with the same key and seed (``insider`` after ``insider-member``)
    would repeat the first one's session and counters, and the receivers' replay guard
    would drop it as a replay."""
    return Authenticator(keys, os.urandom(SESSION_BYTES))


def garbage(rng: random.Random) -> bytes:
    body = rng.randbytes(rng.randint(1, 1400))
    if rng.random() < 0.5:  # past the version check, into the tag check
        return bytes((WIRE_VERSION, 1)) + body
    return body


def nack_flood(
    auth: Authenticator, sender: int, view: int, members: list[int], ranges: int
) -> bytes:
    """A NACK datagram asking, ``ranges`` times over the members, for all their vertices."""
    nacks = tuple((members[i % len(members)], 1, MAX_SEQ) for i in range(ranges))
    return encode(Datagram(Kind.NACK, sender, view, 0, nacks), auth, wall_ms())


def forged(rng: random.Random, auth: Authenticator, members: list[int], view: int) -> bytes:
    sender = rng.choice(members)
    pick = rng.random()
    if pick < 0.6:
        return nack_flood(auth, sender, view, members, rng.randint(1, 64))
    if pick < 0.8:
        seq = rng.randint(1, 10**6)
        v = Vertex(sender, seq, (), ServiceLevel.AGREED, time.time(), (rng.randbytes(100),))
        return encode(Datagram(Kind.DATA, sender, view, seq, (), (v,)), auth, wall_ms())
    acks = tuple((m, rng.randint(0, 10**6)) for m in members)
    return encode(Datagram(Kind.HEARTBEAT, sender, view, 0, (), (), acks), auth, wall_ms())


class SeqTracker:
    """The latest sequence number of each member in view ``view``, learnt by listening to
    the group with the key (an insider's view of the traffic)."""

    def __init__(self, group: str, port: int, keys: Keyring | None, view: int) -> None:
        from amcast.protocols.wire.limits import WireLimits

        self._sock = open_socket(group, port, listen=True)
        self._sock.setblocking(False)
        self._auth = Authenticator(keys, bytes(SESSION_BYTES))
        self._limits, self._view = WireLimits(), view
        self.latest: dict[int, int] = {}

    def poll(self, limit: int = 512) -> None:
        from amcast.protocols.errors import DecodeError
        from amcast.protocols.wire.codec import decode_unchecked

        for _ in range(limit):
            try:
                raw = self._sock.recv(65536)
            except BlockingIOError:
                return
            try:
                _, dg = decode_unchecked(raw, self._auth, self._limits)
            except DecodeError:
                continue
            if isinstance(dg, Datagram) and dg.view == self._view and dg.hb_seq:
                self.latest[dg.sender] = max(self.latest.get(dg.sender, 0), dg.hb_seq)

    def close(self) -> None:
        self._sock.close()


def insider_nack(
    auth: Authenticator, sender: int, view: int, latest: dict[int, int], span: int = 256
) -> bytes | None:
    """A NACK from ``sender`` asking for the last ``span`` vertices of every other member
    (a member does not nack its own: receivers would ignore those ranges anyway, as
    acknowledged by their sender); ``None`` while no other member was heard (a NACK
    without ranges is malformed)."""
    nacks = tuple(
        (m, max(1, seq - span + 1), seq) for m, seq in sorted(latest.items()) if m != sender
    )
    if not nacks:
        return None
    return encode(Datagram(Kind.NACK, sender, view, 0, nacks), auth, wall_ms())


def open_socket(group: str, port: int, *, listen: bool) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 0)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
    if listen:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((group, port))
        mreq = struct.pack("4s4s", socket.inet_aton(group), socket.inet_aton("127.0.0.1"))
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, mreq)
    return sock


def capture(group: str, port: int, seconds: float, limit: int) -> list[bytes]:
    """Genuine datagrams heard on the group for ``seconds`` (at most ``limit``)."""
    sock = open_socket(group, port, listen=True)
    got: list[bytes] = []
    deadline = time.monotonic() + seconds
    try:
        while len(got) < limit and (left := deadline - time.monotonic()) > 0:
            sock.settimeout(left)
            try:
                got.append(sock.recv(65536))
            except TimeoutError:
                break
    finally:
        sock.close()
    return got


def kinds_of(datagrams: list[bytes], keys: Keyring | None) -> dict[str, int]:
    """What the captured datagrams were (needs the key: for the report only)."""
    from amcast.protocols.errors import DecodeError
    from amcast.protocols.wire.codec import KIND_NAMES, decode_unchecked
    from amcast.protocols.wire.limits import WireLimits

    auth, limits, out = Authenticator(keys, bytes(SESSION_BYTES)), WireLimits(), {}
    for raw in datagrams:
        try:
            name = KIND_NAMES[decode_unchecked(raw, auth, limits)[1].kind]
        except DecodeError:
            name = "undecodable"
        out[name] = out.get(name, 0) + 1
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    members = [int(x) for x in args.members.split(",")]
    keys = read_keyring(args.key_file) if args.key_file else None
    report: dict[str, Any] = {"kind": args.kind}
    source: list[bytes] = []
    if args.kind == "replay":
        source = capture(args.group, args.port, args.capture_s, args.count)
        report["captured"] = len(source)
        report["captured_kinds"] = kinds_of(source, keys)
        if not source:
            raise SystemExit("replay: nothing heard on the group")
    wrong = authenticator(Keyring.single(WRONG_KEY))
    real = authenticator(keys)
    tracker = None
    if args.kind in INSIDERS:
        tracker = SeqTracker(args.group, args.port, keys, args.view)
        deadline = time.monotonic() + args.capture_s
        heard = min(2, len(members))  # someone else than the member claimed first
        while len(tracker.latest) < heard and time.monotonic() < deadline:
            time.sleep(0.01)  # an insider first hears what the members have sent
            tracker.poll()
        if not tracker.latest:
            tracker.close()
            raise SystemExit("insider: nothing heard on the group")
    sock = open_socket(args.group, args.port, listen=False)
    dest = (args.group, args.target_port or args.port)
    sent = nbytes = 0
    start = time.monotonic()
    gap = 1.0 / args.rate if args.rate else 0.0
    try:
        for i in range(args.count):
            if args.kind == "garbage":
                data = garbage(rng)
            elif args.kind == "forged":
                data = forged(rng, wrong, members, args.view)
            elif args.kind == "replay":
                data = source[i % len(source)]
            else:
                assert tracker is not None
                if i % 64 == 0:
                    tracker.poll()
                claimed = members[0] if args.kind == "insider-member" else members[i % len(members)]
                nack = insider_nack(real, claimed, args.view, tracker.latest)
                if nack is None:
                    continue
                data = nack
            if gap and (wait := start + i * gap - time.monotonic()) > 0:
                time.sleep(wait)
            try:
                sock.sendto(data, dest)
            except OSError:  # ENOBUFS on an overloaded host: counted as not sent
                continue
            sent += 1
            nbytes += len(data)
    finally:
        sock.close()
        if tracker is not None:
            tracker.close()
    report.update(datagrams=sent, bytes=nbytes, seconds=time.monotonic() - start)
    return report


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m tools.floodattack",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--kind", choices=KINDS, required=True)
    p.add_argument("--group", required=True, help="the group's multicast address (239.x)")
    p.add_argument("--port", type=int, required=True)
    p.add_argument(
        "--target-port",
        type=int,
        default=0,
        help="send to this port instead (a control: same attacker, no daemon listening)",
    )
    p.add_argument("--count", type=int, default=100_000, help="datagrams to send")
    p.add_argument("--rate", type=float, default=0.0, help="at most this many per second")
    p.add_argument("--members", default="0,1,2", help="member ids to claim (comma-separated)")
    p.add_argument("--view", type=int, default=1, help="view id of forged/insider datagrams")
    p.add_argument(
        "--key-file",
        type=Path,
        help="the cluster's key ring (security.key_file; insider, and replay's report)",
    )
    p.add_argument("--capture-s", type=float, default=1.0, help="replay: seconds of capture")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    if not args.group.startswith("239."):
        p.error("the group must be an administratively scoped 239.x address")
    json.dump(run(args), sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
