"""Build a Debian package of amcast for hosts without pip (``make deb``).

    python deploy/build_deb.py [--out dist] [--python /usr/bin/python3] [--fast]

writes ``dist/amcast_<version>_<arch>.deb``. Theory of operation: a virtual environment
is made with the target's interpreter (Debian's ``/usr/bin/python3``, so the package
depends on the distribution's ``python3``) in a staging tree at ``opt/amcast``; amcast's
wheel and its pinned dependencies (``requirements.lock``) are installed into it by this
checkout's pip, from pip's cache or the index. The scripts' ``#!`` lines are then
rewritten from the staging path to ``/opt/amcast``, so the tree works once unpacked at
``/``. Beside it: ``/usr/bin`` links, the systemd units (``ExecStart`` pointed at
``/usr/bin/amcastd``), the man pages and shell completion (``deploy/manpages.py``), the
default configuration as a conffile in ``/etc/amcast`` and the maintainer scripts
(``deploy/debian/``: a system user ``amcast``, byte-compilation at install). The
package holds compiled dependencies (cryptography, pydantic-core, uvloop): it is for
the build host's architecture and Python minor version only.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PREFIX = "/opt/amcast"


def version() -> str:
    import tomllib

    return str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])


def run(*cmd: str | Path, **kwargs: object) -> None:
    subprocess.run([str(c) for c in cmd], check=True, **kwargs)  # type: ignore[call-overload]


def python_minor(python: str) -> str:
    out = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                         check=True, capture_output=True, text=True)
    return out.stdout.strip()


def pure_wheel(work: Path) -> Path | str:
    """amcast's wheel from a copy of the tracked files (``deploy/build_wheel.py``)."""
    spec = importlib.util.spec_from_file_location("build_wheel",
                                                  ROOT / "deploy" / "build_wheel.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result: Path | str = module.pure_wheel(work)
    return result


def stage_venv(stage: Path, python: str, work: Path) -> None:
    venv = stage / PREFIX.lstrip("/")
    run(python, "-m", "venv", "--without-pip", venv)
    wheel = pure_wheel(work)
    if isinstance(wheel, str):
        raise SystemExit(f"make deb: {wheel}")
    run(sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install",
        "--quiet", "--no-compile", "--disable-pip-version-check",
        "-r", ROOT / "requirements.lock", wheel)
    staged = str(venv)
    for script in (venv / "bin").iterdir():
        if script.is_file() and not script.is_symlink():
            data = script.read_bytes()
            if data.startswith(b"#!") and staged.encode() in data:
                script.write_bytes(data.replace(staged.encode(), PREFIX.encode()))
    for text in [*(venv / "bin").glob("activate*"), venv / "pyvenv.cfg"]:
        text.write_text(text.read_text().replace(staged, PREFIX))
    for info in (venv / "lib").glob("python3*/site-packages/amcast-*.dist-info"):
        # where pip found the wheel (a temporary directory of the build): not shipped
        (info / "direct_url.json").unlink(missing_ok=True)
        record = info / "RECORD"
        record.write_text("".join(line for line in record.read_text().splitlines(True)
                                  if "/direct_url.json," not in line))
    for cache in venv.rglob("__pycache__"):
        shutil.rmtree(cache)


def stage_files(stage: Path, work: Path) -> None:
    def install(src: Path | str, dest: str, mode: int = 0o644, text: str | None = None) -> Path:
        target = stage / dest.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        if text is None:
            shutil.copyfile(src, target)
        else:
            target.write_text(text)
        target.chmod(mode)
        return target

    usr_bin = stage / "usr" / "bin"
    usr_bin.mkdir(parents=True, exist_ok=True)
    for name in ("amcast", "amcastd"):
        (usr_bin / name).symlink_to(f"{PREFIX}/bin/{name}")
    for unit in ("amcastd.service", "amcastd@.service"):
        text = (ROOT / "deploy" / "systemd" / unit).read_text()
        install("", f"/lib/systemd/system/{unit}",
                text=text.replace("/usr/local/bin/amcastd", "/usr/bin/amcastd"))
    generated = work / "generated"
    run(sys.executable, ROOT / "deploy" / "manpages.py", generated, stdout=subprocess.DEVNULL)
    for page in sorted(generated.glob("man*/*")):
        target = stage / "usr/share/man" / page.parent.name / (page.name + ".gz")
        target.parent.mkdir(parents=True, exist_ok=True)
        with gzip.GzipFile(target, "wb", mtime=0) as out:
            out.write(page.read_bytes())
    for name in ("amcast", "amcastd"):
        install(generated / "bash-completion" / name,
                f"/usr/share/bash-completion/completions/{name}")
    install(generated / "zsh" / "_amcast", "/usr/share/zsh/vendor-completions/_amcast")
    install(ROOT / "config" / "amcastd.toml", "/etc/amcast/amcastd.toml", 0o640)
    doc = "/usr/share/doc/amcast"
    install(ROOT / "LICENSE", f"{doc}/copyright")
    for name in ("README.md", "CHANGELOG.md", "SECURITY.md"):
        install(ROOT / name, f"{doc}/{name}")


def control(stage: Path, arch: str, minor: str) -> None:
    debian = stage / "DEBIAN"
    debian.mkdir()
    size_kib = sum(p.stat().st_size for p in stage.rglob("*")
                   if p.is_file() and not p.is_symlink()) // 1024
    major, sub = minor.split(".")
    (debian / "control").write_text(
        f"""Package: amcast
Version: {version()}
Architecture: {arch}
Maintainer: amcast maintainers <amcast@localhost>
Installed-Size: {size_kib}
Depends: python3 (>= {minor}), python3 (<< {major}.{int(sub) + 1}), adduser
Section: net
Priority: optional
Description: atomic multicast daemon and command line
 amcastd delivers the same messages in the same total order to every member
 (the ToTo family's early-delivery rules over a reliable causal multicast on UDP
 IP multicast or unicast); amcast sends, listens, inspects and benchmarks.
 Bundles its Python dependencies in {PREFIX}.
""")
    (debian / "conffiles").write_text("/etc/amcast/amcastd.toml\n")
    for script in ("postinst", "prerm", "postrm"):
        target = debian / script
        shutil.copyfile(ROOT / "deploy" / "debian" / script, target)
        target.chmod(0o755)


def build(out: Path, python: str, fast: bool = False) -> Path:
    arch = subprocess.run(["dpkg", "--print-architecture"], check=True, capture_output=True,
                          text=True).stdout.strip()
    out.mkdir(parents=True, exist_ok=True)
    # the packed modes come from the staged tree: world-readable whatever the caller's
    # umask (a 077 would ship files only root can read, and dpkg-deb refuses DEBIAN/)
    umask = os.umask(0o022)
    try:
        return _build(out, python, arch, fast)
    finally:
        os.umask(umask)


def _build(out: Path, python: str, arch: str, fast: bool) -> Path:
    with tempfile.TemporaryDirectory(prefix="amcast-deb-") as tmp:
        work = Path(tmp)
        stage = work / "root"
        stage_venv(stage, python, work)
        stage_files(stage, work)
        control(stage, arch, python_minor(python))
        deb = out / f"amcast_{version()}_{arch}.deb"
        compression = ["-Zgzip", "-z1"] if fast else ["-Zxz"]
        run("dpkg-deb", "--root-owner-group", *compression, "--build", stage, deb,
            stdout=subprocess.DEVNULL)
    return deb


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "dist")
    parser.add_argument("--python", default="/usr/bin/python3",
                        help="the target's interpreter (default: %(default)s)")
    parser.add_argument("--fast", action="store_true",
                        help="light compression (the tests' build)")
    args = parser.parse_args(argv)
    print(build(args.out, args.python, args.fast))
    return 0


if __name__ == "__main__":
    sys.exit(main())
