"""``amcast keygen``: make the group key file, add a key for a rollover, retire old keys.

The rolling key change, without downtime (docs/operations.md, "Keys and rotation"):

1. ``amcast keygen --rotate -f KEYFILE`` on one node, copy the file to every node, reload
   each daemon (``systemctl reload amcastd`` or SIGHUP). Until every live peer holds the
   new key, each daemon keeps sending with the old one, so none is refused;
2. when ``amcast status`` shows every peer sending with the new key id,
   ``amcast keygen --retire -f KEYFILE``, copy it everywhere again, and reload again.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from .. import keygen


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "keygen", help="make, rotate or retire the group key file",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-f", "--file", type=Path,
                   default=Path(os.environ.get("AMCAST_SECURITY__KEY_FILE",
                                               keygen.DEFAULT_KEY_FILE)),
                   help="the key file (default: $AMCAST_SECURITY__KEY_FILE or %(default)s)")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--rotate", action="store_true",
                      help="add a new key (id + 1) and keep the others: step 1 of a rollover")
    what.add_argument("--retire", action="store_true",
                      help="keep only the newest key: step 2 of a rollover")
    what.add_argument("--force", action="store_true",
                      help="replace an existing file with a new ring of one key")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    path: Path = args.file
    if args.rotate:
        keys = keygen.rotate(path)
        print(f"{path}: added key {keys.newest}; keys {', '.join(map(str, keys.ids))}. "
              "Copy it to every node and reload each daemon (SIGHUP).")
    elif args.retire:
        keys = keygen.retire(path)
        print(f"{path}: kept key {keys.newest} only. Copy it to every node and reload each "
              "daemon (SIGHUP).")
    else:
        keys = keygen.create(path, force=args.force)
        print(f"{path}: new key ring (key {keys.newest}), mode 0400. Copy it to every node "
              "(security.key_file).")
    return 0
