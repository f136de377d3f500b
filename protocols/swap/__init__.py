"""Ordering by distributed swap (Herlihy, Tirthapura & Wattenhofer, *Ordered Multicast
and Distributed Swap*): arrow multicast, combining multicast, their hybrid, and the
"deliver m after pred" receiver with total order with gaps. Sans-IO: callers pass
``now`` and route the events each layer returns; see docs/swap.md."""
