"""The error hierarchy of amcast: one root, a few precise kinds.

- ``DecodeError``: a peer sent bytes we cannot parse (wire layer).
- ``ProtocolViolation``: a peer sent a well-formed but impossible message.
- ``ClientError``: a local application misused the API.
- ``ConfigurationError``: a configuration value is invalid (checked at start-up).
"""

from __future__ import annotations


class AmcastError(Exception):
    """Root of every error amcast raises on purpose."""


class ConfigurationError(AmcastError, ValueError):
    """A configuration value is invalid or unsafe."""


class DecodeError(AmcastError):
    """Bytes from the network could not be decoded; ``reason`` is a metric label."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class ProtocolViolation(AmcastError):
    """A peer's message is well formed but impossible; ``reason`` is a metric label."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class ClientError(AmcastError):
    """A local client misused the API; ``code`` goes into the error frame."""

    def __init__(self, code: str, detail: str = "") -> None:
        super().__init__(f"{code}: {detail}" if detail else code)
        self.code = code
        self.detail = detail


class BackpressureError(AmcastError):
    """``submit`` refused a message: the send window or the send queue is full.

    Nothing was queued; retry after a ``BackpressureReleased`` event.
    """
