"""A randomized nemesis against real ``amcastd`` daemons (Jepsen-style).

Kept beside the ``amcast`` package, not in it, like ``fuzz/``: it is a tool for testing
amcast, not part of what a host installs. ``python -m nemesis.run --help`` runs it;
docs/nemesis.md says what it does and what it checks. One module per job:

- ``schedule``: the seeded schedule of faults (pure: the same seed, the same schedule);
- ``faults``: carries the schedule's steps out on a local cluster (signals, restarts,
  relay cuts, clock steps, impostor daemons) and records when each node was down;
- ``load``: recording clients (``amcast.faultload``) and the health sampler;
- ``logs``: reads the daemons' delivery logs (docs/log-schema.md) into lives and views;
- ``checks``: the properties, over the logs, the clients' records and health samples;
- ``run``: the command line, which ties them together.
"""
