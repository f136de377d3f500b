"""Strict field readers shared by the datagram and membership decoders (wire layer).

Every reader checks the exact msgpack type (``type(x) is int``: no bools, no floats) and
the allowed range, and raises ``DecodeError("bad_field", ...)`` otherwise, so a decoder
built from them never raises anything else and never trusts a length it did not bound.
"""

from __future__ import annotations

from typing import Any

from ..errors import DecodeError
from .limits import MAX_TEXT_BYTES


def read_int(value: Any, lo: int, hi: int, what: str) -> int:
    if type(value) is not int or not lo <= value <= hi:
        raise DecodeError("bad_field", f"{what}={value!r:.40}")
    return value


def read_list(value: Any, what: str, *, max_len: int | None = None) -> list[Any]:
    if type(value) is not list:
        raise DecodeError("bad_field", f"{what} is not an array")
    if max_len is not None and len(value) > max_len:
        raise DecodeError("bad_field", f"{what} has {len(value)} > {max_len} entries")
    return value


def read_text(value: Any, what: str) -> str:
    """Short ASCII text carried as msgpack bin (the decoder refuses msgpack str)."""
    if type(value) is not bytes or len(value) > MAX_TEXT_BYTES:
        raise DecodeError("bad_field", f"{what} is not short bytes")
    try:
        return value.decode("ascii")
    except UnicodeDecodeError:
        raise DecodeError("bad_field", f"{what} is not ascii") from None


def read_bool(value: Any, what: str) -> bool:
    if type(value) is not bool:
        raise DecodeError("bad_field", f"{what} is not a boolean")
    return value
