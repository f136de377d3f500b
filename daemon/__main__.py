"""``python -m amcast.daemon``: the same as the ``amcastd`` command."""

import sys

from amcast.daemon.main import main

sys.exit(main())
