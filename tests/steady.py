"""Protocol settings for real-process tests that are not about membership.

These tests run several daemons and clients on a small, often overloaded CI machine; a
daemon starved of CPU for longer than the default ``suspect_timeout`` (0.8 s) would be
(correctly) excluded from the view, and its clients would then miss messages, which is
not what such a test checks. Membership tests (tests/membership, tests/e2e failover)
use the defaults.
"""

STEADY = {"suspect_timeout": 5.0}
