"""``amcast state``: a daemon's membership state file in words and as JSON, and the
documented failures (missing: 1, damaged or not a state file: 2), one line each."""

from __future__ import annotations

import json
from pathlib import Path

from amcast.daemon.state import StateFile
from amcast.protocols.membership.durable import DurableState
from amcast.protocols.wire.membership import Ballot, Member, Proposal, ViewRecord

from tests.cli.helpers import amcast

OLD = ViewRecord(5, (Member(0, 11), Member(1, 12), Member(2, 13)), (0, 1, 2), 4)
NEXT = ViewRecord(6, (Member(0, 11), Member(1, 12)), (0, 1, 2), 5)


def write(directory: Path) -> None:
    StateFile(str(directory), 0).write(
        DurableState(0, incarnation=11, known=OLD, max_view_id=5).encode())
    StateFile(str(directory), 1).write(DurableState(
        1, incarnation=12, promised=Ballot(7, 0), known=OLD, max_view_id=6,
        accepted=(Ballot(7, 0), Proposal(NEXT, OLD, ((0, 9), (1, 9), (2, 8)))),
        accepted_held=False).encode())


def test_a_state_dir_in_words_and_as_json(tmp_path: Path) -> None:
    write(tmp_path)
    r = amcast("state", str(tmp_path))
    assert r.code == 0 and r.err == "", r.err
    assert r.out.splitlines() == [
        f"{tmp_path}/node-0.state: node 0, incarnation 11",
        "  last view: 5 after view 4; members 0 (incarnation 11), 1 (incarnation 12), "
        "2 (incarnation 13)",
        "  its list: [0, 1, 2]: 2 of them must agree on the next view (more with "
        "protocol.expected_votes; and a majority of node.members, if that differs)",
        "  highest view id seen: 5",
        "  promised: nothing",
        "  accepted: nothing",
        f"{tmp_path}/node-1.state: node 1, incarnation 12",
        "  last view: 5 after view 4; members 0 (incarnation 11), 1 (incarnation 12), "
        "2 (incarnation 13)",
        "  its list: [0, 1, 2]: 2 of them must agree on the next view (more with "
        "protocol.expected_votes; and a majority of node.members, if that differs)",
        "  highest view id seen: 6",
        "  promised: ballot 7 of node 0",
        "  accepted: view 6 of [0, 1] after view 5, at ballot 7 of node 0, not holding "
        "its cut",
    ]
    r = amcast("state", str(tmp_path / "node-1.state"), "--json")
    (d,) = [json.loads(line) for line in r.out.splitlines()]
    assert (d["node"], d["incarnation"], d["max_view_id"], d["promised"]) == (1, 12, 6, [7, 0])
    assert d["last_view"] == {"id": 5, "previous": 4, "members": {"0": 11, "1": 12, "2": 13},
                              "listed": [0, 1, 2], "needed": 2}
    assert d["accepted"]["view"]["id"] == 6 and d["accepted"]["after"] == 5
    assert d["accepted"]["held_cut"] is False


def test_missing_damaged_and_misnamed_files_are_one_line(tmp_path: Path) -> None:
    r = amcast("state", str(tmp_path / "node-3.state"))
    assert r.code == 1 and "no state file at" in r.one_error_line()
    r = amcast("state", str(tmp_path))
    assert r.code == 1 and "no node-<id>.state file in" in r.one_error_line()
    (tmp_path / "node-3.state").write_bytes(b"\x93garbage")
    r = amcast("state", str(tmp_path / "node-3.state"))
    assert r.code == 2 and "damaged" in r.one_error_line()
    write(tmp_path)
    (tmp_path / "node-0.state").rename(tmp_path / "node-4.state")  # another node's record
    r = amcast("state", str(tmp_path / "node-4.state"))
    assert r.code == 2 and "belongs to node 0, not 4" in r.one_error_line()
    r = amcast("state", str(tmp_path / "amcastd.toml"))
    assert r.code == 2 and "not a state file" in r.one_error_line()
