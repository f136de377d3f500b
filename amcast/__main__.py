"""``python -m amcast``: the same as the ``amcast`` command."""

import sys

from amcast.cli import main

sys.exit(main())
