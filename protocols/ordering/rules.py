"""The delivery rules of the ToTo family, as pure functions of one activation's votes.

Definitions (sections 3 and 4 of the ToTo paper; ``v`` is an ``ActivationVotes``):

- ``1 in Future(j, i)`` iff ``votes(j, i) + u > phi``; ``Future(j, i) = {1}`` iff
  ``votes(j, i) > phi`` (j has already won).
- ToTo source: ``i in M_G`` and ``1 not in Future(j, i)`` for every ``j in M_G``. Read
  literally, ``j`` includes ``i`` itself, so there are no sources while ``u > phi``; this
  is what keeps the source set monotone when an unseen processor brings a new candidate.
- G-ToTo source: ``nvt(i) > phi`` or a ToTo source.

Every rule answers with a bit mask of candidate senders to deliver, or ``None`` when it
does not fire. Only candidates ``j`` with ``nvt(j) + u > phi`` can threaten a source and
only ``j`` with ``nvt(j) > phi`` can have won, so the pairwise checks run over those few.

The rules (``n`` processors, ``Ntail(G) = n - u``):

- ToTo (3): S-ToTo, and ``Ntail(s) >= n - phi`` for every source s.
- S-ToTo (3): internal stability, every non-source has lost to a source; external
  stability, some source has ``nvt > phi``.
- G-ToTo (4): every non-source has ``nvt + u <= phi`` and has lost to a source;
  ``Ntail(G) >= n - phi``; some source has ``nvt > phi``.
- default (2, 3): ``Ntail(G) = n``: deliver all of M_G. ``lex`` is the default rule alone.
- GL-ToTo (5): the stable prefix of M_G in processor-id order, from the paper's
  pseudo-code; its sources may be delivered before the activation ends.

The functions above are the rules as the paper states them. ``gltoto`` is what the
engine runs for GL-ToTo (the Node's rule) after every vote: the same three questions
(``gtoto_early``, then ``default_rule``, then ``gl_prefix``) answered in one pass, which
computes each candidate's nvt, the strong candidates and the sources once instead of up
to twice each. ``tests/ordering/test_fused_rules.py`` checks it against the three.
"""

from __future__ import annotations

from collections.abc import Callable

from .messages import DeliveryRule
from .votes import ActivationVotes, bits

TailCount = Callable[[int], int]
"""Ntail(s) for a candidate sender index s (needed by ToTo only)."""


def _threats(v: ActivationVotes, phi: float, u: int) -> list[int]:
    voters = v.voters
    return [j for j in bits(v.candidates) if voters[j].bit_count() + u > phi]


def toto_sources(v: ActivationVotes, phi: float) -> int:
    """S_G of ToTo and S-ToTo: candidates that no candidate can beat in any extension."""
    u = v.unseen
    if u > phi:  # 1 in Future(i, i): an unseen processor may still beat anything
        return 0
    voters = v.voters
    threats = _threats(v, phi, u)
    sources = 0
    for i in bits(v.candidates):
        not_i = ~voters[i]
        for j in threats:
            if j != i and (voters[j] & not_i).bit_count() + u > phi:
                break
        else:
            sources |= 1 << i
    return sources


def gtoto_sources(v: ActivationVotes, phi: float) -> int:
    """S_G of G-ToTo: ToTo sources plus every candidate with more than phi votes."""
    sources = toto_sources(v, phi)
    voters = v.voters
    for i in bits(v.candidates & ~sources):
        if voters[i].bit_count() > phi:
            sources |= 1 << i
    return sources


def _strong(v: ActivationVotes, mask: int, phi: float) -> list[int]:
    voters = v.voters
    return [s for s in bits(mask) if voters[s].bit_count() > phi]


def _has_lost(v: ActivationVotes, i: int, winners: list[int], phi: float) -> bool:
    """Future(j, i) = {1} for some j in ``winners``."""
    voters = v.voters
    not_i = ~voters[i]
    return any((voters[j] & not_i).bit_count() > phi for j in winners)


def stoto_early(v: ActivationVotes, phi: float) -> int | None:
    """S-ToTo early delivery rule (section 3): the stable source set, or None."""
    if not _strong(v, v.candidates, phi):
        return None
    sources = toto_sources(v, phi)
    strong_sources = _strong(v, sources, phi)
    if not strong_sources:
        return None
    for m in bits(v.candidates & ~sources):
        if not _has_lost(v, m, strong_sources, phi):
            return None
    return sources


def toto_early(v: ActivationVotes, phi: float, ntail_of: TailCount) -> int | None:
    """Original ToTo early delivery rule (section 3): S-ToTo plus Ntail(s) >= n - phi."""
    sources = stoto_early(v, phi)
    if sources is None:
        return None
    floor = v.n - phi
    if all(ntail_of(s) >= floor for s in bits(sources)):
        return sources
    return None


def gtoto_early(v: ActivationVotes, phi: float) -> int | None:
    """G-ToTo early delivery rule (section 4): the stable source set, or None."""
    u = v.unseen
    if v.n - u < v.n - phi:  # external stability: Ntail(G) >= n - phi
        return None
    strong = _strong(v, v.candidates, phi)
    if not strong:
        return None
    sources = gtoto_sources(v, phi)
    voters = v.voters
    for i in bits(v.candidates & ~sources):
        if voters[i].bit_count() + u > phi or not _has_lost(v, i, strong, phi):
            return None
    return sources


