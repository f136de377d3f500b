"""``python -m bench NAME [OPTIONS]``: ``amcast bench NAME [OPTIONS]``, from the checkout's
root (the same parser, the same one-line errors and exit statuses)."""

from __future__ import annotations

import sys

from amcast.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))
