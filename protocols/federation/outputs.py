"""What a ``FederationMember`` hands its caller: frozen records, one per action.

The caller (the daemon, or the simulator) acts on them in the order given:
``SendRemote`` is a unicast datagram to one member of another cluster,
``OrderLocally`` a record to multicast into the own cluster's total order with *safe*
service, ``Deliver`` a global message for this member's clients (in delivery order),
``Stalled`` a message that waits too long (for logs and metrics), ``Undelivered`` an
own multicast past its deadline (for its client) and ``DroppedRemote`` a refused
datagram (counted by reason).
"""

from __future__ import annotations

from dataclasses import dataclass

FedId = tuple[str, str, int]
"""A global message's id: ``(origin cluster, origin node, origin's sequence number)``."""


@dataclass(frozen=True, slots=True)
class SendRemote:
    cluster: str
    node: str
    datagram: bytes


@dataclass(frozen=True, slots=True)
class OrderLocally:
    record: bytes


@dataclass(frozen=True, slots=True)
class Deliver:
    msg_id: FedId
    group: str
    payload: bytes
    clusters: tuple[str, ...]
    """Dst(m), sorted."""
    gts: int
    """The global timestamp: every cluster delivers in increasing ``(gts, msg_id)``."""


@dataclass(frozen=True, slots=True)
class Stalled:
    msg_id: FedId
    clusters_waited_for: tuple[str, ...]
    age_s: float


UNDELIVERED_REASONS = ("deadline",)
"""Why a member reports an own multicast ``Undelivered``: ``deadline`` (not every
destination cluster acknowledged holding its Submit within ``deadline_s``)."""


@dataclass(frozen=True, slots=True)
class Undelivered:
    """An own multicast whose outcome this member cannot vouch for, reported once.

    Not every destination cluster acknowledged holding m's Submit within
    ``FederationConfig.deadline_s``. The outcome is *unknown*, never "not delivered": a
    destination that holds the Submit has given m its timestamp, which nothing takes
    back, so m is delivered by every destination once they can reach each other, or
    by none while one of them never gets the Submit. The member goes on sending it (it
    is never delivered by some destinations and not by others); a destination cluster
    is in ``waiting_for`` while it has not acknowledged."""

    msg_id: FedId
    reason: str
    """One of ``UNDELIVERED_REASONS``."""
    waiting_for: tuple[str, ...]
    """The destination clusters that had not acknowledged holding the Submit, or whose
    order had not delivered it (the own cluster), sorted."""
    age_s: float
    outcome: str = "unknown"


@dataclass(frozen=True, slots=True)
class DroppedRemote:
    reason: str
    """A metric label: the decoder's (``malformed``, ``version``, ``bad_field``), or
    ``unknown_sender`` (not a member of another configured cluster), ``not_addressed``
    (this cluster is not in Dst(m), or a relay from outside Dst(m)), ``bad_origin``
    (an unknown cluster or origin, or a timestamp of another cluster than its
    sender's), ``full`` (too many records injected and not yet ordered)."""


@dataclass(frozen=True, slots=True)
class InFlight:
    """One message this member knows and has not finished with (``amcast status``)."""

    msg_id: FedId
    clusters: tuple[str, ...]
    age_s: float
    waiting_for: tuple[str, ...]
    """Clusters whose timestamp the own order lacks, or that have not acknowledged what
    this member sent them."""


Output = SendRemote | OrderLocally | Deliver | Stalled | Undelivered | DroppedRemote
