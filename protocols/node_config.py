"""Configuration of a ``amcast.protocols.Node``: one frozen dataclass, every knob with a unit.

The daemon's pydantic model maps onto this dataclass field by field. Times are seconds of
the caller's clock (the ``now`` passed to the Node), sizes are bytes, windows count DAG
vertices (one vertex = one data datagram, section 1 of the ToTo paper).
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import ConfigurationError
from .ordering import DEFAULT_RULE, OrderingConfig
from .reliable.ratelimit import RepairLimits
from .swap.engine import ORDERINGS
from .wire.keys import Keyring

MIN_KEY_BYTES = 16
MIN_DATAGRAM_BUDGET = 512
MAX_DATAGRAM_BUDGET = 65_507  # largest UDP payload over IPv4


@dataclass(frozen=True, slots=True)
class NodeConfig:
    # --- total order (sections 3-5 of the seed paper) ---
    rule: str = DEFAULT_RULE.value
    """Delivery rule of the engine: lex, stoto, gtoto or gltoto (toto is unsafe, refused)."""
    phi: float | None = None
    """Threshold Φ of the rule; ``None`` = n/2 (checked against n when the Node starts)."""
    ordering: str = "toto"
    """Who decides the total order: ``toto`` (the ToTo engine, ``rule`` and ``phi``) or a
    swap ordering of *Ordered Multicast and Distributed Swap* (``arrow``, ``combining``,
    ``hybrid``; ``protocols/swap/engine.py``; ``rule`` and ``phi`` then do not apply)."""
    swap_tree: str = "balanced"
    """The spanning tree a swap ordering builds over the first view's sorted member list:
    ``balanced`` (fan-out ``swap_fanout``), ``star`` or ``path``; the lowest id is the
    arrow's first sink, the combining root, the hybrid's first virtual-root member. Later
    views carry the tree: joiners attach as leaves where the shape says, leavers are
    contracted into a neighbour (``swap/carry.py``)."""
    swap_fanout: int = 2
    swap_root_group: int = 3
    """The hybrid's virtual root R: the first this many members of the tree (kept at this
    size across views by the nodes next to it)."""
    swap_window: float = 0.0
    """How long a combining node holds requests to combine them, seconds."""

    # --- datagram sealing (``amcast.protocols.wire.auth``) ---
    group_key: bytes | None = None
    """One group secret (>= 16 bytes; key id 1) keying the AES-256-GCM sealing of every
    datagram: the simulator and tests. The daemon reads a key ring from its key file."""
    keyring: Keyring | None = None
    """The group keys by id (a rollover holds two); exclusive with ``group_key``."""
    insecure: bool = False
    """Run without encryption or authentication; must be chosen explicitly when no key is
    given."""
    replay_window: float = 30.0
    """Seconds: a datagram sent longer ago than this by the sender's wall clock (or this
    far in the future) is dropped as stale, whatever the receiver remembers; also the
    largest clock difference between members that still works."""

    # --- sizes ---
    datagram_budget: int = 1472
    """Bytes per datagram, tag included (1500-byte MTU - 20 IPv4 - 8 UDP); ~65000 on loopback."""
    max_message_size: int = 16 * 1024 * 1024
    """Largest application message in bytes (bigger ones are fragmented up to this)."""
    max_pending_bytes: int = 32 * 1024 * 1024
    """Bytes submitted but not yet sent (queued behind a full window); >= max_message_size."""

    # --- flow control (the send window counts vertices and bytes) ---
    window_size: int = 256
    """Own unstable vertices (sent, not yet acknowledged by every member) before backpressure."""
    window_bytes: int = 0
    """Bytes of own unstable data vertices before backpressure (it halves on loss and grows
    back); 0 = the receive buffer shared among the other listed members,
    ``receive_buffer_bytes // (members - 1)``, at least two datagram budgets."""
    receive_buffer_bytes: int = 4 * 1024 * 1024
    """What each member's socket buffers (the daemon's ``network.recv_buffer_bytes``):
    sizes the default byte window so that no sender can overrun a receiver."""
    receive_window: int = 1024
    """Vertices per sender held beyond the last released one; further ones are dropped."""
    max_held_vertices: int = 16_384
    """Vertices held (received, not yet causally released) across all senders."""

    # --- timers (seconds) ---
    ack_delay: float = 0.0002
    """Wait before an ack-only vertex acknowledges data when nothing else goes out, at a
    member that sends data of its own (one that only receives waits
    ``quiet_ack_delay``)."""
    lazy_ack_delay: float = 0.01
    """The same wait for data of a sender whose lone message this member's ack is not
    needed to order: ToTo needs the votes of more than phi members, so only the
    ``prompt_ackers`` members after the sender (half the group) ack at once; the others
    ack this much later, or sooner with their own data. At most ``ack_delay``: every
    member acks every sender at once (twice the ack-only datagrams at light load)."""
    quiet_ack_delay: float = 0.0
    """``ack_delay`` of a member that has sent no data of its own for a
    ``heartbeat_interval`` (it only receives): it has nothing for the ack to ride on, so
    0 acks in the same step as the receipt, without another turn of the event loop (at
    light load, N = 4, about 6% less daemon CPU per message; a sending member keeps
    ``ack_delay``, so saturation is unchanged). Set it to ``ack_delay`` for the same
    wait everywhere."""
    heartbeat_interval: float = 0.1
    """A silent node sends a heartbeat (its latest sequence number) once an interval, on
    multiples of it of its clock (``reliable.layer.heartbeat_due``: nodes sharing a clock
    beat together, no node is silent for 1.5 intervals, and one that sends every half
    interval sends none); a node outside a primary view announces itself (JOIN) this
    often."""
    nack_delay: float = 0.004
    """Upper bound of the random wait before a gap is nacked (nack suppression)."""
    nack_reorder_max: float = 0.02
    """Most extra wait before nacking a gap known only from other members' acks: the
    measured lateness of copies that came late (``reliable.repair``); 0 turns it off."""
    nack_retry: float = 0.05
    """Wait before nacking an unrepaired gap again (also after hearing another's nack)."""
    repair_delay: float = 0.004
    """Upper bound of the random wait before a non-origin retransmits (repair suppression)."""
    repair_holdoff: float = 0.02
    """After a vertex was retransmitted, nacks for it are ignored this long."""

    # --- membership (section 2: views, failure detection, flush) ---
    suspect_timeout: float = 0.8
    """A member not heard from this long is suspected and excluded by a new view. Lower:
    faster failover, and more false exclusions of members that are only slow (GC
    pauses, an overloaded host). Must exceed a few heartbeat intervals."""
    flush_timeout: float = 0.25
    """Deadline of each phase of a view change (promises, acceptances): members that have
    not answered by then are left out of the new view."""
    membership_retry: float = 0.02
    """Membership messages not yet answered are sent again this often."""
    join_settle: float = 0.3
    """At start-up, once a majority is reachable, wait this long for the other listed
    members before forming the first view (no wait once every listed member is heard)."""
    expected_votes: int | None = None
    """Votes a primary component needs a strict majority of (votequorum style): at least
    the number of listed members (more raises the bar); ``None`` = that number."""
    max_held_report: int = 256
    """Held (not yet released) vertices a member describes when a view closes."""

    # --- per-datagram caps ---
    max_nack_ranges: int = 64
    """Nack ranges carried by one datagram."""
    max_repair_per_nack: int = 256
    """Vertices retransmitted in answer to one nack range (a longer range is truncated)."""

    # --- repair rate limits, per requesting peer (``reliable.ratelimit``) ---
    nack_rate: float = 0.0
    """Nack ranges per second one peer may make this node handle; beyond, ranges are
    ignored. 0 = ``nack_burst / nack_retry`` (an honest member nacks a gap again only
    every ``nack_retry``)."""
    nack_burst: int = 0
    """Nack ranges one peer may send at once; 0 = four full nack datagrams,
    ``4 * max_nack_ranges``."""
    repair_rate_bytes: int = 0
    """Bytes per second one peer's nacks may make this node retransmit; beyond, repairs are
    not scheduled (the peer nacks again after ``nack_retry``). 0 = ``repair_burst_bytes``
    per second."""
    repair_burst_bytes: int = 0
    """Bytes one peer's nacks may make this node retransmit at once (so also the most one
    nack datagram can cause); 0 = the send windows of every other member,
    ``(members - 1) * effective_window_bytes`` (about ``receive_buffer_bytes``): a member
    that lost every sender's whole window is repaired at once. At least one datagram
    budget."""

    def keys(self) -> Keyring | None:
        """The key ring to seal with (``None``: insecure)."""
        if self.keyring is not None:
            return self.keyring
        return Keyring.single(self.group_key) if self.group_key is not None else None

    def __post_init__(self) -> None:
        if self.group_key is not None and self.keyring is not None:
            raise ConfigurationError("group_key and keyring are exclusive: give one")
        keyed = self.group_key is not None or self.keyring is not None
        if not keyed and not self.insecure:
            raise ConfigurationError("no group key: give one, or choose insecure=True explicitly")
        if keyed and self.insecure:
            raise ConfigurationError("a group key and insecure=True are contradictory")
        if self.group_key is not None and len(self.group_key) < MIN_KEY_BYTES:
            raise ConfigurationError(f"group_key must have >= {MIN_KEY_BYTES} bytes")
        if not 1.0 <= self.replay_window <= 86_400.0:
            raise ConfigurationError("replay_window must be in [1, 86400] seconds")
        # a str on purpose: OrderingConfig raises ConfigurationError for an unknown name
        OrderingConfig(rule=self.rule, phi=self.phi)  # type: ignore[arg-type]
        if not MIN_DATAGRAM_BUDGET <= self.datagram_budget <= MAX_DATAGRAM_BUDGET:
            raise ConfigurationError(
                f"datagram_budget must be in [{MIN_DATAGRAM_BUDGET}, {MAX_DATAGRAM_BUDGET}]"
            )
        if self.max_message_size < 1:
            raise ConfigurationError("max_message_size must be positive")
        if self.max_pending_bytes < self.max_message_size:
            raise ConfigurationError("max_pending_bytes must be >= max_message_size")
        if self.window_bytes < 0:
            raise ConfigurationError("window_bytes must be >= 0 (0 = from receive_buffer_bytes)")
        if self.receive_buffer_bytes < self.datagram_budget:
            raise ConfigurationError("receive_buffer_bytes must hold at least one datagram")
        for name in ("window_size", "receive_window", "max_held_vertices", "max_nack_ranges",
                     "max_repair_per_nack"):
            if getattr(self, name) < 1:
                raise ConfigurationError(f"{name} must be >= 1")
        for name in ("ack_delay", "lazy_ack_delay", "quiet_ack_delay", "nack_delay",
                     "nack_reorder_max",
                     "repair_delay", "repair_holdoff", "nack_rate", "nack_burst",
                     "repair_rate_bytes"):
            if getattr(self, name) < 0:
                raise ConfigurationError(f"{name} must be >= 0")
        for name in ("heartbeat_interval", "nack_retry", "suspect_timeout", "flush_timeout",
                     "membership_retry"):
            if getattr(self, name) <= 0:
                raise ConfigurationError(f"{name} must be > 0")
        if 0 < self.repair_burst_bytes < self.datagram_budget:
            raise ConfigurationError(
                "repair_burst_bytes must be 0 (one send window) or >= datagram_budget"
            )
        if self.join_settle < 0:
            raise ConfigurationError("join_settle must be >= 0")
        if self.suspect_timeout < 2 * self.heartbeat_interval:
            raise ConfigurationError(
                f"suspect_timeout ({self.suspect_timeout} s) must be at least twice "
                f"heartbeat_interval ({self.heartbeat_interval} s)"
            )
        if self.expected_votes is not None and self.expected_votes < 1:
            raise ConfigurationError("expected_votes must be >= 1")
        if self.ordering not in ORDERINGS:
            raise ConfigurationError(
                f"ordering must be one of {', '.join(ORDERINGS)}, not {self.ordering!r}")
        if self.swap_tree not in ("balanced", "star", "path"):
            raise ConfigurationError("swap_tree must be balanced, star or path")
        if self.swap_fanout < 1 or self.swap_root_group < 1:
            raise ConfigurationError("swap_fanout and swap_root_group must be >= 1")
        if self.swap_window < 0:
            raise ConfigurationError("swap_window must be >= 0")

    def effective_window_bytes(self, members: int) -> int:
        """The byte window for a group of ``members`` listed members (``window_bytes``,
        or the receive buffer shared among the others)."""
        if self.window_bytes:
            return self.window_bytes
        share = self.receive_buffer_bytes // max(1, members - 1)
        return max(2 * self.datagram_budget, share)

    def repair_limits(self, members: int) -> RepairLimits:
        """The per-peer nack and retransmission rates for ``members`` listed members
        (the 0 defaults resolved)."""
        nack_burst = self.nack_burst or 4 * self.max_nack_ranges
        burst = self.repair_burst_bytes or max(1, members - 1) * self.effective_window_bytes(
            members)
        return RepairLimits(
            nack_rate=self.nack_rate or nack_burst / self.nack_retry,
            nack_burst=float(nack_burst),
            repair_rate_bytes=float(self.repair_rate_bytes or burst),
            repair_burst_bytes=float(burst),
        )
