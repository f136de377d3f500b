"""Sans-IO protocol engines of amcast.

Everything below this package is pure: no asyncio, sockets, time, logging or global
random. Time comes in as ``now`` arguments, randomness as a seeded ``random.Random``.
``tests/test_sans_io.py`` enforces the rule.
"""
