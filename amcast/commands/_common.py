"""Shared bits of the subcommands: the ``--socket`` option, ``CommandFailed``."""

from __future__ import annotations

import argparse
import os

from ..client import DEFAULT_SOCKET
from ..protocols.errors import AmcastError


class CommandFailed(AmcastError):
    """The request could not be done (refused messages, ...): exit status 1, one line."""


def add_socket_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--socket", "-s", default=os.environ.get("AMCAST_API__SOCKET", DEFAULT_SOCKET),
        help="amcastd's unix socket (default: $AMCAST_API__SOCKET or %(default)s)",
    )
