"""Shared bits of the client-side subcommands: the ``--socket`` option."""

from __future__ import annotations

import argparse
import os

from amcast.client import DEFAULT_SOCKET


def add_socket_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--socket", "-s", default=os.environ.get("AMCAST_API__SOCKET", DEFAULT_SOCKET),
        help="amcastd's unix socket (default: $AMCAST_API__SOCKET or %(default)s)",
    )
