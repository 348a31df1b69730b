"""`desched fidelity`'s exit code: a comparison not made is no verdict (3), as canary and replay."""

from __future__ import annotations

import pytest

from pytest_desched.commands.fidelity import exit_code
from pytest_desched.errors import EXIT_FAILED, EXIT_INFRA, EXIT_OK


@pytest.mark.parametrize(
    ("outcomes", "code"),
    [
        (["pass", "pass"], EXIT_OK),
        (["pass", "error"], EXIT_INFRA),  # a half not comparable: no verdict, not UNSAFE
        (["error", "fail"], EXIT_FAILED),  # a verdict against you outranks no verdict
        (["fail"], EXIT_FAILED),
    ],
)
def test_exit_code(outcomes: list[str], code: int) -> None:
    assert exit_code(outcomes) == code
