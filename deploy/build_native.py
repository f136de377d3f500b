"""``make native`` / ``make pure``: compile the protocol core's hot modules with mypyc, or
remove that build (what runs, and the stale-build guard: ``amcast.daemon.native``).

Theory of operation: mypyc names a module after its path, and this repository maps the
package ``amcast.protocols`` onto ``protocols/``. So the build stages a copy of
``protocols/`` as ``amcast/protocols/`` in a temporary directory and runs mypyc there
on ``native.MODULES``. mypyc compiles them as one group: a shared library
(``<hash>__mypyc``, imported by name, so it goes into the interpreter's site-packages)
and one small extension module per source, which goes beside that source. Last it writes
``protocols/native.json`` with the SHA-256 of each source as compiled. ``--remove``
deletes the extension modules, the shared library and the manifest.

Exit status 0, or 1 with one line saying what failed (mypy missing, a type error mypyc
refuses, no C compiler).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

from amcast.daemon import native

import amcast

LIBRARY_DIR = Path(sysconfig.get_paths()["platlib"])


def remove(*, quiet: bool = False) -> int:
    built = native.manifest() or {}
    removed = 0
    for path in native.extensions():
        path.unlink()
        removed += 1
    group = built.get("group")
    if isinstance(group, str) and group:
        for path in LIBRARY_DIR.glob(f"{group}.*.so"):
            path.unlink()
            removed += 1
    native.MANIFEST.unlink(missing_ok=True)
    if not quiet:
        print(f"protocol core: interpreted ({removed} compiled files removed)")
    return 0


def build() -> int:
    try:
        import mypy.version
    except ImportError:
        print("make native needs mypy (mypyc): pip install 'amcast[native]'", file=sys.stderr)
        return 1
    remove(quiet=True)  # the previous build, if any
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="amcast-native-") as tmp:
        stage = Path(tmp)
        package = stage / "amcast"
        shutil.copytree(native.PROTOCOLS, package / "protocols",
                        ignore=shutil.ignore_patterns("*.so", "__pycache__", "native.json"))
        shutil.copy(Path(amcast.__file__), package / "__init__.py")
        files = [str(Path("amcast", "protocols", *m.split(".")).with_suffix(".py"))
                 for m in native.MODULES]
        print(f"compiling {len(files)} modules of amcast.protocols with mypyc "
              f"{mypy.version.__version__} (about a minute)...", flush=True)
        done = subprocess.run([sys.executable, "-m", "mypyc", "--ignore-missing-imports",
                               *files], cwd=stage, capture_output=True, text=True)
        if done.returncode != 0:
            lines = [ln for ln in (done.stdout + done.stderr).splitlines()
                     if "error" in ln.lower()] or (done.stdout + done.stderr).splitlines()
            print(f"mypyc failed: {lines[0] if lines else 'exit ' + str(done.returncode)}",
                  file=sys.stderr)
            return 1
        groups = list(stage.glob("*__mypyc.*.so"))
        if len(groups) != 1:
            print(f"mypyc made {len(groups)} shared libraries, expected one", file=sys.stderr)
            return 1
        group = groups[0]
        shutil.copy(group, LIBRARY_DIR / group.name)
        copied = 0
        for ext in (package / "protocols").rglob("*.so"):
            shutil.copy(ext, native.PROTOCOLS / ext.relative_to(package / "protocols"))
            copied += 1
        modules = {m: native.digest(package / "protocols" / Path(*m.split(".")).with_suffix(
            ".py")) for m in native.MODULES}
    native.MANIFEST.write_text(json.dumps({
        "mypy": mypy.version.__version__, "python": sys.implementation.cache_tag,
        "group": group.name.split(".")[0], "modules": modules}, indent=1) + "\n")
    problem = native.problem()
    if problem is not None:
        print(f"the build does not load: {problem}", file=sys.stderr)
        return 1
    print(f"protocol core: compiled ({copied} modules, {time.monotonic() - started:.0f} s; "
          "`make pure` removes it)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--remove", action="store_true", help="remove the compiled build")
    args = parser.parse_args(argv)
    return remove() if args.remove else build()


if __name__ == "__main__":
    sys.exit(main())
