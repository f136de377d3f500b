"""``python -m amcast.daemon``: the same as the ``amcastd`` command."""

import sys

from .main import main

sys.exit(main())
