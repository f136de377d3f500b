"""``amcast status`` text: the key line an operator reads during a key rollover, and the
transport line, the logs line when the disk refuses them, and a peer held back as deaf."""

from __future__ import annotations

from amcast.commands.status import keys_line, membership_report, transport_line


def test_the_key_line_shows_a_rollover_in_progress() -> None:
    keys = {"sealed": True, "ids": [1, 2], "sends_with": 1,
            "peers": [{"node": 1, "sends_with": 1, "newest": 2, "heard_s_ago": 0.01},
                      {"node": 2, "sends_with": 1, "newest": 1, "heard_s_ago": 0.02}]}
    assert keys_line(keys) == "keys: 1,2; sending with 1; peers 1: 1 (holds 2), 2: 1 (holds 1)"
    assert keys_line({"sealed": False}).startswith("keys: INSECURE")


def test_a_status_without_keys_shows_no_key_line() -> None:
    status = {"view": {"id": 3, "members": [0, 1], "primary": True}, "peers": []}
    lines, _ = membership_report(status)
    assert not [line for line in lines if line.startswith("keys")]
    lines, _ = membership_report({**status, "keys": {"sealed": True, "ids": [4],
                                                     "sends_with": 4, "peers": []}})
    assert "keys: 4; sending with 4" in lines


def test_the_transport_line_names_the_transport_and_each_redundant_link() -> None:
    assert transport_line({"transport": "unicast"}) == "transport: unicast"
    links = [{"interface": "10.0.1.1", "port": 42999, "datagrams_sent": 10,
              "datagrams_received": 7},
             {"interface": None, "port": 43000, "datagrams_sent": 10, "datagrams_received": 0}]
    assert transport_line({"transport": "multicast", "links": links}) == (
        "transport: multicast; link 0 10.0.1.1:42999 sent 10 received 7; "
        "link 1 default:43000 sent 10 received 0")
    status = {"view": {"id": 3, "members": [0, 1], "primary": True}, "peers": [],
              "transport": "unicast"}
    assert "transport: unicast" in membership_report(status)[0]


def test_a_log_the_disk_refuses_is_a_line_of_its_own() -> None:
    status = {"view": {"id": 3, "members": [0, 1], "primary": True}, "peers": [],
              "logs": {"dir": "/var/log/amcast", "write_failures": 0, "errors": []}}
    assert not [line for line in membership_report(status)[0] if line.startswith("logs")]
    status["logs"] = {"dir": "/var/log/amcast", "write_failures": 4,
                      "errors": ["/var/log/amcast/delivery.jsonl: No space left on device"]}
    (line,) = [line for line in membership_report(status)[0] if line.startswith("logs")]
    assert "CANNOT WRITE (4 refused writes" in line and "No space left on device" in line


def test_a_peer_held_back_as_deaf_says_so_in_the_peers_table() -> None:
    peers = [{"node": 1, "incarnation": 5, "alive": True, "in_view": True,
              "held_back_s": None, "last_heard_s": 0.01},
             {"node": 3, "incarnation": 5, "alive": True, "in_view": False,
              "held_back_s": 12.84, "last_heard_s": 0.02},
             {"node": 4, "incarnation": 5, "alive": False, "in_view": False,
              "last_heard_s": 3.0}]
    status = {"view": {"id": 3, "members": [0, 1], "primary": True}, "peers": peers}
    _, table = membership_report(status)
    assert [row[2] for row in table["rows"]] == [
        "yes", "no, HELD BACK 12.8 s (may not hear us)", "no"]


def test_a_peer_a_blocked_view_change_awaits_says_so_in_the_peers_table() -> None:
    # the coordinator gave its view up (so node 2 is still a member of the view it
    # knows) and keeps proposing a view node 2 may have decided before it died
    peers = [{"node": 1, "incarnation": 7, "alive": True, "in_view": False,
              "held_back_s": None, "awaited_s": None, "last_heard_s": 0.01},
             {"node": 2, "incarnation": 5, "alive": False, "in_view": True,
              "held_back_s": None, "awaited_s": 30.24, "last_heard_s": 31.0}]
    status = {"view": {"id": 3, "members": [0, 1, 2], "primary": False}, "peers": peers}
    _, table = membership_report(status)
    assert [row[2] for row in table["rows"]] == [
        "no", "no, AWAITED 30.2 s (may have decided the view change: start it from its "
        "state dir)"]
