"""The compiled protocol core's guard (``amcast.daemon.native``): a build older than its
sources, partial, or damaged is refused with one line, and ``make check``'s compiled run
really runs compiled; ``make wheel-native`` packs that build into a wheel that installs
and runs compiled."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import pytest
import structlog.testing
from amcast.daemon import main as daemon_main
from amcast.daemon import native


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A protocols/ of two sources and no build, in place of the real one."""
    (tmp_path / "wire").mkdir()  # modules amcast.protocols does not have: never compiled
    (tmp_path / "wire" / "standin.py").write_text("X = 1\n")
    (tmp_path / "standin.py").write_text("Y = 2\n")
    monkeypatch.setattr(native, "PROTOCOLS", tmp_path)
    monkeypatch.setattr(native, "MANIFEST", tmp_path / "native.json")
    return tmp_path


def build(tree: Path, **changes: str) -> None:
    modules = {"wire.standin": native.digest(tree / "wire" / "standin.py"),
               "standin": native.digest(tree / "standin.py"), **changes}
    (tree / "native.json").write_text(json.dumps({"mypy": "2.4.1", "group": "g__mypyc",
                                                  "modules": modules}))


def test_no_build_is_interpreted_and_fine(tree: Path) -> None:
    assert native.problem() is None
    assert native.state()["protocol_core"] == "interpreted"


