"""amcast: atomic multicast with early-delivery total order (the ToTo family)."""

__version__ = "0.1.0"
