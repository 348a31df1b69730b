"""The plugin's exit codes: a crash inside pytest-desched is 70 (errors.EXIT_INTERNAL), not the
1 of a failed experiment; a failed test or a deliberate error of the package stays 1."""

from __future__ import annotations

import pytest

from pytest_desched.errors import EXIT_INTERNAL

pytest_plugins = ["pytester"]


def test_a_crash_inside_the_package_exits_70(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        from pytest_desched import config

        def test_bug():
            config.parse_bins(42)  # raises AttributeError inside the package
        """
    )
    res = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    assert res.ret == EXIT_INTERNAL == 70
    res.stdout.fnmatch_lines(
        ["*pytest-desched: internal error*", "*test_bug: AttributeError:*", "*exit 70*"]
    )


@pytest.mark.parametrize(
    "body",
    [
        "assert 1 == 2",  # a failed test
        "raise RuntimeError('the user test itself')",  # not raised through the package
        "from pytest_desched.config import parse_bins; parse_bins('nope')",  # a ConfigError
    ],
)
def test_failures_that_are_not_crashes_stay_1(pytester: pytest.Pytester, body: str) -> None:
    pytester.makepyfile(f"def test_x():\n    {body}\n")
    res = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    assert res.ret == 1
    assert "internal error" not in res.stdout.str()
