"""Reliable causal multicast (Trans / Transis, section 1 of the ToTo paper).

Small state machines, one job each, composed by ``amcast.protocols.node.Node``:
``causal`` (release in causal order, duplicates, bounded hold buffer), ``stability``
(full ack vectors rebuilt from delta acks, stable prefixes), ``repair`` (nack and
retransmission timers with randomized suppression), ``flow`` (send window and
backpressure) and ``batching`` (batching, fragmentation, reassembly).
"""