def default_rule(v: ActivationVotes) -> int | None:
    """Default rule (sections 2 and 3): once every processor has voted, deliver M_G."""
    if v.voted == (1 << v.n) - 1:
        return v.candidates
    return None


def gl_prefix(v: ActivationVotes, phi: float, delivered: int) -> int:
    """GL-ToTo (section 5): sources of the stable prefix of M_G not yet ``delivered``.

    Walks processors in id order up to the first one that has not voted, as in the
    paper's pseudo-code; returns the newly deliverable sources (a mask), in a prefix of
    the activation's final source order.
    """
    u = v.unseen
    sources = gtoto_sources(v, phi)
    strong = _strong(v, v.candidates, phi)
    voters = v.voters
    stable_floor = v.n - u >= v.n - phi  # Ntail(G) >= n - phi: no unseen message can win
    newly = 0
    for i in range(v.first_unseen()):
        bit = 1 << i
        if delivered & bit or not v.candidates & bit:
            continue  # delivered earlier in this activation, or i has no candidate
        if sources & bit:
            if voters[i].bit_count() > phi or stable_floor:
                newly |= bit
                continue
            break
        if voters[i].bit_count() + u <= phi and _has_lost(v, i, strong, phi):
            continue  # m_i will never become a source in this activation
        break
    return newly


def _toto_sources_of(voters: list[int], candidates: int, u: int, phi: float) -> int:
    """``toto_sources`` on masks, without lists or generators (``gltoto``'s inner loop)."""
    if u > phi:
        return 0
    threats = 0
    rest = candidates
    while rest:
        low = rest & -rest
        if voters[low.bit_length() - 1].bit_count() + u > phi:
            threats |= low
        rest ^= low
    sources = 0
    rest = candidates
    while rest:
        low = rest & -rest
        rest ^= low
        not_i = ~voters[low.bit_length() - 1]
        others = threats & ~low
        while others:
            j = others & -others
            if (voters[j.bit_length() - 1] & not_i).bit_count() + u > phi:
                break
            others ^= j
        else:
            sources |= low
    return sources


def _lost_to(voters: list[int], i: int, strong: int, phi: float) -> bool:
    """``_has_lost`` with the winners as a mask: Future(j, i) = {1} for some j in it."""
    not_i = ~voters[i]
    while strong:
        low = strong & -strong
        if (voters[low.bit_length() - 1] & not_i).bit_count() > phi:
            return True
        strong ^= low
    return False


def gltoto(v: ActivationVotes, phi: float, delivered: int) -> tuple[DeliveryRule, int]:
    """One GL-ToTo evaluation: ``(EARLY, S_G)`` if ``gtoto_early`` fires, else
    ``(DEFAULT, M_G)`` if ``default_rule`` does, else ``(GL_PREFIX, newly)`` with
    ``newly = gl_prefix(v, phi, delivered)`` (possibly 0).

    Same answers as those three functions, in one pass: the strong candidates (nvt >
    phi) are computed once, as a mask, and the ToTo sources (the pairwise checks) only
    when a question needs them, at most once.
    """
    candidates = v.candidates
    voters = v.voters
    voted = v.voted
    n = v.n
    u = n - voted.bit_count()
    strong = 0  # _strong(v, v.candidates, phi), as a mask
    rest = candidates
    while rest:
        low = rest & -rest
        if voters[low.bit_length() - 1].bit_count() > phi:
            strong |= low
        rest ^= low
    stable_floor = n - u >= n - phi  # Ntail(G) >= n - phi, as gtoto_early and gl_prefix test it
    sources = -1  # gtoto_sources(v, phi), once needed
    if stable_floor and strong:  # gtoto_early
        sources = _toto_sources_of(voters, candidates, u, phi) | strong
        rest = candidates & ~sources
        while rest:
            low = rest & -rest
            i = low.bit_length() - 1
            if voters[i].bit_count() + u > phi or not _lost_to(voters, i, strong, phi):
                break
            rest ^= low
        else:
            return DeliveryRule.EARLY, sources
    full = (1 << n) - 1
    if voted == full:  # default_rule
        return DeliveryRule.DEFAULT, candidates
    # gl_prefix: candidates below first_unseen() not yet delivered, in id order (the
    # other processors below it are skipped by the paper's loop)
    missing = ~voted & full
    below = (missing & -missing) - 1 if missing else full
    rest = candidates & below & ~delivered
    newly = 0
    while rest:
        bit = rest & -rest
        rest ^= bit
        if sources < 0:
            sources = _toto_sources_of(voters, candidates, u, phi) | strong
        if sources & bit:
            if strong & bit or stable_floor:
                newly |= bit
                continue
            break
        i = bit.bit_length() - 1
        if voters[i].bit_count() + u <= phi and _lost_to(voters, i, strong, phi):
            continue  # m_i will never become a source in this activation
        break
    return DeliveryRule.GL_PREFIX, newly
