"""A daemon that lost its state directory is taken in again, but its vote does not
count toward the next view until a view lists it in its new life: the view its peers
know lists its id at an incarnation its new state file cannot have been (what it
promised there is gone). Alone with one other member of three it forms no view, and the
coordinator says why (``status`` ``quorum.not_counted``, a health problem, the quorum
line of ``amcast status``); once the third member is back, the three form one
(docs/membership.md, *Whose vote counts*)."""

from __future__ import annotations

from pathlib import Path

from amcast.daemon.runner import Daemon
from amcast.daemon.state import StateFile
from amcast.protocols.membership.durable import DurableState
from amcast.protocols.wire.membership import Member, ViewRecord

from amcast.commands.status import membership_report
from amcast.keygen import create
from tests.cli.helpers import amcast
from tests.daemon.daemon_helpers import group_config, loopback_group, running, until
from tests.daemon.test_clock_offsets import scrape

LAST = ViewRecord(5, tuple(Member(n, 1) for n in range(3)), (0, 1, 2), 4)


async def test_a_daemon_without_its_state_file_is_not_counted_until_a_view_lists_it(
    tmp_path: Path,
) -> None:
    group = loopback_group()
    for node in (0, 2):  # their files say view 5 listed 0, 1 and 2; node 1 lost its own
        (tmp_path / f"state{node}").mkdir()
        StateFile(str(tmp_path / f"state{node}"), node).write(
            DurableState(node, incarnation=1, known=LAST, max_view_id=5).encode())
    key = tmp_path / "authkey"
    create(key)
    sealed = {"key_file": str(key)}
    zero, one, two = (Daemon(group_config(tmp_path, n, group, security=sealed), environ={})
                      for n in range(3))

    async with running([zero, one]):
        await until(lambda: zero.status()["quorum"].get("not_counted") == [1],
                    "node 0's rounds with node 1's promise")
        st = zero.status()
        assert not st["view"]["primary"] and st["quorum"]["reachable"] == 2
        assert any(p.startswith("the votes of nodes [1] do not count toward the next view")
                   for p in st["health"]["problems"]), st["health"]["problems"]
        assert "amcast_quorum_not_counted 1.0" in scrape(zero)
        lines, _ = membership_report(st)
        (quorum,) = [ln for ln in lines if ln.startswith("quorum:")]
        assert quorum.endswith("votes not counted (not the state the last view listed): [1]")
        async with running([two]):
            await until(lambda: all(d.primary and d.members == [0, 1, 2]
                                    for d in (zero, one, two)), "the view of all three")
            assert all("not_counted" not in d.status()["quorum"] for d in (zero, one, two))
    # the new file says where it began; the files carried over (an older record) do not
    r = amcast("state", str(tmp_path / "state1"))
    assert r.code == 0, r.err
    assert f"incarnation {one.node.incarnation}, the file begun at incarnation " in r.out
    assert f"  incarnations it started, latest last: {one.node.incarnation}\n" in r.out
    assert "the file begun" not in amcast("state", str(tmp_path / "state0")).out
