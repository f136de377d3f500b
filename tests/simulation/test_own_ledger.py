"""The simulator's own-message accounting (``protocols/simulation/own_ledger.py``): a
daemon counts its clients' messages in send order, so every event about own messages
must name exactly the oldest ones not yet accounted for."""

from __future__ import annotations

from amcast.protocols.simulation.own_ledger import OwnLedger


def ledger_with(*payloads: bytes) -> OwnLedger:
    ledger = OwnLedger()
    for p in payloads:
        ledger.submitted("p", p)
    return ledger


def test_events_naming_the_oldest_messages_in_order_are_exact() -> None:
    ledger = ledger_with(b"a", b"b", b"c", b"d")
    ledger.consume("p", (b"a",), "delivery")
    ledger.consume("p", (b"b",), "delivered elsewhere")
    ledger.consume("p", (b"c", b"d"), "in doubt")
    ledger.consume("p", (), "in doubt")
    assert ledger.violations == []


def test_skipping_an_older_message_is_reported_once() -> None:
    # the defect it found: in doubt named c while b (delivered by the primary component,
    # never here) was older; a count-based ledger then reports b instead of c
    ledger = ledger_with(b"a", b"b", b"c", b"d")
    ledger.consume("p", (b"a",), "delivery")
    ledger.consume("p", (b"c",), "in doubt")
    assert len(ledger.violations) == 1
    assert "in doubt named 1 own message(s), 1 of which" in ledger.violations[0]
    ledger.consume("p", (b"b", b"d"), "delivery")  # resynchronised: no second report
    assert len(ledger.violations) == 1


def test_naming_more_than_is_pending_is_a_violation() -> None:
    ledger = ledger_with(b"a")
    ledger.consume("p", (b"a", b"z"), "delivery")
    assert len(ledger.violations) == 1


def test_processes_are_separate_and_a_forgotten_one_starts_empty() -> None:
    ledger = OwnLedger()
    ledger.submitted("p", b"a")
    ledger.submitted("q", b"b")
    ledger.consume("q", (b"b",), "delivery")
    ledger.forget("p")
    ledger.consume("p", (b"a",), "delivery")
    assert len(ledger.violations) == 1
