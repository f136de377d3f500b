"""``amcast demo``: a 4-node loopback cluster, concurrent senders, identical sequences;
``amcast demo --faults``: the same under a kill -9 with a restart and a pause."""

from __future__ import annotations

import argparse

from .. import demo
from ..report import print_report


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("demo", help="run the 4-daemon loopback demo (--faults: failover)",
                              description=demo.__doc__.splitlines()[0])
    demo.add_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    report = demo.run(args)
    print_report(report, as_json=args.json)
    return 0 if report["figures"]["identical delivery sequences"] == "yes" else 1
