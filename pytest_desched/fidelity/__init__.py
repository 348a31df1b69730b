"""Dry-run fidelity: the same state run in dry run and for real, every difference explained."""

from pytest_desched.fidelity.compare import FidelityResult, Half, PodFate, PodRef, Row, compare

__all__ = ["FidelityResult", "Half", "PodFate", "PodRef", "Row", "compare"]
