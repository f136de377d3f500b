"""Per-datagram cost of the wire work, native (``amcast_native``) against pure Python.

Usage: ``python native/bench/bench_wire.py [--count N] [--repeat R]`` (``make
native-bench``). For each body size it times, per datagram, in microseconds (the best of
``repeat`` runs of ``count`` datagrams, on the host it runs on, nothing else subtracted):

- ``seal``: ``Authenticator.seal`` of a body (header, AES-256-GCM, tag);
- ``open``: ``Authenticator.open`` of a distinct genuine datagram of one peer session
  (freshness and replay check, tag and decryption, replay record);
- ``admit``: the replay guard alone, ``check`` then ``admit`` of the next counter;
- ``decode``: ``codec.decode_body`` against ``amcast_native.Decoder`` (as the shim builds
  it) of representative bodies: DATA with one 64-byte, one 1400-byte or twenty 64-byte
  messages, ACK_ONLY, HEARTBEAT and NACK, each with the acknowledgements of five members,
  and a REPAIR of eight vertices; the body's size in bytes stands in the size column.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from amcast.protocols.vocabulary import ServiceLevel
from amcast.protocols.wire.auth import Authenticator
from amcast.protocols.wire.codec import Datagram, Kind, Vertex, decode_body, encode_body
from amcast.protocols.wire.keys import Keyring
from amcast.protocols.wire.limits import WireLimits
from amcast.protocols.wire.native import native_decoder, native_module
from amcast.protocols.wire.replay import ReplayGuard

RING = Keyring.single(bytes(range(32)))
SENDER = bytes([1]) * 16
RECEIVER = bytes([2]) * 16
WALL = 1_800_000_000_000
SIZES = (64, 512, 1400, 8192)


ACKS = tuple((node, 1000 + node) for node in range(5))


def _vertex(origin: int, seq: int, items: tuple[bytes, ...]) -> Vertex:
    return Vertex(origin, seq, ACKS, ServiceLevel.AGREED, 1.8e9, items)


DECODED = {
    "data 1x64": Datagram(Kind.DATA, 3, 7, 1001, (), (_vertex(3, 1001, (bytes(64),)),)),
    "data 1x1400": Datagram(Kind.DATA, 3, 7, 1001, (), (_vertex(3, 1001, (bytes(1400),)),)),
    "data 20x64": Datagram(Kind.DATA, 3, 7, 1001, (), (_vertex(3, 1001, (bytes(64),) * 20),)),
    "ack_only": Datagram(Kind.ACK_ONLY, 3, 7, 1001, (), (_vertex(3, 1001, ()),)),
    "heartbeat": Datagram(Kind.HEARTBEAT, 3, 7, 1001, (), (), ACKS),
    "nack": Datagram(Kind.NACK, 3, 7, 1001, ((1, 5, 9), (2, 7, 7)), ()),
    "repair 8": Datagram(Kind.REPAIR, 3, 7, 1001, (), tuple(
        _vertex(1, 100 + i, (bytes(100),)) for i in range(8))),
}
"""The ``decode`` rows' datagrams, by name."""


def best_us(run: Callable[[], None], count: int, repeat: int) -> float:
    """The fastest of ``repeat`` runs, in microseconds per datagram."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter_ns()
        run()
        best = min(best, (time.perf_counter_ns() - start) / 1000 / count)
    return best


def authenticators(native: Any, session: bytes) -> dict[str, Any]:
    return {"pure": Authenticator(RING, session),
            "native": native.Authenticator(RING.keys, session)}


def bench(native: Any, count: int, repeat: int) -> list[tuple[str, int, float, float]]:
    rows = []
    for size in SIZES:
        body = bytes(size)
        figures = {}
        for name, sender in authenticators(native, SENDER).items():
            def seal(sender: Any = sender, body: bytes = body) -> None:
                for i in range(count):
                    sender.seal(body, WALL + i // 100)
            figures[name] = best_us(seal, count, repeat)
        rows.append(("seal", size, figures["pure"], figures["native"]))
        source = Authenticator(RING, SENDER)
        datagrams = [[source.seal(body, WALL + i // 100) for i in range(count)]
                     for _ in range(repeat)]
        figures = {}
        for name in ("pure", "native"):
            runs = iter(datagrams)

            def open_all(name: str = name, runs: Any = runs) -> None:
                receiver = authenticators(native, RECEIVER)[name]
                for i, raw in enumerate(next(runs)):
                    receiver.open(raw, WALL + i // 100)
            figures[name] = best_us(open_all, count, repeat)
        rows.append(("open", size, figures["pure"], figures["native"]))
    figures = {}
    for name, make in (("pure", ReplayGuard), ("native", native.ReplayGuard)):
        def admit(make: Any = make) -> None:
            guard = make(30.0, 1024)
            for i in range(count):
                guard.check(SENDER, i, WALL, WALL)
                guard.admit(SENDER, i, WALL, WALL, 1, 1)
        figures[name] = best_us(admit, count, repeat)
    rows.append(("admit", 0, figures["pure"], figures["native"]))
    limits = WireLimits()
    decoder = native_decoder(native, limits)
    for name, dg in DECODED.items():
        body = encode_body(dg)
        assert decoder(body) == decode_body(body, limits) == dg
        figures = {}
        for core, decode in (("pure", partial(decode_body, limits=limits)),
                             ("native", decoder)):
            def decode_all(decode: Any = decode, body: bytes = body) -> None:
                for _ in range(count):
                    decode(body)
            figures[core] = best_us(decode_all, count, repeat)
        rows.append((f"decode {name}", len(body), figures["pure"], figures["native"]))
    return rows


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    native = native_module()
    if native is None:
        print("amcast_native is not built (make rust): nothing to compare", file=sys.stderr)
        return 1
    print(f"{'operation':<20}{'body B':>8}{'pure µs':>10}{'native µs':>11}{'speed-up':>10}")
    for op, size, pure, fast in bench(native, args.count, args.repeat):
        print(f"{op:<20}{size or '-':>8}{pure:>10.2f}{fast:>11.2f}{pure / fast:>9.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
