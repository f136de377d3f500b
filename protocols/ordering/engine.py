"""Total order on the causality DAG: the ToTo family, sans-IO (ToTo paper, sections 2-5).

Theory of operation. The causal layer releases messages in causal order; each one is
inserted into G, the undelivered part of the causality DAG, as a vertex whose edges
point to the messages it acknowledges (and its sender's previous message). The roots of
G are the candidates M_G, at most one per processor: its first undelivered message.

Votes. Processor i votes with its first message in G (section 3): for every candidate
in that message's causal past (itself, if it is a candidate). The set of candidates in
a vertex's causal past is a bit mask computed lazily and memoised per activation, so
an insertion costs O(its acks), and only a processor's first message in an activation
walks the DAG, down to the candidates. Messages after a processor's first one change
nothing but ToTo's tail(m), which is read only when the original ToTo rule asks.

Activations. After every insertion the configured rule (``amcast.protocols.ordering.rules``)
is evaluated; when it fires, the chosen candidates are delivered in processor-id order,
leave G, their children whose predecessors are now all delivered become candidates, and
a new activation starts with every processor's vote recomputed from its (possibly new)
first message. The new activation is evaluated at once, since G may already hold what
it needs. When no rule closes the activation, GL-ToTo may deliver a stable prefix of its
sources (section 5); those stay in G, voting as candidates, until the activation closes.
For GL-ToTo the early rule, the default rule and the stable prefix are answered in one
pass (``rules.gltoto``); an insertion that casts no vote (a processor's later message)
changes no rule's answer and is not evaluated, except under ToTo.

Ack-only messages (payload None) are vertices like any other: they vote, can be
candidates and leave G exactly when the rules deliver them, so every processor removes
them at the same point of the same activation and computes the same order. They take
no position in the total order and produce no delivery event.

Ack-only roots leave at once (``OrderingConfig.ack_roots_leave``, what the Node uses).
An ack-only vertex whose predecessors have all left G is removed instead of becoming a
candidate: on insertion, or when the activation that delivered its last predecessor
closes (cascading down its sender's chain). It has voted while it followed undelivered
messages, which is what acks are for, and has nothing to deliver. Whether a vertex is
such a root depends only on the delivered prefix and the vertex's own edges, so every
processor removes the same vertices at the same activation boundary; one that arrives
later is removed on arrival, exactly as if it had been there. Its sender counts as
unseen until a message of it that stays in G arrives, which the rules already allow for
(an unseen processor may yet vote any way). Without it, the acks of each message are
the candidates of a second activation, which closes only once every member has been
heard from again: one member slow to ack, or one member acking lazily, delays the next
message.

End of a view (section 2: "because of virtual synchrony, we only need to order the
messages that are delivered between configuration changes"). The membership layer
hands every survivor the same final DAG of the view (the flush), so once it is inserted
every survivor's engine is in the same state: the rules only ever decide on what the DAG
holds, so each survivor has delivered a prefix of what they decide on the final DAG.
``close`` then delivers what is left deterministically: the candidates of each
activation in processor-id order (the lexicographic rule without waiting for the votes
of members that are gone), until G is empty. That respects causal order (candidates
are roots) and is identical at every survivor.

Input is trusted to be causal (the causal layer checks peers); a message out of order,
duplicated, or acknowledging an unknown message raises ``ProtocolViolation``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from ..errors import ConfigurationError, ProtocolViolation
from . import rules
from .config import OrderingConfig, OrderingRule
from .messages import CausalMessage, DeliveryRule, MessageDelivered
from .votes import ActivationVotes


class _Vertex:
    """A message in G. ``pending`` counts its predecessors still in G."""

    __slots__ = ("children", "delivered", "index", "mask", "message", "pending", "preds", "stamp")

    def __init__(self, message: CausalMessage, index: int, preds: list[_Vertex]) -> None:
        self.message = message
        self.index = index
        self.preds = preds
        self.pending = len(preds)
        self.children: list[_Vertex] = []
        self.delivered = False
        self.mask = 0
        self.stamp = -1


class TotalOrderEngine:
    """Orders causally released messages with one rule of the ToTo family."""

    def __init__(self, members: Sequence[int], config: OrderingConfig | None = None) -> None:
        self.members = tuple(members)
        if len(set(self.members)) != len(self.members):
            raise ConfigurationError("member ids must be distinct")
        self.config = config or OrderingConfig()
        self.n = len(self.members)
        self.phi = self.config.resolve_phi(self.n)
        self.rule = self.config.rule
        self._index = {node: i for i, node in enumerate(self.members)}
        self._chains: list[deque[_Vertex]] = [deque() for _ in self.members]
        self._size = 0  # vertices in G (chain k holds sender k's seqs delivered+1..inserted)
        self._inserted = [0] * self.n
        self._delivered_seq = [0] * self.n
        self._votes = ActivationVotes(self.n)
        self._gl_delivered = 0
        self._ack_roots_leave = self.config.ack_roots_leave
        self.activation = 0
        self.position = 0
        self.delivered_vertices = 0
        self.delivered_ack_only = 0

    # -- public API -------------------------------------------------------------------

    @property
    def pending(self) -> int:
        """Vertices in G (inserted, not yet delivered)."""
        return self._size

    @property
    def pending_payloads(self) -> int:
        """Vertices in G that carry a payload (ack-only ones excluded)."""
        return sum(1 for chain in self._chains for v in chain if v.message.payload is not None)

    @property
    def ntail(self) -> int:
        return self._votes.ntail

    def insert(self, message: CausalMessage) -> list[MessageDelivered]:
        """Add one causally released message to G; return what is delivered as a result."""
        vertex = self._add_vertex(message)
        index = vertex.index
        if self._ack_roots_leave and vertex.pending == 0 and message.payload is None:
            self._drop_ack(index)  # an ack of delivered messages only: never a candidate
            return []  # it cast no vote: nothing changed
        if len(self._chains[index]) == 1:  # the sender's first message in G casts its vote
            self._cast_vote(vertex)
        elif self.rule is not OrderingRule.TOTO:
            return []  # votes unchanged: only ToTo's tail(m) depends on later messages
        if self.rule is OrderingRule.GLTOTO:
            return self._evaluate_gltoto()
        return self._evaluate()

    def close(self) -> list[MessageDelivered]:
        """Deliver everything left in G, deterministically (end of a view, see above)."""
        out: list[MessageDelivered] = []
        chains = self._chains
        while self._size:
            roots = 0
            for i, chain in enumerate(chains):
                if chain and chain[0].pending == 0:
                    roots |= 1 << i
            self._emit(roots & ~self._gl_delivered, DeliveryRule.FLUSH, out)
            self._close_activation(roots | self._gl_delivered)
        return out

    # -- the DAG ----------------------------------------------------------------------

    def _add_vertex(self, message: CausalMessage) -> _Vertex:
        index_of = self._index
        index = index_of.get(message.sender)
        if index is None:
            raise ProtocolViolation("unknown_sender", f"{message.sender} is not a member")
        inserted = self._inserted
        seq = message.seq
        expected = inserted[index] + 1
        if seq != expected:
            reason = "duplicate" if seq < expected else "sequence_gap"
            raise ProtocolViolation(reason, f"{message.id} inserted, expected seq {expected}")
        delivered_seq = self._delivered_seq
        latest: dict[int, int] | None = None  # other sender index -> latest seq acked in G
        for node, acked in message.acks:
            j = index_of.get(node)
            if j is None:
                raise ProtocolViolation("unknown_sender", f"ack of non-member {node}")
            # (an ack of the sender's own seq or later is past inserted[index] = seq - 1)
            if acked > inserted[j] or acked < 1:
                raise ProtocolViolation(
                    "ack_unknown", f"{message.id} acks unseen ({node}, {acked})"
                )
            # an ack of a delivered message, or of the sender's own chain (implied by the
            # edge to its previous message), adds no edge
            if j != index and acked > delivered_seq[j]:
                if latest is None:
                    latest = {j: acked}
                elif acked > latest.get(j, 0):
                    latest[j] = acked
        chains = self._chains
        chain = chains[index]
        # the sender's previous message, seq - 1, is in G iff its chain is not empty
        preds: list[_Vertex] = [chain[-1]] if chain else []
        if latest is not None:
            for j, acked in latest.items():  # chain j holds seqs delivered_seq[j] + 1, ...
                preds.append(chains[j][acked - delivered_seq[j] - 1])
        vertex = _Vertex(message, index, preds)
        for pred in preds:
            pred.children.append(vertex)
        chain.append(vertex)
        self._size += 1
        inserted[index] = seq
        return vertex

    def _candidates_below(self, vertex: _Vertex) -> int:
        """Bit mask of the candidates in ``vertex``'s causal past (memoised per activation)."""
        stamp = self.activation
        if vertex.stamp == stamp:
            return vertex.mask
        if vertex.pending == 0:  # a candidate
            vertex.mask = 1 << vertex.index
            vertex.stamp = stamp
            return vertex.mask
        # fast path: every predecessor in G is a candidate or already known (an ack of
        # the candidates, the common case); the walk below would find the same mask
        mask = 0
        for pred in vertex.preds:
            if pred.delivered:
                continue
            if pred.pending == 0:
                mask |= 1 << pred.index
            elif pred.stamp == stamp:
                mask |= pred.mask
            else:
                break
        else:
            vertex.mask = mask
            vertex.stamp = stamp
            return mask
        stack = [vertex]
        push, pop = stack.append, stack.pop
        while stack:
            top = stack[-1]
            if top.stamp == stamp:
                pop()
                continue
            if top.pending == 0:
                top.mask = 1 << top.index
                top.stamp = stamp
                pop()
                continue
            mask = 0
            ready = True
            for pred in top.preds:
                if pred.delivered:
                    continue
                if pred.stamp != stamp:
                    push(pred)
                    ready = False
                else:
                    mask |= pred.mask
            if ready:
                top.mask = mask
                top.stamp = stamp
                pop()
        return vertex.mask

    def _cast_vote(self, first: _Vertex) -> None:
        is_candidate = first.pending == 0
        followed = 0 if is_candidate else self._candidates_below(first)
        self._votes.cast(first.index, followed, is_candidate=is_candidate)

    def _tail_count(self, candidate: int) -> int:
        """Ntail(m) for candidate sender index ``candidate``: processors whose latest
        message in G causally follows it (its own sender included)."""
        bit = 1 << candidate
        count = 0
        for chain in self._chains:
            if chain and self._candidates_below(chain[-1]) & bit:
                count += 1
        return count

    # -- rules and activations --------------------------------------------------------

    def _evaluate(self) -> list[MessageDelivered]:
        out: list[MessageDelivered] = []
        votes = self._votes
        phi = self.phi
        rule = self.rule
        while True:
            chosen = self._early(rule, votes, phi)
            fired = DeliveryRule.EARLY
            if chosen is None:
                chosen = rules.default_rule(votes)
                fired = DeliveryRule.DEFAULT
            if chosen is not None:
                self._emit(chosen & ~self._gl_delivered, fired, out)
                self._close_activation(chosen | self._gl_delivered)
                continue
            if rule is OrderingRule.GLTOTO:
                newly = rules.gl_prefix(votes, phi, self._gl_delivered)
                if newly:
                    self._gl_delivered |= newly
                    self._emit(newly, DeliveryRule.GL_PREFIX, out)
            return out

    def _evaluate_gltoto(self) -> list[MessageDelivered]:
        """``_evaluate`` for GL-ToTo, with the rules fused into one pass (``rules.gltoto``)."""
        out: list[MessageDelivered] = []
        votes = self._votes
        phi = self.phi
        while True:
            fired, chosen = rules.gltoto(votes, phi, self._gl_delivered)
            if fired is DeliveryRule.GL_PREFIX:
                if chosen:
                    self._gl_delivered |= chosen
                    self._emit(chosen, fired, out)
                return out
            self._emit(chosen & ~self._gl_delivered, fired, out)
            self._close_activation(chosen | self._gl_delivered)
            if not self._size:
                return out  # G is empty: no candidate, no vote, nothing can fire

    def _early(self, rule: OrderingRule, votes: ActivationVotes, phi: float) -> int | None:
        if rule is OrderingRule.STOTO:
            return rules.stoto_early(votes, phi)
        if rule is OrderingRule.GTOTO or rule is OrderingRule.GLTOTO:
            return rules.gtoto_early(votes, phi)
        if rule is OrderingRule.TOTO:
            return rules.toto_early(votes, phi, self._tail_count)
        return None  # lex: the default rule alone

    def _emit(self, chosen: int, fired: DeliveryRule, out: list[MessageDelivered]) -> None:
        votes = self._votes
        ntail = votes.ntail
        unseen = self.n - ntail
        chains = self._chains
        while chosen:  # bits(chosen), inlined
            low = chosen & -chosen
            chosen ^= low
            c = low.bit_length() - 1
            message = chains[c][0].message
            self.delivered_vertices += 1
            if message.payload is None:
                self.delivered_ack_only += 1
                continue
            out.append(
                MessageDelivered(
                    sender=message.sender,
                    seq=message.seq,
                    payload=message.payload,
                    position=self.position,
                    activation=self.activation,
                    rule=fired,
                    ntail=ntail,
                    unseen=unseen,
                    nvt=votes.nvt(c),
                )
            )
            self.position += 1

    def _leave(self, c: int) -> list[_Vertex]:
        """The head of sender index ``c``'s chain leaves G; return its children."""
        vertex = self._chains[c].popleft()
        vertex.delivered = True
        self._delivered_seq[c] = vertex.message.seq
        self._size -= 1
        children = vertex.children
        for child in children:
            child.pending -= 1
        vertex.children = []
        vertex.preds = []
        return children

    def _drop_ack(self, c: int) -> list[_Vertex]:
        """The ack-only root at the head of chain ``c`` leaves G undelivered."""
        self.delivered_vertices += 1
        self.delivered_ack_only += 1
        return self._leave(c)

    def _close_activation(self, delivered: int) -> None:
        """Remove the delivered candidates from G and open the next activation.

        With ``ack_roots_leave``, every ack-only vertex whose predecessors have all left
        then leaves too, until none is left (removing one can make the next of its chain,
        or an ack of it, a root). Only a vertex that has just lost its last predecessor
        can be one: no vertex in G is an ack-only root between two calls (one is removed
        on insertion, and ``pending`` falls only here). Such a vertex is the head of its
        chain, since a vertex's previous message is one of its predecessors. The set
        removed is the same in any order: removing a vertex only lowers others' pending.
        """
        leave = self._leave
        roots: list[_Vertex] = []  # children of the vertices that left
        while delivered:  # bits(delivered), inlined
            low = delivered & -delivered
            delivered ^= low
            roots += leave(low.bit_length() - 1)
        if self._ack_roots_leave:
            while roots:
                root = roots.pop()  # a child of a vertex that left (maybe of several)
                if root.pending == 0 and not root.delivered and root.message.payload is None:
                    roots += self._drop_ack(root.index)
        self.activation += 1
        self._gl_delivered = 0
        self._votes.reset()
        if self._size:  # else every chain is empty
            for chain in self._chains:
                if chain:
                    self._cast_vote(chain[0])
