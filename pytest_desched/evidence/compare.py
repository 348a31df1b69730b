"""Moved to `pytest_desched.outcome.identity`; this name is kept for one release."""

from pytest_desched.outcome.identity import (
    NOT_COMPARABLE,
    Comparison,
    Coverage,
    Difference,
    Identity,
    NotCompared,
    answer,
    answer_label,
    compare_runs,
    counted,
    differences,
    generation,
    identity_label,
    identity_of,
    owner_from_name,
)

__all__ = [
    "NOT_COMPARABLE",
    "Comparison",
    "Coverage",
    "Difference",
    "Identity",
    "NotCompared",
    "answer",
    "answer_label",
    "compare_runs",
    "counted",
    "differences",
    "generation",
    "identity_label",
    "identity_of",
    "owner_from_name",
]
