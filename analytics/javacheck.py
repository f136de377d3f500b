"""Is a Java 17+ runtime there for Spark? (stdlib only, so ``make install`` can run it.)

Theory of operation: find ``$JAVA_HOME/bin/java`` or ``java`` on the PATH, run
``java -version`` and parse the major version from its first line (``"17.0.15"``,
``"1.8.0_392"`` is 8). ``require_java`` raises ``AnalyticsError`` with what to
install; ``python analytics/javacheck.py`` (run by ``make install``) prints the same
advice and exits 1 when Java is missing or too old.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

MIN_JAVA = 17
ADVICE = (
    f"Java {MIN_JAVA}+ is needed for the analysis job (amcast analyze): "
    "apt-get install openjdk-17-jre-headless (or set JAVA_HOME to a JDK/JRE 17+)"
)


def find_java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = os.path.join(home, "bin", "java")
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("java")


def parse_major(version_output: str) -> int | None:
    """The major version in ``java -version`` output, or None if there is none."""
    m = re.search(r'version "(\d+)(?:\.(\d+))?', version_output)
    if not m:
        return None
    major = int(m.group(1))
    if major == 1 and m.group(2):  # "1.8.0_392" is Java 8
        major = int(m.group(2))
    return major


def java_major() -> int | None:
    """The installed Java major version, or None when there is no usable ``java``."""
    java = find_java()
    if java is None:
        return None
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return parse_major(out.stderr + out.stdout)


def problem(major: int | None) -> str | None:
    """What is wrong with this Java (None: it is fine)."""
    if major is None:
        return f"no java found. {ADVICE}"
    if major < MIN_JAVA:
        return f"java {major} is too old. {ADVICE}"
    return None


def require_java() -> int:
    """The Java major version; ``AnalyticsError`` when missing or older than 17."""
    from .errors import AnalyticsError

    major = java_major()
    msg = problem(major)
    if msg is not None:
        raise AnalyticsError(msg)
    assert major is not None
    return major


def main() -> int:
    msg = problem(java_major())
    if msg is None:
        return 0
    print(f"*** {msg}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
