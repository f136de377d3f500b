"""What the membership layer reads of its configuration.

``MembershipLayer`` (and its agreement handlers) take any object with these read-only
settings (the Node's ``NodeConfig`` has them all, with their units and defaults
documented there); the layer reads nothing else, so this is its whole configuration
contract. The compiled build (mypyc) checks that the Node's config satisfies it.
"""

from __future__ import annotations

from typing import Protocol


class MembershipConfig(Protocol):
    """The membership layer's timers and quorum setting (``NodeConfig``)."""

    @property
    def heartbeat_interval(self) -> float: ...
    @property
    def suspect_timeout(self) -> float: ...
    @property
    def flush_timeout(self) -> float: ...
    @property
    def membership_retry(self) -> float: ...
    @property
    def join_settle(self) -> float: ...
    @property
    def expected_votes(self) -> int | None: ...
    @property
    def max_held_report(self) -> int: ...
