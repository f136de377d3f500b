"""Atomic multicast to multiple groups: SCALATOM (Scalable Atomic Multicast, Rodrigues,
Guerraoui and Schiper), its consensus, checkers, simulator and Table 2 counts."""
