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

``--wheel DIR`` (``make wheel-native``) packs that build into a platform wheel for
hosts that install a wheel rather than run from the repository (the systemd recipe of
docs/operations.md): it builds the ordinary wheel from the tracked files, adds the extension
modules beside their sources, the manifest, and the shared library at the wheel's root
(site-packages, where the extension modules import it by name), and retags the wheel
for this interpreter and platform (``cp311-cp311-linux_x86_64``), with a new ``RECORD``.
Each module's source in the wheel must be the one compiled (the manifest's digest), so
the installed package passes the same stale-build guard. ``--from-wheel WHEEL`` starts
from an ordinary wheel already built instead of the tracked files: the container image's
``build-native`` stage, which has no git checkout, installs that wheel, compiles the
installed package and packs it this way.

Exit status 0, or 1 with one line saying what failed (mypy missing, a type error mypyc
refuses, no C compiler).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
import zipfile
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


def platform_tag() -> str:
    """The wheel tag of this interpreter and platform, e.g. ``cp311-cp311-linux_x86_64``."""
    python = f"cp{sys.version_info.major}{sys.version_info.minor}"
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"{python}-{python}{sys.abiflags}-{platform}"


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def wheel(out: Path, pure_from: Path | None = None) -> int:
    """Pack the current build into a platform wheel in ``out``; 0, or 1 with one line.
    ``pure_from``: the ordinary wheel to start from (where there is no git checkout,
    as in the container image's build stage) instead of one built from the tracked
    files; its compiled sources must be the ones compiled all the same."""
    built = native.manifest()
    problem = native.problem()
    if built is None or problem is not None or not isinstance(built.get("modules"), dict):
        return _fail("make wheel-native needs a current build: "
                     f"{problem or 'none found, run `make native`'}")
    group = built.get("group")
    libraries = sorted(LIBRARY_DIR.glob(f"{group}.*.so")) if isinstance(group, str) else []
    if len(libraries) != 1:
        return _fail(f"the build's shared library {group} is not in {LIBRARY_DIR}: run "
                     "`make native` again")
    with tempfile.TemporaryDirectory(prefix="amcast-wheel-") as tmp:
        pure = pure_wheel(Path(tmp)) if pure_from is None else _ordinary(pure_from)
        if isinstance(pure, str):
            return _fail(pure)
        tree = Path(tmp, "tree")
        with zipfile.ZipFile(pure) as zf:
            zf.extractall(tree)
        package = tree / "amcast" / "protocols"
        for module, expected in sorted(built["modules"].items()):
            source = package / Path(*module.split(".")).with_suffix(".py")
            if not source.exists() or native.digest(source) != expected:
                hint = ("(not tracked by git?): commit it, then `make native` again"
                        if pure_from is None else f"({pure_from} is of other sources)")
                return _fail(f"protocols/{module.replace('.', '/')}.py in the wheel is not the "
                             f"source compiled {hint}")
            for ext in native.source(module).parent.glob(f"{source.stem}.*.so"):
                shutil.copy2(ext, source.parent / ext.name)
        shutil.copy2(native.MANIFEST, package / native.MANIFEST.name)
        shutil.copy2(libraries[0], tree / libraries[0].name)
        name, version = pure.name.split("-")[:2]
        target = _repack(tree, out / f"{name}-{version}-{platform_tag()}.whl")
    print(f"{target} ({len(built['modules'])} compiled modules, for this Python and "
          "platform only)")
    return 0


def _fail(line: str) -> int:
    print(line, file=sys.stderr)
    return 1


def pure_wheel(tmp: Path) -> Path | str:
    """The ordinary wheel, built in ``tmp`` from a copy of the tracked files (no build
    litter), or why not (also the fixture of ``tests/packaging/test_wheel.py``)."""
    root = Path(__file__).resolve().parents[1]
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True)
    if listed.returncode != 0:
        return "make wheel-native runs in a git checkout (it packs the tracked files)"
    src, pure = tmp / "src", tmp / "pure"
    for name in filter(None, listed.stdout.decode().split("\0")):
        if (root / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / name, src / name)
    made = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                           "--no-build-isolation", "-w", str(pure), str(src)],
                          capture_output=True, text=True)
    wheels = sorted(pure.glob("amcast-*.whl"))
    if made.returncode != 0 or len(wheels) != 1:
        lines = (made.stderr or made.stdout).strip().splitlines()
        return f"pip wheel failed: {lines[-1] if lines else made.returncode}"
    return wheels[0]


def _ordinary(path: Path) -> Path | str:
    """``path`` if it is an ordinary (pure) amcast wheel, or why not."""
    name = path.name
    if not (path.is_file() and name.startswith("amcast-") and name.endswith("-py3-none-any.whl")):
        return f"--from-wheel {path}: not an ordinary amcast wheel (amcast-*-py3-none-any.whl)"
    return path


def _repack(tree: Path, target: Path) -> Path:
    """Zip the unpacked wheel ``tree`` as ``target``: platform-specific, tagged as its
    name says, with a ``RECORD`` of what it now holds."""
    (info,) = tree.glob("*.dist-info")
    meta = [line for line in (info / "WHEEL").read_text().splitlines()  # headers only
            if line.strip() and not line.startswith(("Tag:", "Root-Is-Purelib:"))]
    tag = target.name.removesuffix(".whl").split("-", 2)[2]
    (info / "WHEEL").write_text("\n".join([*meta, "Root-Is-Purelib: false", f"Tag: {tag}"])
                                + "\n")
    record = info / "RECORD"
    files = sorted(p for p in tree.rglob("*") if p.is_file() and p != record)
    lines = [_record_line(p.relative_to(tree).as_posix(), p.read_bytes()) for p in files]
    record.write_text("\n".join([*lines, f"{record.relative_to(tree).as_posix()},,"]) + "\n")
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in [*files, record]:
            zf.write(path, path.relative_to(tree).as_posix())
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--remove", action="store_true", help="remove the compiled build")
    parser.add_argument("--wheel", type=Path, metavar="DIR",
                        help="pack the current build into a platform wheel in DIR")
    parser.add_argument("--from-wheel", type=Path, metavar="WHEEL",
                        help="with --wheel: start from this ordinary wheel (no git checkout "
                        "needed) instead of building one from the tracked files")
    args = parser.parse_args(argv)
    if args.remove:
        return remove()
    if args.from_wheel is not None and args.wheel is None:
        return _fail("--from-wheel goes with --wheel DIR")
    return wheel(args.wheel, args.from_wheel) if args.wheel is not None else build()


if __name__ == "__main__":
    sys.exit(main())
