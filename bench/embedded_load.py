"""``python -m bench.embedded_load --config PATH [load generator options]``: the load
generator (``amcast.loadgen``) in a process that embeds its node.

The process starts ``amcast.member.Member`` from an ``amcastd`` configuration file on its
own event loop and runs the same load through the member's client as ``python -m
amcast.loadgen --socket`` runs through a daemon's: the same options, the same JSON
report on stdout (the member logs to stderr). At the end the member leaves the group as
a daemon does on SIGTERM. ``amcast bench cluster --mode embedded`` starts one per node
(``embedded_nodes``). It lives with the benchmarks because the command line's modules
run daemons as processes and never embed one (tests/test_layering.py).
"""

from __future__ import annotations

import argparse
import sys

from amcast import loadgen
from amcast.client import Client
from amcast.member import Member


async def embed(args: argparse.Namespace) -> tuple[Client, loadgen.Finish]:
    """Start the member of ``--config``; its client, and its stop for the end."""
    member = await Member.start(args.config, name=f"loadgen-{args.tag}",
                                timeout=args.start_timeout)
    return member.client, member.stop


def main(argv: list[str] | None = None) -> int:
    p = loadgen.build_parser("python -m bench.embedded_load", socket=False)
    p.add_argument("--config", required=True,
                   help="the amcastd configuration of the node this process embeds")
    return loadgen.main(argv, connect=embed, parser=p)


if __name__ == "__main__":
    sys.exit(main())
