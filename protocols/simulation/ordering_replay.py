"""Replay one causal-broadcast trace through a delivery rule at every processor.

Each processor's engine is fed its own causal release order; a delivery happens at the
virtual time of the release that triggered it. The result holds the section 7 figures
of the ToTo paper: the average Ntail(G) at delivery (how many processors one waited to
hear from), the share of deliveries made by each rule, delivery latency, and the safety
checks of ``amcast.protocols.simulation.safety`` over all processors' sequences.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..ordering import OrderingConfig, OrderingRule, TotalOrderEngine
from ..ordering.messages import DeliveryRule, MessageId
from . import safety
from .causal_broadcast import Trace


@dataclass
class ReplayResult:
    rule: OrderingRule
    phi: float
    deliveries: int = 0
    ntail_sum: int = 0
    by_rule: dict[DeliveryRule, int] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)  # seconds, sorted
    undelivered: int = 0  # (processor, data message) pairs never delivered
    violations: list[str] = field(default_factory=list)
    early: list[set[MessageId]] = field(default_factory=list)  # per processor

    @property
    def avg_ntail(self) -> float:
        return self.ntail_sum / self.deliveries if self.deliveries else 0.0

    def share(self, rule: DeliveryRule) -> float:
        return self.by_rule.get(rule, 0) / self.deliveries if self.deliveries else 0.0

    def latency_quantile(self, q: float) -> float:
        if not self.latencies:
            return 0.0
        k = min(len(self.latencies) - 1, int(q * len(self.latencies)))
        return self.latencies[k]


def replay(trace: Trace, rule: OrderingRule, phi: float | None = None) -> ReplayResult:
    config = OrderingConfig(rule=rule, phi=phi, allow_unsafe=True)
    result = ReplayResult(rule=config.rule, phi=config.resolve_phi(trace.n))
    sequences: dict[int, list[MessageId]] = {}
    by_rule: dict[DeliveryRule, int] = {}
    sent_at = trace.sent_at
    latencies = result.latencies
    for p, releases in enumerate(trace.releases):
        engine = TotalOrderEngine(range(trace.n), config)
        sequence: list[MessageId] = []
        early: set[MessageId] = set()
        for now, message in releases:
            for d in engine.insert(message):
                mid = (d.sender, d.seq)
                sequence.append(mid)
                result.ntail_sum += d.ntail
                by_rule[d.rule] = by_rule.get(d.rule, 0) + 1
                latencies.append(now - sent_at[mid])
                if d.rule is not DeliveryRule.DEFAULT:
                    early.add(mid)
        sequences[p] = sequence
        result.early.append(early)
        result.undelivered += trace.data_messages - len(sequence)
    result.deliveries = len(latencies)
    result.by_rule = by_rule
    latencies.sort()
    payload_seqs: dict[int, list[int]] = {}
    for sender, seq in sorted(trace.data_ids):
        payload_seqs.setdefault(sender, []).append(seq)
    result.violations = (
        safety.duplicates(sequences)
        + safety.prefix_violations(sequences)
        + safety.causal_violations(sequences, trace.clocks.__getitem__, payload_seqs)
    )
    return result


def early_gain(better: ReplayResult, baseline: ReplayResult) -> float:
    """Share of ``better``'s early deliveries that ``baseline`` did not make early
    (section 7, item 1: S-ToTo versus ToTo), over all processors."""
    gained = total = 0
    for mine, theirs in zip(better.early, baseline.early, strict=True):
        total += len(mine)
        gained += len(mine - theirs)
    return gained / total if total else 0.0
