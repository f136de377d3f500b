"""Make an environment's ``spark-submit`` work without that environment on PATH.

Theory of operation: pip's pyspark installs ``bin/spark-submit``, which finds its Spark
by running ``bin/find_spark_home.py`` with ``python3`` from PATH (or
``$PYSPARK_PYTHON``). Called as ``.venv/bin/spark-submit`` from a shell whose PATH lacks
``.venv/bin``, that is the system Python, which has no pyspark, and spark-submit dies
before it starts Spark. ``fix(bindir)`` rewrites that one default in
``bin/find-spark-home`` to the environment's own ``bin/python`` (an explicit
``$PYSPARK_PYTHON`` still wins); ``make install`` runs ``python analytics/venvspark.py
.venv/bin``. It is idempotent and changes nothing when the script is not the one it
knows (another pyspark version): it then says so and the test of spark-submit without
the environment on PATH fails. Standard library only. The driver's own Python is
handled by ``analytics/job.py`` (it re-executes itself with the environment's Python).
"""

from __future__ import annotations

import sys
from pathlib import Path

DEFAULT = 'PYSPARK_DRIVER_PYTHON="${PYSPARK_PYTHON:-"python3"}"'
MARK = "# amcast: this environment's python, not python3 from PATH"


def fix(bindir: Path) -> str:
    """Point ``bindir/find-spark-home`` at ``bindir/python``; what was done, in words."""
    script, python = bindir / "find-spark-home", (bindir / "python").absolute()
    if not script.is_file():
        return f"no {script}: nothing to do"
    text = script.read_text(encoding="utf-8")
    if MARK in text:
        return f"{script} already uses {python}"
    if DEFAULT not in text or any(c in str(python) for c in '"$`\\'):
        return f"{script} left as it is (unknown version or path): set SPARK_HOME for spark-submit"
    script.write_text(text.replace(DEFAULT, f'PYSPARK_DRIVER_PYTHON="${{PYSPARK_PYTHON:-"'
                                           f'{python}"}}"  {MARK}'), encoding="utf-8")
    return f"{script} now uses {python}"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python analytics/venvspark.py VENV/bin", file=sys.stderr)
        return 2
    print(fix(Path(argv[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
