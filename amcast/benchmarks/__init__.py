"""Benchmarks run by ``amcast bench NAME`` (see ``amcast.commands.bench``)."""
