"""The fuzz targets, by name (see ``fuzz``): each module has ``test_one_input``,
``seeds`` and ``INSTRUMENT`` (the top-level modules whose code coverage guides it)."""

from __future__ import annotations

import importlib
from types import ModuleType

TARGETS = ("datagram", "sealed", "native_sealed", "native_decode", "frames", "envelope", "config",
           "federation", "fedlink")


def load(name: str) -> ModuleType:
    """The target module ``name`` (``KeyError`` for an unknown one)."""
    if name not in TARGETS:
        raise KeyError(f"unknown fuzz target {name!r}; targets: {', '.join(TARGETS)}")
    return importlib.import_module(f"fuzz.targets.{name}")
