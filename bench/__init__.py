"""amcast's benchmarks, kept beside the ``amcast`` package, not in it (like ``fuzz/`` and
``nemesis/``): tools for measuring amcast from a source checkout, not part of what a host
installs. They import ``amcast`` as any program does (absolutely).

``python -m bench NAME`` runs one from the checkout's root, and so does ``amcast bench
NAME`` from the checkout's virtual environment (``amcast.commands.bench`` finds this
folder beside the package); an installed wheel has no benchmarks and says so. Every
module here that defines ``run`` is one benchmark (``bench.cli``); docs/performance.md
says what each measures and docs/development.md how to run them.
"""

AMCAST_BENCHMARKS = True
"""What ``amcast bench`` looks for: this ``bench`` is amcast's, not another package's."""
