"""Deterministic simulation (virtual clock, seeded randomness) of amcast processors."""
