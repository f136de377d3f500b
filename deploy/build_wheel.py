"""amcast's own wheel (``amcast-*-py3-none-any.whl``) built from a copy of the tracked
files, so that nothing left in the checkout (virtual environments, build outputs, logs)
ends up in it: what ``make deb`` installs into the package's virtual environment and what
``tests/packaging/test_wheel.py`` inspects. The native data path is its own wheel
(``make wheel``, maturin, ``native/``).

``python deploy/build_wheel.py DIR`` writes it into DIR. Exit status 0, or 1 with one
line saying what failed.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def pure_wheel(tmp: Path) -> Path | str:
    """The wheel, built in ``tmp`` from a copy of the tracked files, or why not."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True)
    if listed.returncode != 0:
        return "the wheel is built in a git checkout (it packs the tracked files)"
    src, out = tmp / "src", tmp / "wheel"
    for name in filter(None, listed.stdout.decode().split("\0")):
        if (ROOT / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    made = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                           "--no-build-isolation", "-w", str(out), str(src)],
                          capture_output=True, text=True)
    wheels = sorted(out.glob("amcast-*.whl"))
    if made.returncode != 0 or len(wheels) != 1:
        lines = (made.stderr or made.stdout).strip().splitlines()
        return f"pip wheel failed: {lines[-1] if lines else made.returncode}"
    return wheels[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the folder the wheel goes into")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="amcast-wheel-") as tmp:
        wheel = pure_wheel(Path(tmp))
        if isinstance(wheel, str):
            print(wheel, file=sys.stderr)
            return 1
        args.out.mkdir(parents=True, exist_ok=True)
        target = args.out / wheel.name
        shutil.copy2(wheel, target)
    print(target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
