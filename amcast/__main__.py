"""``python -m amcast``: the same as the ``amcast`` command."""

import sys

from .cli import main

sys.exit(main())
