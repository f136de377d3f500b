"""``amcast send``: multicast messages (arguments, or stdin lines) through the local daemon.

Lines of standard input are sent as they are read: the complete lines of each read go
out at once, so a slow producer's messages flow immediately (and a fast one's are batched).
"sent N message(s)" is printed only once amcastd has confirmed every one (``sync``); with
``--wait`` each of our messages is printed when it is delivered back (position, message
id, service, text) and the command ends when all are. A refusal, a stall (nothing
confirmed for ``--timeout`` seconds) or a lost daemon ends it with one line and the exit
status listed by ``amcast --help`` (1 refused, 2 no daemon, 3 timed out).
"""

from __future__ import annotations

import argparse
import os
import select
import sys
import time

from ..argtypes import positive
from ..client import (
    SERVICES,
    BlockingClient,
    ClientTimeout,
    DeliveredBatch,
    MessagesRefused,
)
from ..protocols.errors import ClientError
from ._common import CommandFailed, add_socket_argument

READ_BYTES = 1 << 16
# send() raises these at once
LOCAL_REFUSALS = ("message_too_large", "bad_field", "bad_service", "unknown_cluster")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("send", help="send messages to groups through amcastd",
                              description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    add_socket_argument(p)
    p.add_argument("--group", "-g", action="append", required=True,
                   help="destination group (repeat for several)")
    p.add_argument("--service", choices=SERVICES, default="agreed")
    p.add_argument("--to", metavar="CLUSTERS", default=None,
                   help="clusters of the federation the messages go to, comma-separated "
                        "(e.g. a,b; one group then): one order common to all of them")
    p.add_argument("--wait", action="store_true",
                   help="join the groups and wait until our messages are delivered back; "
                        "print their total-order positions")
    p.add_argument("--timeout", type=positive, default=10.0,
                   help="seconds to wait for amcastd to confirm (and, with --wait, deliver) "
                        "our messages (default %(default)s)")
    p.add_argument("messages", nargs="*", help="messages (default: one per line of stdin)")
    p.set_defaults(func=run)


class Refused(CommandFailed):
    """Messages refused, said in lines: exit status 1."""


class Sender:
    def __init__(self, client: BlockingClient, args: argparse.Namespace) -> None:
        self.client = client
        self.groups = list(args.group)
        self.service = args.service
        self.clusters = args.to
        self.wait = args.wait
        self.timeout = args.timeout
        self.me = (client.node, client.client_id)
        self.sent = 0
        self.delivered = 0
        self._confirmed = 0
        self._progress_at = time.monotonic()

    def send(self, lines: list[bytes]) -> None:
        for line in lines:
            try:
                self.client.send(line, self.groups, self.service, self.clusters)
            except ClientError as exc:
                if exc.code in LOCAL_REFUSALS and not isinstance(exc, MessagesRefused):
                    raise Refused(f"line {self.sent + 1} not sent: {exc}; lines after "
                                  f"{self.sent} were not sent") from None
                raise
            self.sent += 1
        self.client.request_sync()

    def show(self, item: object) -> None:
        if not isinstance(item, DeliveredBatch):
            return
        for d in item:
            if (d.sender, d.client) == self.me and d.cluster in ("", self.client.cluster):
                pos = ("-" if d.position is None else d.position) if d.gts is None \
                    else f"g{d.gts}"
                print(f"{pos}\t{d.message_id}\t{d.service}\t"
                      f"{d.payload.decode(errors='replace')}", flush=True)
                self.delivered += 1

    def poll(self) -> None:
        """Read what arrived (refusals, confirmations, deliveries); watch for a stall."""
        c = self.client
        while (item := c.poll_event()) is not None:
            self.show(item)
        now = time.monotonic()
        if c.confirmed != self._confirmed or c.confirmed >= c.sent:
            self._confirmed = c.confirmed
            self._progress_at = now
        elif now - self._progress_at > self.timeout:
            raise ClientTimeout(
                f"amcastd confirmed none of {c.sent - c.confirmed} message(s) for "
                f"{self.timeout:g} s: the cluster may be stalled (check amcast status "
                "--health)", c.sent - c.confirmed)

    def stream(self, fd: int) -> None:
        """Send stdin's lines as they are read."""
        rest = b""
        while True:
            r, _, _ = select.select([fd, self.client], [], [], min(1.0, self.timeout))
            self.poll()
            if fd not in r:
                continue
            chunk = os.read(fd, READ_BYTES)
            if not chunk:
                if rest:
                    self.send([rest])
                return
            *lines, rest = (rest + chunk).split(b"\n")
            if lines:
                self.send(lines)

    def finish(self) -> int:
        self.client.sync(self.timeout)
        if not self.wait:
            print(f"sent {self.sent} message(s) via node {self.me[0]}")
            return 0
        deadline = time.monotonic() + self.timeout
        while self.delivered < self.sent:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ClientTimeout(
                    f"{self.sent - self.delivered} of {self.sent} message(s) not delivered "
                    f"back within {self.timeout:g} s: the cluster may be stalled (check "
                    "amcast status --health)")
            try:
                self.show(self.client.next_event(left))
            except ClientTimeout:
                continue
        return 0


def run(args: argparse.Namespace) -> int:
    with BlockingClient(args.socket, name="amcast-send", timeout=args.timeout) as client:
        sender = Sender(client, args)
        try:
            if args.wait:
                client.join(*args.group)
            if args.messages:
                sender.send([m.encode() for m in args.messages])
            else:
                sender.stream(sys.stdin.fileno())
            return sender.finish()
        except MessagesRefused as exc:
            lines = ", ".join(str(m + 1) for m in exc.messages[:10])
            more = "" if len(exc.messages) <= 10 else f" and {len(exc.messages) - 10} more"
            raise Refused(
                f"amcastd refused {len(exc.messages)} message(s) (line {lines}{more}): "
                f"{exc.code}: {exc.refusals[0].detail}; lines after {sender.sent} were not sent"
            ) from None
