"""A user's repository on a machine without Go (issue 40): the plugin says the ToolError in one
line per test (as it does a ProviderError), does not say it cleans up a cluster that never
started, and leaves no empty evidence folder behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_desched.config import OPTIONS

pytest_plugins = ["pytester"]

NO_GO = "not cached and no `go` on PATH"


@pytest.fixture
def no_go(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No DESCHED_* from the host, an empty tool cache, a PATH with no Go (nor anything)."""
    for _, env, _ in OPTIONS:
        monkeypatch.delenv(env, raising=False)
    cache = tmp_path / "empty-cache"
    monkeypatch.setenv("DESCHED_CACHE_DIR", str(cache))
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    return cache


def test_a_missing_toolchain_is_one_line_and_leaves_nothing(
    pytester: pytest.Pytester, no_go: Path
) -> None:
    pytester.makepyfile(
        """
        def test_one(desched_cluster):
            pass

        def test_two(desched_release):
            pass
        """
    )
    res = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "-rN", "--desched-provider", "embedded"
    )
    out = res.stdout.str()
    res.assert_outcomes(errors=2)
    assert out.count(NO_GO) == 2  # one line in each test's error section
    assert "Traceback" not in out and "toolchain.py" not in out and "During handling" not in out
    assert "cleaning up" not in out  # no cluster was ever started
    assert not (pytester.path / "desched-artifacts").exists()  # no empty folder per attempt
    assert "evidence:" not in out  # the summary names no folder that is gone