def test_compiled_modules_without_a_manifest_are_refused(tree: Path) -> None:
    (tree / "standin.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    assert "no native.json" in (native.problem() or "")


def test_a_source_edited_after_the_build_is_refused(tree: Path) -> None:
    build(tree, standin="0" * 64)
    assert native.problem() == ("protocols/standin.py changed after `make native`: run "
                                "`make native` again, or `make pure` to run interpreted")


def test_a_module_of_the_build_that_does_not_load_compiled_is_refused(tree: Path) -> None:
    build(tree)  # the hashes match, but these stand-ins never load from an extension
    assert "is missing or was built for another Python" in (native.problem() or "")


def test_a_damaged_manifest_is_refused(tree: Path) -> None:
    (tree / "native.json").write_text("{not json")
    assert "damaged" in (native.problem() or "")


def test_amcastd_refuses_to_start_on_a_stale_build(
    tree: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    build(tree, standin="0" * 64)
    # the daemon's logging setup would bind this test's captured stderr for good
    monkeypatch.setattr(daemon_main, "configure_logging", lambda *a, **k: None)
    with structlog.testing.capture_logs() as logs:
        assert daemon_main.main(["--check", "--config", "/nonexistent.toml"]) == 2
    assert len(logs) == 1 and logs[0]["log_level"] == "error"
    assert logs[0]["event"] == "amcastd cannot start"
    assert "protocols/standin.py changed after `make native`" in logs[0]["error"]


def test_the_real_tree_runs_what_its_manifest_says() -> None:
    """In make check's compiled run every module of the build loads compiled; in the
    interpreted run none is present."""
    assert native.problem() is None
    state = native.state()
    if native.MANIFEST.exists():
        assert state["protocol_core"] == "compiled"
        assert state["compiled_modules"] == len(native.MODULES)
        from amcast.protocols.ordering import engine
        assert engine.__file__ is not None and engine.__file__.endswith(".so")
    else:
        assert state == {"protocol_core": "interpreted", "compiled_modules": 0, "mypyc": None}
        assert native.extensions() == []


REPO = Path(__file__).resolve().parents[2]

# Run with the wheel's install directory first on the path: three daemons of the
# installed package (the cluster starts them with this interpreter and environment),
# 200 messages from all three clients; each daemon's memory map says which engine ran.
ORDER_FROM_THE_WHEEL = """
import asyncio, json, sys, tempfile
from pathlib import Path
from amcast.client.aio import Client
from amcast.daemon import native
from amcast.localcluster import LocalCluster

async def run(sockets):
    clients = [await Client.connect(s, name=f"wheel-{i}") for i, s in enumerate(sockets)]
    for c in clients:
        await c.join("g")
    got = [[] for _ in clients]
    async def take(i, c):
        async for batch in c.batches():
            got[i].extend(d.payload for d in batch)
            if len(got[i]) >= 200:
                return
    tasks = [asyncio.create_task(take(i, c)) for i, c in enumerate(clients)]
    for k in range(200):
        clients[k % 3].send(b"m%d" % k, "g")
    for c in clients:
        await c.sync()
    await asyncio.wait_for(asyncio.gather(*tasks), 60)
    for c in clients:
        await c.close()
    return got

cluster = LocalCluster(3, Path(tempfile.mkdtemp(prefix="wheel-", dir=sys.argv[1])))
cluster.start()
try:
    got = asyncio.run(run(cluster.sockets))
    engines = [sorted({line.split()[-1] for line in open(f"/proc/{n.pid}/maps")
                       if "/ordering/engine." in line}) for n in cluster.nodes]
finally:
    cluster.stop()
print(json.dumps({"core": native.state()["protocol_core"], "where": native.PROTOCOLS.as_posix(),
                  "engines": engines, "delivered": [len(g) for g in got],
                  "identical": got[0] == got[1] == got[2], "distinct": len(set(got[0]))}))
"""


@pytest.mark.processes
def test_the_compiled_wheel_installs_and_orders_compiled(
    tmp_path: Path, build_native: ModuleType,
) -> None:
    """``make wheel-native``: the current build, packed as a platform wheel, installs with
    pip (into a directory of its own, no index needed), passes the stale-build guard from
    there, and three daemons started from it order the same 200 messages with its
    compiled engine. Packed from an ordinary wheel instead of the tracked files (the
    container image's ``build-native`` stage, ``--from-wheel``), it is the same wheel."""
    if not native.MANIFEST.exists():
        pytest.skip("needs the build of `make native`: make check's compiled run has it")
    dist = tmp_path / "dist"
    made = subprocess.run([sys.executable, str(REPO / "deploy" / "build_native.py"),
                           "--wheel", str(dist)], capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    (whl,) = dist.glob("amcast-*-cp3*-linux_*.whl")
    names = set(zipfile.ZipFile(whl).namelist())
    for module in native.MODULES:
        stem = f"amcast/protocols/{module.replace('.', '/')}."
        assert any(n.startswith(stem) and n.endswith(".so") for n in names), module
    assert "amcast/protocols/native.json" in names
    assert [n for n in names if "/" not in n and n.endswith(".so")] == [
        next(n for n in names if "__mypyc" in n)]  # the group library, at the root
    info = next(n for n in names if n.endswith(".dist-info/WHEEL"))
    headers = zipfile.ZipFile(whl).read(info).decode().splitlines()
    assert "" not in headers and "Root-Is-Purelib: false" in headers
    assert [h for h in headers if h.startswith("Tag:")] == [
        f"Tag: {whl.name.removesuffix('.whl').split('-', 2)[2]}"]
    pure = build_native.pure_wheel(tmp_path / "pure")
    assert isinstance(pure, Path), pure
    again = subprocess.run([sys.executable, str(REPO / "deploy" / "build_native.py"),
                            "--wheel", str(tmp_path / "again"), "--from-wheel", str(pure)],
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    (from_pure,) = (tmp_path / "again").glob("*.whl")
    assert from_pure.name == whl.name
    assert {i.filename: i.CRC for i in zipfile.ZipFile(from_pure).infolist()} == {
        i.filename: i.CRC for i in zipfile.ZipFile(whl).infolist()}

    site = tmp_path / "site"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                          "--no-index", "--target", str(site), str(whl)],
                         capture_output=True, text=True, timeout=300)
    assert pip.returncode == 0, pip.stderr[-2000:]
    env = {**os.environ, "PYTHONPATH": str(site)}
    run = subprocess.run([sys.executable, "-c", ORDER_FROM_THE_WHEEL, str(tmp_path)],
                         capture_output=True, text=True, timeout=180, cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(run.stdout)
    assert result["where"] == f"{site}/amcast/protocols"  # the installed copy, not this tree
    (engine,) = (n for n in names  # the engine's extension module, not its source
                 if n.startswith("amcast/protocols/ordering/engine.") and n.endswith(".so"))
    assert result["engines"] == [[f"{site}/{engine}"]] * 3
    assert result == {**result, "core": "compiled", "delivered": [200, 200, 200],
                      "identical": True, "distinct": 200}


def test_a_wheel_needs_a_current_build(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], build_native: ModuleType,
) -> None:
    assert build_native.wheel(tmp_path / "dist") == 1  # no build in the stand-in tree
    assert capsys.readouterr().err == ("make wheel-native needs a current build: none "
                                       "found, run `make native`\n")
    build(tree, standin="0" * 64)  # a stale one
    assert build_native.wheel(tmp_path / "dist") == 1
    assert "protocols/standin.py changed after `make native`" in capsys.readouterr().err
    assert not (tmp_path / "dist").exists()


def test_from_wheel_takes_an_ordinary_wheel_and_goes_with_wheel(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], build_native: ModuleType,
) -> None:
    assert build_native.main(["--from-wheel", str(tmp_path / "x.whl")]) == 1
    assert capsys.readouterr().err == "--from-wheel goes with --wheel DIR\n"
    compiled = tmp_path / "amcast-0.1.0-cp311-cp311-linux_x86_64.whl"
    compiled.write_bytes(b"")
    for path in (tmp_path / "missing.whl", compiled):
        assert build_native._ordinary(path) == (
            f"--from-wheel {path}: not an ordinary amcast wheel (amcast-*-py3-none-any.whl)")
    pure = tmp_path / "amcast-0.1.0-py3-none-any.whl"
    pure.write_bytes(b"")
    assert build_native._ordinary(pure) == pure
