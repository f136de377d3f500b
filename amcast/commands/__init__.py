"""Subcommands of ``amcast``; each module defines ``register(subparsers)``."""
