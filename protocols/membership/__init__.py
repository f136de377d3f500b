"""Membership and virtual synchrony (section 2 of the ToTo paper; Birman's virtual
synchrony; the primary-component model of Isis and Spread).

The ToTo paper assumes "a reliable group membership facility" that gives every process
"a consistent set of configuration changes" and virtual synchrony: "if one processor
delivers a message m before a configuration change, then all non-failed processors
deliver m before the configuration change". This package provides it, sans-IO:

- ``detector``: failure detection from silence (every datagram counts);
- ``quorum``: the primary component (a strict majority of the potential members, or of
  ``expected_votes``);
- ``durable``: the little state that must survive a restart (incarnation, ballots,
  the latest view known) so view ids never repeat and agreements stay safe;
- ``cut``: the flush's cut, from what the survivors hold;
- ``agreement``: the view agreement (a Paxos-style ballot: prepare/promise,
  accept/accepted, install), whose decided value is the next view *and* the cut that
  closes the previous one;
- ``phase``: the phases of a member (no view, steady, frozen, closing its view at a
  decided cut, abandoned, left) and the moves between them;
- ``handlers``: the agreement's messages as a member handles them (acceptor,
  coordinator, learner);
- ``layer``: the state machine that runs all of it over the per-view sessions.
"""
