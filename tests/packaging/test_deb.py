"""The Debian package (``make deb``, ``deploy/build_deb.py``): built, installed with
``dpkg -i`` into a throwaway root (``dpkg --root=DIR --force-not-root``, the maintainer
scripts run chrootless and touch nothing of this host: ``DPKG_ROOT``), run from there,
and purged.

What is checked: the control fields and conffiles; every file an operator expects (the
``/usr/bin`` commands, the systemd units pointed at ``/usr/bin/amcastd``, both man pages,
bash and zsh completion, the default config, the copyright); that nothing in the tree
still names the build's staging directory (the scripts' ``#!`` lines name
``/opt/amcast/bin/python``); the maintainer scripts parse; ``amcastd --help``,
``amcastd --check`` and ``amcast --version`` run from the installed tree (its
interpreter, its own site-packages, not this checkout's); ``dpkg --purge`` leaves
nothing of the package, its configuration included.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.processes, pytest.mark.slow]


@pytest.fixture(scope="module")
def deb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    for tool in ("dpkg-deb", "dpkg"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (a Debian-family host builds the package)")
    system = Path("/usr/bin/python3").exists() and subprocess.run(
        ["/usr/bin/python3", "-c", "import sys; print(sys.version_info >= (3, 11))"],
        capture_output=True, text=True).stdout.strip() == "True"
    if not system:
        pytest.skip("no /usr/bin/python3 >= 3.11 (the package's interpreter)")
    spec = importlib.util.spec_from_file_location("build_deb", ROOT / "deploy" / "build_deb.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    built: Path = module.build(tmp_path_factory.mktemp("dist"), "/usr/bin/python3", fast=True)
    return built


def _dpkg(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """dpkg on the throwaway root: not as root, dependencies (python3, adduser) not in
    its empty database, the maintainer scripts run outside it."""
    return subprocess.run(["dpkg", f"--root={root}", "--force-not-root", "--force-depends",
                           "--force-script-chrootless", "--log=/dev/null", *args],
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def root(deb: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("root")
    admin = target / "var" / "lib" / "dpkg"
    for sub in ("info", "updates"):
        (admin / sub).mkdir(parents=True)
    for name in ("status", "available"):
        (admin / name).touch()
    done = _dpkg(target, "-i", str(deb))
    assert done.returncode == 0, done.stdout + done.stderr
    return target


def _field(deb: Path, name: str) -> str:
    return subprocess.run(["dpkg-deb", "--field", str(deb), name], check=True,
                          capture_output=True, text=True).stdout.strip()


def test_control_and_conffiles(deb: Path, tmp_path: Path) -> None:
    import tomllib

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert _field(deb, "Package") == "amcast"
    assert _field(deb, "Version") == version
    assert "python3 (>= 3.11)" in _field(deb, "Depends")
    control = tmp_path / "control"
    subprocess.run(["dpkg-deb", "--control", str(deb), str(control)], check=True)
    assert (control / "conffiles").read_text().split() == ["/etc/amcast/amcastd.toml"]
    for script in ("postinst", "prerm", "postrm"):
        assert os.access(control / script, os.X_OK), script
        subprocess.run(["sh", "-n", str(control / script)], check=True)


def test_the_tree_holds_what_an_operator_expects(root: Path) -> None:
    for path in ("usr/share/man/man1/amcast.1.gz", "usr/share/man/man8/amcastd.8.gz",
                 "usr/share/bash-completion/completions/amcast",
                 "usr/share/bash-completion/completions/amcastd",
                 "usr/share/zsh/vendor-completions/_amcast",
                 "etc/amcast/amcastd.toml", "usr/share/doc/amcast/copyright",
                 "usr/share/doc/amcast/CHANGELOG.md"):
        assert (root / path).is_file(), path
    for name in ("amcast", "amcastd"):
        link = root / "usr" / "bin" / name
        assert os.readlink(link) == f"/opt/amcast/bin/{name}"
        script = root / "opt" / "amcast" / "bin" / name
        assert script.read_text().splitlines()[0] == "#!/opt/amcast/bin/python"
    for unit in ("amcastd.service", "amcastd@.service"):
        text = (root / "lib" / "systemd" / "system" / unit).read_text()
        assert "ExecStart=/usr/bin/amcastd " in text and "/usr/local/bin" not in text
        assert "man:amcastd(8)" in text
    staged = subprocess.run(["grep", "-rl", "amcast-deb-", str(root)], capture_output=True,
                            text=True)
    assert staged.stdout == "", staged.stdout  # the staging directory is named nowhere


def test_commands_run_from_the_unpacked_tree(root: Path, tmp_path: Path) -> None:
    python = root / "opt" / "amcast" / "bin" / "python"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"}

    def run(name: str, *args: str) -> subprocess.CompletedProcess[str]:
        script = root / "opt" / "amcast" / "bin" / name
        return subprocess.run([str(python), str(script), *args], capture_output=True,
                              text=True, timeout=120, env=env, cwd=tmp_path)

    where = subprocess.run([str(python), "-c", "import amcast; print(amcast.__file__)"],
                           capture_output=True, text=True, env=env, cwd=tmp_path, check=True)
    assert where.stdout.startswith(str(root / "opt" / "amcast" / "lib")), where.stdout
    done = run("amcastd", "--help")
    assert done.returncode == 0 and "usage: amcastd" in done.stdout, done.stderr
    done = run("amcast", "--version")
    assert done.returncode == 0 and done.stdout.startswith("amcast "), done.stderr
    config = tmp_path / "amcastd.toml"
    config.write_text((root / "etc" / "amcast" / "amcastd.toml").read_text())
    env.update(AMCAST_API__SOCKET=str(tmp_path / "a.sock"), AMCAST_LOGS__DIR=str(tmp_path),
               AMCAST_NODE__STATE_DIR=str(tmp_path), AMCAST_PROTOCOL__INSECURE="true",
               AMCAST_METRICS__ENABLED="false")
    done = run("amcastd", "--config", str(config), "--check")
    assert done.returncode == 0, done.stdout + done.stderr
    assert '"socket_mode": "0o660"' in done.stdout


def test_purge_leaves_nothing(root: Path, deb: Path, tmp_path: Path) -> None:
    """Last in the module: it removes what the other tests read."""
    listed = _dpkg(root, "-L", "amcast")
    assert "/usr/bin/amcastd" in listed.stdout.split(), listed.stderr
    done = _dpkg(root, "--purge", "amcast")
    assert done.returncode == 0, done.stdout + done.stderr
    left = sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if not str(p.relative_to(root)).startswith("var"))
    assert left == [], left
