"""Option values the benchmarks share: comma-separated group sizes, checked once.

A bad value is a one-line ``ConfigurationError`` (exit status 2, as for any usage
error), never a traceback from ``int()``.
"""

from __future__ import annotations

from amcast.protocols.errors import ConfigurationError


def group_sizes(text: str, option: str, *, minimum: int = 1, why: str = "") -> list[int]:
    """The comma-separated whole numbers of ``option`` (``"4,8"``), in the order given,
    each at least ``minimum`` (``why``: the reason, for the message)."""
    try:
        sizes = [int(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        raise ConfigurationError(f"{option} {text!r}: want comma-separated whole numbers, "
                                 "e.g. 4,8") from None
    if not sizes:
        raise ConfigurationError(f"{option}: no size given")
    if min(sizes) < minimum:
        raise ConfigurationError(f"{option} {text!r}: every size must be at least {minimum}"
                                 + (f" ({why})" if why else ""))
    return sizes
