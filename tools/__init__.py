"""Fault injection and attack tools, kept beside the ``amcast`` package, not in it.

Like ``bench/``, ``fuzz/`` and ``nemesis/``, these are for testing amcast from a source
checkout; an installed amcast has none of them. They import ``amcast`` as any program
does (absolutely), and run from the checkout's root:

- ``faultrelay``: a userspace UDP relay that puts lossy, delayed, reordering or cut links
  between real daemons on the unicast transport (the end-to-end tests, the nemesis);
- ``floodattack``: ``python -m tools.floodattack`` sends a flood of attack datagrams
  (garbage, forged, replayed, or sealed with the group key) to a group on loopback
  (``amcast bench flood``, the flood tests).

docs/development.md says how to run them.
"""
