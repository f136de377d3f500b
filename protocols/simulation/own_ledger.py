"""A daemon's count of its own messages, checked against the messages' identities.

amcastd does not follow its clients' messages by identity once the engine has them
(``daemon/submitq.Ledger``): per client it keeps the accepted messages in send order and
lets every event about own messages consume the *oldest* ones by count:

- a delivery here of an own vertex (its messages);
- ``MessagesInDoubt`` of a view this member was excluded from: first
  ``delivered_elsewhere`` (inside the cut: the primary component delivered them, this
  member never did), then ``payloads`` (beyond the cut: reported to the client as not
  delivered). ``delivered_here`` were consumed when they were delivered.

That count names the right messages only if every such event names exactly the oldest
own messages not yet accounted for (per-sender FIFO of the total order, section 3 of
the ToTo paper, and the cut of section 2's view change). ``OwnLedger`` keeps the
identities per process in the simulator and checks each event against them: a mismatch
is a daemon that would tell its client about the wrong messages and leave others
unaccounted for forever (nothing delivered, nothing reported: lost silently).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Sequence


class OwnLedger:
    """Own messages per process, oldest first, consumed as the daemon's ledger does."""

    def __init__(self) -> None:
        self._pending: dict[Hashable, deque[bytes]] = {}
        self.violations: list[str] = []

    def submitted(self, proc: Hashable, payload: bytes) -> None:
        self._pending.setdefault(proc, deque()).append(payload)

    def consume(self, proc: Hashable, payloads: Sequence[bytes], what: str) -> None:
        """An event named ``payloads`` (in send order) as ``what``; they must be the
        oldest own messages of ``proc`` not accounted for yet."""
        if not payloads:
            return
        pending = self._pending.setdefault(proc, deque())
        oldest = [pending.popleft() for _ in range(min(len(payloads), len(pending)))]
        if oldest == list(payloads):
            return
        named = set(payloads)
        wrong = sum(1 for p in oldest if p not in named)
        self.violations.append(
            f"{proc}: {what} named {len(payloads)} own message(s), {wrong} of which are not "
            f"among the oldest {len(oldest)} unaccounted for: a count-based ledger reports "
            "the wrong messages")
        # resynchronise, so that one defect is reported once, not at every later event
        self._pending[proc] = deque(p for p in [*oldest, *pending] if p not in named)

    def forget(self, proc: Hashable) -> None:
        """``proc`` ended (crash or leave): its ledger goes with it."""
        self._pending.pop(proc, None)
