"""Every plugin option and DESCHED_* variable is checked in pytest_configure (issue 40): a bad
one is a pytest usage error (exit 4) naming the valid choices before any test runs, even in
a run that uses no desched fixture (it once passed, and failed only at the first fixture)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_desched.config import OPTIONS

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for _, env, _ in OPTIONS:
        monkeypatch.delenv(env, raising=False)
    for env in ("DESCHED_MAX_INPUT_BYTES", "DESCHED_MAX_BULK_BYTES"):
        monkeypatch.delenv(env, raising=False)
    monkeypatch.setenv("DESCHED_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.parametrize(
    ("args", "env", "said"),
    [
        (
            ["--desched-provider", "kinda"],
            {},
            "unknown provider 'kinda'; use one of auto, embedded",
        ),
        ([], {"DESCHED_PROVIDER": "kinda"}, "unknown provider 'kinda'"),
        ([], {"DESCHED_KEEP": "forever"}, "DESCHED_KEEP='forever': choose from"),
        ([], {"DESCHED_CHART_SOURCE": "web"}, "DESCHED_CHART_SOURCE='web': choose from"),
        ([], {"DESCHED_WORKERS": "one"}, "must be an integer >= 2"),
        (["--desched-namespace", "Bad_NS"], {}, "--desched-namespace"),
        (["--desched-release", "-x"], {}, "--desched-release"),
        ([], {"DESCHED_MAX_INPUT_BYTES": "lots"}, "DESCHED_MAX_INPUT_BYTES"),
        ([], {"DESCHED_MAX_BULK_BYTES": "-1"}, "DESCHED_MAX_BULK_BYTES"),
        (["--desched-values", "no-such.yaml"], {}, "no-such.yaml"),
    ],
)
def test_a_bad_option_fails_at_configure_time(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    env: dict[str, str],
    said: str,
) -> None:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    pytester.makepyfile("def test_ok():\n    pass\n")  # uses no desched fixture
    res = pytester.runpytest_inprocess("-p", "no:cacheprovider", *args)
    assert res.ret == pytest.ExitCode.USAGE_ERROR, res.stdout.str()
    assert said in res.stderr.str()
    assert "1 passed" not in res.stdout.str()


def test_good_options_still_run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DESCHED_KEEP", "on-failure")
    pytester.makepyfile("def test_ok():\n    pass\n")
    res = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--desched-provider", "embedded")
    res.assert_outcomes(passed=1)


def test_help_still_works_with_a_bad_option(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DESCHED_PROVIDER", "kinda")
    res = pytester.runpytest_inprocess("--help")
    assert res.ret == 0 and "--desched-provider" in res.stdout.str()
