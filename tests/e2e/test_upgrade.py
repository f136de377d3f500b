"""A rolling upgrade under load and crashes, from an older landed version to this tree.

Operators upgrade a cluster one daemon at a time, so for a while daemons of two versions
order messages together and run view changes together. ``BASE`` is the oldest landed
commit such an upgrade must start from: the last one before a change of the datagrams
(e9adf2e, before the holder rule of the view agreement added three fields to its
messages; docs/membership.md, *Mixed versions*). Move it forward when the wire changes
again.

The test takes ``BASE``'s tree from git (``git archive``) and starts a daemon from it by
pointing the editable install's import mapping there (a ``sitecustomize`` on the
``PYTHONPATH`` of that daemon alone), with the same virtualenv. It skips, with the
reason, where that is impossible: no git, a clone without that commit, or amcast not
installed editable from this tree.

Five daemons start on ``BASE`` with a recording client each sending 200 messages/s
(``amcast.faultload``). Two are upgraded (SIGTERM, then started from this tree with the
same config and state directory). Then, with two versions in the view, an old daemon is
killed with -9, and so is the coordinator (node 0, the lowest id) in the middle of the
view change that removes it (when it proposes the view); node 1 takes the view change
over. Either way round:

- ``old-coordinator``: nodes 4 and 3 upgraded first; node 2 and the old node 0 killed;
  the old node 1 coordinates the new 3 and 4;
- ``new-coordinator``: nodes 0 and 1 upgraded first; node 4 and the new node 0 killed;
  the new node 1 coordinates the old 2 and 3.

The first runs over multicast, the second over the unicast transport (``network.peers``).
The killed daemons come back on this tree, the rest are upgraded, and the whole history
is judged by ``faultload.verdict``: identical sequences in every view at the daemons that
completed it, nothing accepted lost, nothing delivered twice.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import amcast
from amcast.faultload import FaultRun
from amcast.localcluster import LocalCluster
from tests.e2e.test_rolling_restart import WAIT, logged, settle_and_judge

pytestmark = pytest.mark.processes

BASE = "e9adf2e204417f713f677a21cb2ae7766c3d92ac"
ROOT = Path(__file__).resolve().parents[2]
TREES = ("amcast", "daemon", "protocols", "analytics")
LOAD_S = 1.0

SHIM = '''\
"""Run amcast from {base} instead of {root} (tests/e2e/test_upgrade.py)."""
import sys

for _name, _module in list(sys.modules.items()):
    _mapping = getattr(_module, "MAPPING", None)
    if _name.startswith("__editable__") and isinstance(_mapping, dict):
        for _key, _path in list(_mapping.items()):
            if _key.split(".")[0] == "amcast" and _path.startswith({root!r}):
                _mapping[_key] = {base!r} + _path[len({root!r}):]
'''


def installed_editable() -> bool:
    """amcast is installed editable from this tree (the import mapping ``SHIM`` edits)."""
    return Path(amcast.__file__).resolve().parent == ROOT / "amcast" and any(
        name.startswith("__editable__")
        and getattr(module, "MAPPING", {}).get("amcast") == str(ROOT / "amcast")
        for name, module in list(sys.modules.items()))


def extract_base(into: Path) -> Path:
    """``BASE``'s tree under ``into``, or a skip saying why it cannot be had."""
    if not installed_editable():
        pytest.skip("amcast is not installed editable from this tree (`make install`)")
    if shutil.which("git") is None:
        pytest.skip("git is not installed: the base version comes from the repository")
    found = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{BASE}^{{commit}}"],
                           capture_output=True)
    if found.returncode != 0:
        pytest.skip(f"this clone lacks the base commit {BASE[:7]} (a shallow clone?)")
    tree = into / "base"
    tree.mkdir()
    archive = into / "base.tar"
    subprocess.run(["git", "-C", str(ROOT), "archive", "--output", str(archive), BASE,
                    *TREES], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(tree, filter="data")
    return tree


def base_wrapper(into: Path, tree: Path) -> list[str]:
    """A command prefix that execs its arguments (the daemon) with ``tree`` as amcast."""
    shim = into / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(SHIM.format(root=str(ROOT), base=str(tree)))
    wrapper = into / "base-amcastd"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH="{shim}" exec "$@"\n')
    wrapper.chmod(0o755)
    return [str(wrapper)]


def resolves_to(wrapper: list[str], module: str) -> tuple[str, bool]:
    """Where ``module`` is imported from under ``wrapper``, and whether it has the holder
    rule (``needs_holder``, which ``BASE`` lacks)."""
    out = subprocess.run(
        [*wrapper, sys.executable, "-c",
         f"import {module} as m; print(m.__file__); print(hasattr(m, 'needs_holder'))"],
        capture_output=True, text=True, check=True, timeout=60).stdout.split()
    return out[0], out[1] == "True"


@pytest.fixture
async def mixed(request: pytest.FixtureRequest) -> AsyncIterator[FaultRun]:
    """Five daemons of ``BASE`` under load, over the transport the test names."""
    directory = Path(tempfile.mkdtemp(prefix="amup-", dir="/tmp"))
    run: FaultRun | None = None
    cluster: LocalCluster | None = None
    try:
        tree = extract_base(directory)
        old = base_wrapper(directory, tree)
        where, holder_rule = resolves_to(old, "amcast.protocols.membership.agreement")
        assert where.startswith(str(tree)) and not holder_rule, (where, holder_rule)
        where, holder_rule = resolves_to([], "amcast.protocols.membership.agreement")
        assert where.startswith(str(ROOT)) and holder_rule
        cluster = LocalCluster(5, directory / "cluster", metrics=False, log_level="info",
                               wrappers=[list(old) for _ in range(5)],
                               transport=request.param)
        run = FaultRun(cluster, rate=200)
        await asyncio.to_thread(cluster.start, 60)
        await run.connect_all()
        run.start_load()
        yield run
    finally:
        if run is not None:
            await run.close()
        if cluster is not None:
            await asyncio.to_thread(cluster.stop, 20)
        shutil.rmtree(directory, ignore_errors=True)


async def upgrade(run: FaultRun, node: int) -> None:
    """SIGTERM ``node``, start it from this tree, wait for the view of all five."""
    cluster = run.cluster
    term_at = cluster.terminate(node)
    others = [r for r in run.live() if r.node != node]
    await run.wait_view(sorted(r.node for r in others), others, after=term_at, timeout=WAIT)
    assert await asyncio.to_thread(cluster.wait_exit, node, WAIT) == 0
    cluster.wrappers[node] = []
    restarted = await asyncio.to_thread(cluster.restart, node, 60)
    await run.connect(node)
    await run.wait_view(range(5), run.live(), after=restarted.spawned_at, timeout=WAIT)


def running_from(pid: int | None) -> str:
    """The ``PYTHONPATH`` a daemon runs with (the base version's shim, or none)."""
    assert pid is not None
    env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return next((e.decode() for e in env if e.startswith(b"PYTHONPATH=")), "")


@pytest.mark.parametrize(("mixed", "first"), [("multicast", (4, 3)), ("unicast", (0, 1))],
                         ids=["old-coordinator-multicast", "new-coordinator-unicast"],
                         indirect=["mixed"])
async def test_rolling_upgrade_from_the_base_version_with_crashes_in_the_mixed_cluster(
    mixed: FaultRun, first: tuple[int, int],
) -> None:
    run = mixed
    cluster = run.cluster
    assert all("shim" in running_from(n.pid) for n in cluster.nodes)
    await asyncio.sleep(LOAD_S)
    for node in first:
        await upgrade(run, node)
    await asyncio.sleep(LOAD_S / 2)

    victim = 2 if first == (4, 3) else 4  # an old daemon that is not the coordinator
    log0 = cluster.nodes[0].config.parent / "amcastd.log"
    offset = log0.stat().st_size
    first_at = cluster.kill(victim)
    await logged(log0, offset, "view proposed", WAIT)
    second_at = cluster.kill(0)  # the coordinator, while it proposes
    left = [i for i in range(1, 5) if i != victim]
    survivors = [run.of(i) for i in left]  # node 1 coordinates; old and new daemons
    await run.wait_view(left, survivors, after=first_at, timeout=WAIT)
    views = [[n.frame["members"] for n in r.views() if n.at >= first_at] for r in survivors]
    versions = ["new" if "shim" not in running_from(cluster.nodes[i].pid) else "old"
                for i in left]
    print(f"views installed by nodes {left} ({versions}): {views}")
    await asyncio.sleep(LOAD_S / 2)

    for node in (0, victim):  # back, upgraded
        await asyncio.to_thread(cluster.wait_exit, node, 10)
        cluster.wrappers[node] = []
        await asyncio.to_thread(cluster.restart, node, 60)
        await run.connect(node)
    await run.wait_view(range(5), run.live(), after=second_at, timeout=WAIT)
    for node in range(5):
        if "shim" in running_from(cluster.nodes[node].pid):
            await upgrade(run, node)
    assert not any("shim" in running_from(n.pid) for n in cluster.nodes), \
        "every daemon runs this tree at the end"
    await settle_and_judge(run)
